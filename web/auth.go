package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
)

// Session cookie (docs/dashboard.md, "Sign-in"). The cookie holds no token:
// its value is "EXPIRY.MAC", EXPIRY in Unix seconds and MAC the
// HMAC-SHA256 of it under a key derived from the API token (sessionKey).
// Nothing is stored on the server, so every node with the same token
// accepts it, and rotating the token (http.token_file, read again at
// reload) ends every session.
const (
	cookieName = "cronlock_session"
	// sessionFor is how long a session lasts.
	sessionFor = 12 * time.Hour
	// csrfField is the form field of the CSRF token.
	csrfField = "csrf"
)

// access is what the request may do.
type access struct {
	// Read: it may see the pages; Write: it may pause, resume and run.
	Read, Write bool
	// Session is true when it came with a valid session cookie (then CSRF
	// is its form token); false for the bearer header or no credentials.
	Session bool
	CSRF    string
}

// sessionKey is the MAC key of sessions made with token.
func sessionKey(token []byte) []byte {
	k := sha256.Sum256(append([]byte("cronlock dashboard session v1\x00"), token...))
	return k[:]
}

// mac returns the hex HMAC-SHA256 of msg under key.
func mac(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// newSession returns the cookie value of a session made at now.
func newSession(token []byte, now time.Time) string {
	exp := strconv.FormatInt(now.Add(sessionFor).Unix(), 10)
	return exp + "." + mac(sessionKey(token), "session|"+exp)
}

// validSession reports whether value is a session made with token that
// has not expired at now.
func validSession(token []byte, value string, now time.Time) bool {
	exp, sum, ok := strings.Cut(value, ".")
	if !ok || token == nil {
		return false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= n {
		return false
	}
	return hmac.Equal([]byte(sum), []byte(mac(sessionKey(token), "session|"+exp)))
}

// csrfToken is the form token of the session value: bound to it, so a
// token seen in one session is worthless in another.
func csrfToken(token []byte, session string) string {
	return mac(sessionKey(token), "csrf|"+session)[:32]
}

// tokenEqual compares got with the token in constant time.
func tokenEqual(got string, token []byte) bool {
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256(token)
	return token != nil && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// accessOf works out what r may do: with a valid session cookie or the
// bearer token, read and write; else read unless http.auth is "all".
func (s *server) accessOf(r *http.Request) access {
	token := s.token()
	if c, err := r.Cookie(cookieName); err == nil && validSession(token, c.Value, s.o.Now()) {
		return access{Read: true, Write: true, Session: true, CSRF: csrfToken(token, c.Value)}
	}
	if scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") &&
		tokenEqual(got, token) {
		return access{Read: true, Write: true}
	}
	return access{Read: s.o.Auth != config.AuthAll}
}

// token returns the API token, nil when none is configured.
func (s *server) token() []byte {
	if s.o.Token == nil {
		return nil
	}
	return s.o.Token()
}

// read wraps a page: without read access, a browser is sent to the
// sign-in form (303) and the page's path comes back after it.
func (s *server) read(h func(http.ResponseWriter, *http.Request, access)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.accessOf(r)
		if !a.Read {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, a)
	}
}

// write wraps a form's POST: it needs write access (401 otherwise, 403
// when the daemon has no token) and, with a session, the session's CSRF
// token in the form (403 otherwise). Cross-origin requests were refused
// before (New).
func (s *server) write(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.token() == nil {
			s.fail(w, r, http.StatusForbidden, "changes are disabled: this daemon has no API token (set http.token_file in its configuration)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		a := s.accessOf(r)
		if !a.Write {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cronlock"`)
			s.fail(w, r, http.StatusUnauthorized, "sign in with the operator token to pause, resume or run a job")
			return
		}
		if a.Session && !hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(a.CSRF)) {
			s.fail(w, r, http.StatusForbidden, "the form's CSRF token is missing or stale: reload the page and try again")
			return
		}
		h(w, r)
	}
}

// loginPage is the sign-in form's data.
type loginPage struct {
	Next, Error string
	NoToken     bool
}

// loginForm answers GET /ui/login.
func (s *server) loginForm(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", access{}, "Sign in", loginPage{Next: safeNext(r.URL.Query().Get("next")), NoToken: s.token() == nil})
}

// login answers POST /ui/login: a right token sets the session cookie and
// goes on to next; a wrong one shows the form again (401).
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	next := safeNext(r.PostFormValue("next"))
	token := s.token()
	if !tokenEqual(r.PostFormValue("token"), token) {
		s.o.Log.Info("dashboard sign-in refused: wrong token", remoteField(r))
		s.render(w, r, http.StatusUnauthorized, "login", access{}, "Sign in",
			loginPage{Next: next, Error: "That is not this daemon's token (http.token_file).", NoToken: token == nil})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: newSession(token, s.o.Now()), Path: Prefix,
		MaxAge: int(sessionFor / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout answers POST /ui/logout: the cookie is dropped (a copy of it
// stays valid until it expires or the token is rotated).
func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// safeNext returns next when it is a path of the dashboard, else the
// overview: a sign-in never redirects elsewhere.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix
}
