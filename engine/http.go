package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpServer serves /metrics, /healthz and /readyz on http.listen.
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
	mux := http.NewServeMux()
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
		if !e.health.Ready() {
			http.Error(w, "not ready: "+e.backend.kind+" backend "+e.health.state(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}, nil
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
