// Package api is cronlock's HTTP control API (docs/api.md), mounted by the
// engine on http.listen under /api/v1/: JSON reads of the jobs, their runs
// and audit trail and the nodes (the same documents as `cronlock status
// -json`, `history -json`, `history -events -json` and `nodes -json`, built
// by package control), and pause, resume and run requests. The OpenAPI
// description (openapi.json, embedded) is served at /api/v1/openapi.json.
//
// Mutating requests need the bearer token of http.token_file, compared in
// constant time (crypto/subtle): without a configured token they are
// refused with 403 and the reason, with a missing or wrong token with 401.
// With http.auth "all" reads need it too. Every error is a JSON object
// {"error": message}.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// OpenAPI is the API's OpenAPI 3 description, served at
// /api/v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Prefix is where the API is mounted.
const Prefix = "/api/v1/"

// callTimeout bounds the Redis calls of one request.
const callTimeout = 5 * time.Second

// Options configure New. Log, Jobs and Redis are required.
type Options struct {
	Log *zap.Logger
	// Jobs returns the daemon's running job configuration; it is called
	// from request goroutines and must be safe for that. The slice must
	// not be modified.
	Jobs func() []config.Job
	// Redis returns the Redis backend, or an error while it cannot be
	// reached (then requests answer 503).
	Redis func() (*redislock.Redis, error)
	// Token returns the bearer token, read at each authenticated request
	// (so a token rotated at reload applies at once); it must be safe for
	// concurrent use. A nil func, or a nil result, means none configured:
	// mutating requests answer 403.
	Token func() []byte
	// Auth is config.AuthWrites (default) or config.AuthAll.
	Auth string
	// NodeID names this daemon in the requester of mutating requests
	// ("api(ADDR)@NODE").
	NodeID string
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// server holds the handlers' dependencies.
type server struct {
	o Options
}

// token returns the configured token, nil when there is none.
func (s *server) token() []byte {
	if s.o.Token == nil {
		return nil
	}
	return s.o.Token()
}

// New returns the handler of every path under Prefix. It does no I/O.
func New(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Auth == "" {
		o.Auth = config.AuthWrites
	}
	s := &server{o: o}
	mux := http.NewServeMux()
	routes := []struct {
		pattern string
		methods map[string]http.HandlerFunc
	}{
		{"/api/v1/jobs", map[string]http.HandlerFunc{"GET": s.read(s.jobs)}},
		{"/api/v1/jobs/{job}", map[string]http.HandlerFunc{"GET": s.read(s.job)}},
		{"/api/v1/jobs/{job}/runs", map[string]http.HandlerFunc{"GET": s.read(s.runs)}},
		{"/api/v1/jobs/{job}/events", map[string]http.HandlerFunc{"GET": s.read(s.events)}},
		{"/api/v1/jobs/{job}/pause", map[string]http.HandlerFunc{"POST": s.write(s.pause)}},
		{"/api/v1/jobs/{job}/resume", map[string]http.HandlerFunc{"POST": s.write(s.resume)}},
		{"/api/v1/jobs/{job}/run", map[string]http.HandlerFunc{"POST": s.write(s.run)}},
		{"/api/v1/nodes", map[string]http.HandlerFunc{"GET": s.read(s.nodes)}},
		{"/api/v1/openapi.json", map[string]http.HandlerFunc{"GET": s.read(s.openapi)}},
	}
	for _, rt := range routes {
		mux.HandleFunc(rt.pattern, dispatch(rt.methods))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s; see %sopenapi.json", r.URL.Path, Prefix))
	})
	return mux
}

// dispatch routes by method, answering 405 (JSON, with Allow) otherwise.
func dispatch(methods map[string]http.HandlerFunc) http.HandlerFunc {
	allow := make([]string, 0, len(methods))
	for m := range methods {
		allow = append(allow, m)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := methods[r.Method]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; use %s", r.Method, strings.Join(allow, ", ")))
	}
}

// read wraps a read: with http.auth "all" it needs the token.
func (s *server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.Auth == config.AuthAll && !s.authorized(w, r) {
			return
		}
		h(w, r)
	}
}

// write wraps a mutating request: 403 without a configured token, 401
// without the right one.
func (s *server) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.token() == nil {
			writeError(w, http.StatusForbidden, "mutating endpoints are disabled: this daemon has no API token; "+
				"set http.token_file in its configuration and restart it")
			return
		}
		if s.authorized(w, r) {
			h(w, r)
		}
	}
}

// authorized checks the bearer token, answering 401 when it is missing or
// wrong.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	// The scheme is case-insensitive (RFC 7235 §2.1).
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cronlock"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <the token of http.token_file>")
		return false
	}
	// SHA-256 of both: compared in constant time whatever the lengths.
	token := s.token()
	sum, want := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256(token)
	if token == nil || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cronlock", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "wrong bearer token")
		return false
	}
	return true
}

// redis returns the backend and a context for the request's calls, or
// answers 503.
func (s *server) redis(w http.ResponseWriter, r *http.Request) (*redislock.Redis, context.Context, context.CancelFunc, bool) {
	rd, err := s.o.Redis()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "redis not reachable: "+err.Error())
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	return rd, ctx, cancel, true
}

// findJob returns the configured job of the request's {job}, or answers
// 404.
func (s *server) findJob(w http.ResponseWriter, r *http.Request) (config.Job, bool) {
	name := r.PathValue("job")
	for _, j := range s.o.Jobs() {
		if j.Name == name {
			return j, true
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("unknown job %q: not in this daemon's configuration", name))
	return config.Job{}, false
}

// limit reads ?limit=N (1..1000, default 20), or answers 400.
func limit(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 20, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want an integer 1..1000", v))
		return 0, false
	}
	return n, true
}

// requester names the caller of a mutating request: api(ADDR)@NODE.
func (s *server) requester(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "api(" + host + ")@" + s.o.NodeID
}

// writeJSON answers code with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nothing to do
}

// writeError answers code with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// redisError answers a failed Redis call with 503.
func redisError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusServiceUnavailable, "redis: "+err.Error())
}

// errBody is returned for a request body that is not the expected JSON.
var errBody = errors.New("request body")
