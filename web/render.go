package web

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// page is what the layout template gets: the page's own data in Data.
type page struct {
	Title  string
	Nav    string // the nav entry to highlight: overview, jobs, nodes
	Access access
	Node   string // the node serving the page
	Now    time.Time
	Data   any
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":      ago,
	"dur":      roundDur,
	"ms":       func(ms int64) string { return roundDur(time.Duration(ms) * time.Millisecond) },
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"local":    func(t time.Time) string { return t.Format("Mon 2006-01-02 15:04:05 MST") },
	"unixms":   func(ms int64) time.Time { return time.UnixMilli(ms) },
	"pathesc":  url.PathEscape,
	"queryesc": url.QueryEscape,
	"join":     strings.Join,
	"add":      func(a, b int) int { return a + b },
}

// pageNames are the templates in templates/, each rendered inside
// layout.html.
var pageNames = []string{"overview", "jobs", "job", "run", "nodes", "login", "error"}

// parsePages parses the embedded templates; a template that does not parse
// is a bug caught by every test, so it panics.
func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}

// render writes the page name with data, in the layout, as code. The page
// is executed into a buffer first so that a template error is a 500, not
// half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, code int, name string, a access, title string, data any) {
	nav, _, _ := strings.Cut(name, "/")
	var buf bytes.Buffer
	err := s.pages[name].Execute(&buf, page{Title: title, Nav: nav, Access: a, Node: s.o.NodeID, Now: s.o.Now(), Data: data})
	if err != nil {
		s.o.Log.Error("dashboard page not rendered", zap.String("page", name), zap.String("path", r.URL.Path), zap.Error(err))
		http.Error(w, "page not rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes()) // the client went away: nothing to do
}

// errorPage is the error template's data.
type errorPage struct {
	Code int
	Msg  string
}

// fail answers code with an error page saying msg.
func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", s.accessOf(r), http.StatusText(code), errorPage{Code: code, Msg: msg})
}

// backendError answers a failed backend read with 503, naming the
// backend (never its credentials).
func (s *server) backendError(w http.ResponseWriter, r *http.Request, err error) {
	where := "the memory backend"
	if s.o.Memory == nil {
		where = "redis"
		if s.o.Where != "" {
			where = s.o.Where
		}
	}
	s.o.Log.Warn("dashboard page: backend read failed", zap.String("path", r.URL.Path), zap.Error(err))
	s.fail(w, r, http.StatusServiceUnavailable, "could not read the state from "+where+": "+err.Error())
}

// ago says how long before now t was: "3s ago", "in 2m".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + roundAgo(-d)
	}
	return roundAgo(d) + " ago"
}

// roundAgo is d in its largest unit.
func roundAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// remoteField is the request's remote address as a log field.
func remoteField(r *http.Request) zap.Field { return zap.String("remote", r.RemoteAddr) }
