// Package web is cronlock's dashboard (docs/dashboard.md), mounted by the
// engine on http.listen under /ui/: server-rendered HTML pages of the
// jobs, their occurrences and runs and the nodes, with pause, resume and
// run-now forms. Templates and assets are embedded in the binary; no page
// loads anything from another origin.
//
// It reads and writes the same state as the HTTP API (package api), through
// the same interfaces (api.Options: the memory backend's state or Redis,
// and the memory backend's run function) and package control, so a page
// and the API answer alike. It never reads a job's env, command or the
// Redis credentials, and redacts the job's env values from the output it
// shows (redact.go).
//
// Auth (auth.go) uses the API's bearer token (http.token_file): a login
// form exchanges it for a session cookie derived from it (HttpOnly,
// SameSite=Strict), so any node with the same token accepts the session
// and a rotated token ends every session. With http.auth "all" every page
// needs a session (or the bearer header); every write needs one, a CSRF
// token tied to the session, and a same-origin request.
package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// callTimeout bounds the backend calls of one page.
const callTimeout = 10 * time.Second

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Backend is the daemon's view of its backend for the nodes page: Kind is
// "redis" or "memory", State the readiness text of /readyz ("up",
// "unreachable", …), Where where it is (never credentials).
type Backend struct {
	Kind, State, Where string
	Ready              bool
}

// Options configure New. API is what the daemon gives the HTTP API (its
// Log, Jobs, Redis or Memory, Run, Token, Auth, NodeID and Now are used
// alike); Backend, when not nil, reports the backend's health (it must be
// safe for concurrent use).
type Options struct {
	API     api.Options
	Backend func() Backend
	// CacheFor is how long the all-jobs view (overview, jobs list) is
	// reused between requests; 0 = DefaultCacheFor, negative = not at all.
	CacheFor time.Duration
}

// DefaultCacheFor is how long the all-jobs view is reused: with 10,000
// jobs it costs some 10,000 backend calls.
const DefaultCacheFor = 2 * time.Second

// server holds the handlers' dependencies.
type server struct {
	o     api.Options
	be    func() Backend
	pages map[string]*template.Template
	snap  *snapCache
}

// New returns the handler of every path under Prefix. It does no I/O and
// starts no goroutines; the pages' backend calls run on the request's
// goroutine and a bounded group of its own (data.go), ended before the
// page is written.
func New(o Options) http.Handler {
	if o.API.Now == nil {
		o.API.Now = time.Now
	}
	if o.API.Auth == "" {
		o.API.Auth = config.AuthWrites
	}
	if o.API.Followers == nil {
		o.API.Followers = api.NewFollowers()
	}
	if o.API.Log == nil {
		o.API.Log = zap.NewNop()
	}
	if o.CacheFor == 0 {
		o.CacheFor = DefaultCacheFor
	}
	s := &server{o: o.API, be: o.Backend, pages: parsePages(), snap: &snapCache{ttl: o.CacheFor}}
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/assets/", cacheAssets(http.FileServerFS(assets))))
	mux.HandleFunc("GET /ui/login", s.loginForm)
	mux.HandleFunc("POST /ui/login", s.login)
	mux.HandleFunc("POST /ui/logout", s.logout)
	mux.HandleFunc("GET /ui/{$}", s.read(s.overview))
	mux.HandleFunc("GET /ui/jobs", s.read(s.jobs))
	mux.HandleFunc("GET /ui/jobs/{job}", s.read(s.job))
	mux.HandleFunc("GET /ui/jobs/{job}/runs/{id}", s.read(s.run))
	mux.HandleFunc("GET /ui/jobs/{job}/runs/{id}/live", s.read(s.live))
	mux.HandleFunc("GET /ui/nodes", s.read(s.nodes))
	mux.HandleFunc("POST /ui/jobs/{job}/pause", s.write(s.pause))
	mux.HandleFunc("POST /ui/jobs/{job}/resume", s.write(s.resume))
	mux.HandleFunc("POST /ui/jobs/{job}/run", s.write(s.runNow))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	// Cross-origin writes are refused before any handler (Sec-Fetch-Site,
	// else Origin against Host): the first of the two CSRF defences.
	return securityHeaders(http.NewCrossOriginProtection().Handler(mux))
}

// securityHeaders sets the headers of every answer: no framing, no sniffing,
// and a Content-Security-Policy that allows this origin's scripts and
// styles only.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// cacheAssets lets browsers keep the embedded assets for an hour.
func cacheAssets(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// store returns the state to read (the memory backend's, else Redis) and
// a context for the page's calls; an error when Redis cannot be reached.
func (s *server) store(ctx context.Context) (api.Store, context.Context, context.CancelFunc, error) {
	var st api.Store = s.o.Memory
	if st == nil {
		rd, err := s.o.Redis()
		if err != nil {
			return nil, nil, nil, err
		}
		st = rd
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	return st, ctx, cancel, nil
}

// storeFor is store for a handler: when the backend cannot be reached it
// answers the error page (backendError) and returns false.
func (s *server) storeFor(w http.ResponseWriter, r *http.Request) (api.Store, context.Context, context.CancelFunc, bool) {
	st, ctx, cancel, err := s.store(r.Context())
	if err != nil {
		s.backendError(w, r, err)
		return nil, nil, nil, false
	}
	return st, ctx, cancel, true
}

// pathJob is the configured job named by the request's {job}; when there
// is none it answers 404 and returns false.
func (s *server) pathJob(w http.ResponseWriter, r *http.Request) (config.Job, bool) {
	j, ok := s.findJob(r.PathValue("job"))
	if !ok {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("unknown job %q: not in this daemon's configuration", r.PathValue("job")))
	}
	return j, ok
}

// findJob returns the configured job named name.
func (s *server) findJob(name string) (config.Job, bool) {
	for _, j := range s.o.Jobs() {
		if j.Name == name {
			return j, true
		}
	}
	return config.Job{}, false
}
