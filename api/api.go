// Package api is cronlock's control plane: the operator model that the
// commands and the HTTP API share, and the HTTP API itself (docs/api.md).
//
// The operator model (control*.go) is what `cronlock status`, `nodes`,
// `history`, `pause` and `resume` and the API read and write, so that they
// answer alike (docs/architecture.md, "Control plane"). It holds no state:
// every call reads or writes a ReadStore (Redis through a
// *redislock.Redis, or a memory-backend daemon's own state) and blocks
// until it answers or ctx ends.
//
// The HTTP API is mounted by the engine on http.listen under /api/v1/:
// JSON reads of the jobs, their runs and audit trail and the nodes (the
// same documents as `cronlock status -json`, `history -json`, `history
// -events -json` and `nodes -json`), and pause, resume and run requests. The OpenAPI
// description (openapi.json, embedded) is served at /api/v1/openapi.json.
//
// Mutating requests need the bearer token of http.token_file, compared in
// constant time (crypto/subtle): without a configured token they are
// refused with 403 and the reason, with a missing or wrong token with 401.
// With http.auth "all" reads need it too. On the memory backend the
// daemon also serves the API on its control socket (package engine), whose
// peers are trusted (Peer): they need no token. Every error, an unknown
// path included, is a JSON object {"error": message, "hint": what to do}
// (hint left out when there is nothing to add).
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

	"github.com/cronlock/cronlock/ledger"

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
	// reached (then requests answer 503). Nil on the memory backend.
	Redis func() (*redislock.Redis, error)
	// Memory is the state of a daemon on the memory backend (package
	// engine), read and changed instead of Redis; nil on the Redis
	// backend.
	Memory Store
	// Run runs a job in this daemon, for POST …/run on the memory backend
	// (nil: such requests answer 501).
	Run RunFunc
	// Where names the state the API reads for error hints, e.g. `redis
	// 10.0.0.5:6379 (db 0, key prefix "cronlock:")`; never credentials.
	Where string
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
	// Output returns where runs keep and publish their output (the Redis
	// client, or a memory-backend daemon's own), or an error while it
	// cannot be reached; nil: output requests answer 501.
	Output func() (ledger.OutputStore, error)
	// Followers counts the live output followers of the daemon, shared
	// by its API and dashboard; nil: New makes one of its own.
	Followers *Followers
}

// Store is the state the API reads and changes: *redislock.Redis, or a
// memory-backend daemon's (Options.Memory).
type Store interface {
	ReadStore
	PauseFor(ctx context.Context, job string, p ledger.Pause) error
	ResumeBy(ctx context.Context, job, by string, at time.Time) (*ledger.Pause, error)
}

var _ Store = (*redislock.Redis)(nil)

// RunFunc runs job in the daemon now, as a run request taken by it would
// (package engine, memory backend): it returns the request's status once
// the run ended or was refused when wait, else once it was refused or,
// after a moment, is running (RunTaken). An error means ctx ended first.
type RunFunc func(ctx context.Context, job string, req RunRequest) (ledger.RunStatus, error)

// RunRequest is what a run request asks (the body of POST …/run, and who).
type RunRequest struct {
	Requester, Reason string
	Force, Wait       bool
}

// Peer is the operator at the other end of a memory-backend daemon's
// control socket, which admits only the daemon's own user and root
// (package engine): trusted, so mutating requests need no token. Name is
// the requester recorded for a pause or resume, user@host.
type Peer struct {
	UID  int
	Name string
}

type peerKey struct{}

// WithPeer returns ctx carrying the request's trusted peer.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerOf returns the request's trusted peer, if it came over the control
// socket.
func PeerOf(r *http.Request) (Peer, bool) {
	p, ok := r.Context().Value(peerKey{}).(Peer)
	return p, ok
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
	if o.Followers == nil {
		o.Followers = NewFollowers()
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
		{"/api/v1/jobs/{job}/occurrences", map[string]http.HandlerFunc{"GET": s.read(s.occurrences)}},
		{"/api/v1/jobs/{job}/occurrences/{slot}/output", map[string]http.HandlerFunc{"GET": s.read(s.output)}},
		{"/api/v1/jobs/{job}/pause", map[string]http.HandlerFunc{"POST": s.write(s.pause)}},
		{"/api/v1/jobs/{job}/resume", map[string]http.HandlerFunc{"POST": s.write(s.resume)}},
		{"/api/v1/jobs/{job}/run", map[string]http.HandlerFunc{"POST": s.write(s.run)}},
		{"/api/v1/nodes", map[string]http.HandlerFunc{"GET": s.read(s.nodes)}},
		{"/api/v1/openapi.json", map[string]http.HandlerFunc{"GET": s.read(s.openapi)}},
	}
	for _, rt := range routes {
		mux.HandleFunc(rt.pattern, dispatch(rt.methods))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { NotFound(w, r) })
	return mux
}

// NotFound answers a path that is no endpoint: 404 with the endpoints'
// description named.
func NotFound(w http.ResponseWriter, r *http.Request) {
	writeHint(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s", r.Method, r.URL.Path),
		"the API's endpoints are under "+Prefix+", described by GET "+Prefix+"openapi.json; "+
			"/metrics, /healthz and /readyz are served beside it")
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
		if _, trusted := PeerOf(r); !trusted && s.o.Auth == config.AuthAll && !s.authorized(w, r) {
			return
		}
		h(w, r)
	}
}

// write wraps a mutating request: 403 without a configured token, 401
// without the right one.
func (s *server) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, trusted := PeerOf(r); trusted {
			h(w, r)
			return
		}
		if s.token() == nil {
			hint := "set http.token_file in its configuration and restart it"
			if s.o.Memory != nil {
				hint += "; or use the cronlock command on the daemon's machine, as its user or root " +
					"(it reaches the daemon on its control socket, which needs no token)"
			}
			writeHint(w, http.StatusForbidden, "mutating endpoints are disabled: this daemon has no API token", hint)
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
		writeHint(w, http.StatusUnauthorized, "missing bearer token", "send Authorization: Bearer <the token of http.token_file>")
		return false
	}
	// SHA-256 of both: compared in constant time whatever the lengths.
	token := s.token()
	sum, want := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256(token)
	if token == nil || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cronlock", error="invalid_token"`)
		writeHint(w, http.StatusUnauthorized, "wrong bearer token", "send the token in the daemon's http.token_file "+
			"(read again at each reload: a rotated token replaces the old one)")
		return false
	}
	return true
}

// store returns the state to read (the memory backend's, else Redis) and
// a context for the request's calls, or answers 503.
func (s *server) store(w http.ResponseWriter, r *http.Request) (Store, context.Context, context.CancelFunc, bool) {
	var st Store = s.o.Memory
	if st == nil {
		rd, err := s.o.Redis()
		if err != nil {
			s.redisError(w, fmt.Errorf("not reachable: %w", err))
			return nil, nil, nil, false
		}
		st = rd
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	return st, ctx, cancel, true
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
	writeHint(w, http.StatusNotFound, fmt.Sprintf("unknown job %q: not in this daemon's configuration", name),
		"GET "+Prefix+"jobs lists the jobs it runs (a job added to the file is known after a reload: systemctl reload cronlock, or SIGHUP)")
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

// requester names the caller of a mutating request: user@host for a peer
// of the control socket, else api(ADDR)@NODE.
func (s *server) requester(r *http.Request) string {
	if p, ok := PeerOf(r); ok {
		return p.Name
	}
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

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	// Hint says what to do about it; "" when there is nothing to add.
	Hint string `json:"hint,omitempty"`
}

// writeError answers code with {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}

// writeHint answers code with {"error": msg, "hint": hint}.
func writeHint(w http.ResponseWriter, code int, msg, hint string) {
	writeJSON(w, code, Error{Error: msg, Hint: hint})
}

// WriteError answers code with the JSON error body (for the handlers the
// engine serves beside the API).
func WriteError(w http.ResponseWriter, code int, msg, hint string) { writeHint(w, code, msg, hint) }

// redisError answers a failed call with 503: on the Redis backend one to
// Redis, named in the hint.
func (s *server) redisError(w http.ResponseWriter, err error) {
	if s.o.Memory != nil {
		writeHint(w, http.StatusServiceUnavailable, "memory backend: "+err.Error(), "the daemon's log says more")
		return
	}
	where := "redis"
	if s.o.Where != "" {
		where = s.o.Where
	}
	writeHint(w, http.StatusServiceUnavailable, "redis: "+err.Error(),
		"is "+where+" reachable, and are redis.username/password right? GET /readyz and the daemon's log say more")
}

// errBody is returned for a request body that is not the expected JSON.
var errBody = errors.New("request body")
