package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	return &httpServer{srv: &http.Server{Handler: e.handler(apiH), ReadHeaderTimeout: 5 * time.Second}, ln: ln}, nil
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
// when apiH is not nil, the HTTP API under /api/v1/ (package api).
func (e *Engine) handler(apiH http.Handler) http.Handler {
	mux := http.NewServeMux()
	if apiH != nil {
		mux.Handle(api.Prefix, apiH)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := e.ticker.Probe(ctx); err != nil {
			http.Error(w, "scheduler loop not answering: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if e.stopping.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		if !e.health.Ready() {
			http.Error(w, "not ready: "+e.backend.kind+" backend "+e.health.state(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
