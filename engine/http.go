package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// httpServer serves /metrics, /healthz and /readyz on http.listen, from
// the start until the last run and hook have ended (engine.Run): /healthz
// answers while the scheduler loop does, /readyz says not ready from the
// first shutdown signal on.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
}

// newHTTP binds http.listen (so a taken port fails the start with a clear
// error) and builds the handlers.
func (e *Engine) newHTTP() (*httpServer, error) {
	ln, err := net.Listen("tcp", e.cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", e.cfg.HTTP.Listen, err)
	}
	apiH, err := e.apiHandler()
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &httpServer{srv: &http.Server{Handler: e.withDashboard(e.handler(apiH)), ReadHeaderTimeout: 5 * time.Second}, ln: ln}, nil
}

// Run serves until ctx ends, then shuts the server down (bounded) and
// returns nil.
func (h *httpServer) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Serve(h.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler serves /metrics, /healthz (the scheduler loop answers a probe
// within 1s), /readyz (not shutting down, and the backend answered) and,
// when apiH is not nil, the HTTP API under /api/v1/ (package api). Every
// error, an unknown path included, is the API's JSON error body.
func (e *Engine) handler(apiH http.Handler) http.Handler {
	mux := http.NewServeMux()
	if apiH != nil {
		mux.Handle(api.Prefix, apiH)
	}
	mux.HandleFunc("/", api.NotFound)
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := e.ticker.Probe(ctx); err != nil {
			api.WriteError(w, http.StatusServiceUnavailable, "scheduler loop not answering: "+err.Error(),
				"the daemon is stuck or overloaded; its log says more (systemd's watchdog restarts it)")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if e.stopping.Load() {
			api.WriteError(w, http.StatusServiceUnavailable, "not ready: shutting down", "")
			return
		}
		if !e.health.Ready() {
			hint := "the daemon's log says why; it claims again once the backend answers"
			if e.backend.kind == "redis" {
				hint = "is " + e.cfg.Redis.Where() + " reachable? " + hint
			}
			api.WriteError(w, http.StatusServiceUnavailable, "not ready: "+e.backend.kind+" backend "+e.health.state(), hint)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// bindControlSocket binds the memory backend's control socket
// (api.SocketName of the config file), on which the daemon serves what
// http.listen serves, the API included, to its own user and root only: the
// cronlock command (status, history, pause, resume, nodes) reaches the
// daemon's state there. nil on the Redis backend (the command reads
// Redis), and when the socket is taken (another daemon was started with
// the same config file: logged, the daemon runs on). An API token file
// that cannot be read fails the start, as for http.listen.
func (e *Engine) bindControlSocket() (*httpServer, error) {
	if e.mem == nil || e.cfg.Path == "" {
		return nil, nil
	}
	apiH, err := e.apiHandler()
	if err != nil {
		return nil, err
	}
	name := api.SocketName(e.cfg.Path)
	ln, err := net.Listen("unix", name)
	if err != nil {
		e.log.Warn("control socket not bound: the cronlock command cannot reach this daemon (status, history, pause, resume); "+
			"is another daemon running with the same config file?", zap.String("socket", name), zap.String("config", e.cfg.Path),
			zap.Error(err))
		return nil, nil
	}
	e.log.Info("control socket: the cronlock command given this config file reaches the daemon here (its user and root only)",
		zap.String("socket", name), zap.String("config", e.cfg.Path))
	srv := &http.Server{Handler: peerGate(e.handler(apiH)), ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cred, err := peerCred(c)
			if err != nil {
				return ctx
			}
			return context.WithValue(ctx, credKey{}, cred)
		}}
	return &httpServer{srv: srv, ln: ln}, nil
}

type credKey struct{}

// peerCred returns the credentials of the process at the other end of a
// Unix socket connection (SO_PEERCRED: as of its connect).
func peerCred(c net.Conn) (*syscall.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// peerGate admits the control socket's requests of the daemon's own user
// and root, as trusted peers (api.Peer: named user@host in the pauses and
// resumes they make, no token needed); others get 403. An abstract socket
// has no file permissions, so this is its access control.
func peerGate(next http.Handler) http.Handler {
	euid := os.Geteuid()
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, _ := r.Context().Value(credKey{}).(*syscall.Ucred)
		if cred == nil || int(cred.Uid) != euid && cred.Uid != 0 {
			uid := "unknown"
			if cred != nil {
				uid = strconv.Itoa(int(cred.Uid))
			}
			api.WriteError(w, http.StatusForbidden, fmt.Sprintf("the control socket admits the daemon's user (uid %d) and root only; "+
				"this request came from uid %s", euid, uid), "run the command as the daemon's user or as root")
			return
		}
		name := "uid" + strconv.Itoa(int(cred.Uid))
		if u, err := user.LookupId(strconv.Itoa(int(cred.Uid))); err == nil {
			name = u.Username
		}
		next.ServeHTTP(w, r.WithContext(api.WithPeer(r.Context(), api.Peer{UID: int(cred.Uid), Name: name + "@" + host})))
	})
}
