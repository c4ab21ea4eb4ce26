package engine

import (
	"net/http"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/web"
)

// dashboard returns the web dashboard (package web) over the same state,
// token and auth as the API options o, with the backend's health.
func (e *Engine) dashboard(o api.Options) http.Handler {
	kind, where := e.backend.kind, o.Where
	return web.New(web.Options{API: o, Backend: func() web.Backend {
		return web.Backend{Kind: kind, State: e.health.state(), Ready: e.health.Ready(), Where: where}
	}})
}

// withDashboard serves the dashboard under /ui/ (http.listen only, not
// the control socket) and h on every other path.
func (e *Engine) withDashboard(h http.Handler) http.Handler {
	if e.webH == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, e.webH)
	mux.Handle("/", h)
	return mux
}
