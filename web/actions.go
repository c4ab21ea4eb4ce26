package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cronlock/cronlock/api"
	"go.uber.org/zap"
)

// runTakeTimeout is how long run-now waits for a daemon to take the
// request (Redis backend) before it is withdrawn.
const runTakeTimeout = 10 * time.Second

// requester names who made a change from the dashboard: ui(ADDR)@NODE,
// as the API's api(ADDR)@NODE.
func (s *server) requester(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ui(" + host + ")@" + s.o.NodeID
}

// done sends the browser back to the job's page, saying what was done.
func (s *server) done(w http.ResponseWriter, r *http.Request, job, did string) {
	s.snap.invalidate()
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(job)+"?did="+url.QueryEscape(did), http.StatusSeeOther)
}

// pause answers POST /ui/jobs/{job}/pause (form: note, for), as
// `cronlock pause` and POST /api/v1/jobs/{job}/pause.
func (s *server) pause(w http.ResponseWriter, r *http.Request) {
	j, ok := s.pathJob(w, r)
	if !ok {
		return
	}
	spec := api.PauseSpec{Note: strings.TrimSpace(r.PostFormValue("note"))}
	if v := strings.TrimSpace(r.PostFormValue("for")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("for %q: want a duration, e.g. 2h, or nothing for a pause without end", v))
			return
		}
		spec.For, spec.ForSet = d, true
	}
	p, err := spec.Pause(s.requester(r), s.o.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := st.PauseFor(ctx, j.Name, p); err != nil {
		s.backendError(w, r, err)
		return
	}
	s.o.Log.Info("job paused from the dashboard", zap.String("job", j.Name), zap.String("by", p.By), zap.String("note", p.Note))
	s.done(w, r, j.Name, "paused")
}

// resume answers POST /ui/jobs/{job}/resume.
func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	j, ok := s.pathJob(w, r)
	if !ok {
		return
	}
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return
	}
	defer cancel()
	if _, err := st.ResumeBy(ctx, j.Name, s.requester(r), s.o.Now().UTC()); err != nil {
		s.backendError(w, r, err)
		return
	}
	s.o.Log.Info("job resumed from the dashboard", zap.String("job", j.Name), zap.String("by", s.requester(r)))
	s.done(w, r, j.Name, "resumed")
}

// runNow answers POST /ui/jobs/{job}/run (form: reason): on the Redis
// backend a run request that a daemon of the cluster takes (waited for up
// to runTakeTimeout, not for the run's end), on the memory backend a run
// in this daemon (api.Options.Run), as POST /api/v1/jobs/{job}/run.
func (s *server) runNow(w http.ResponseWriter, r *http.Request) {
	j, ok := s.pathJob(w, r)
	if !ok {
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if err := api.CheckText("reason", reason); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	by := s.requester(r)
	if s.o.Memory != nil {
		if s.o.Run == nil {
			s.fail(w, r, http.StatusNotImplemented, "this daemon cannot run jobs on request")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), runTakeTimeout)
		defer cancel()
		st, err := s.o.Run(ctx, j.Name, api.RunRequest{Requester: by, Reason: reason})
		if err != nil {
			s.fail(w, r, http.StatusGatewayTimeout, fmt.Sprintf("run of %s: %v (it goes on in the daemon)", j.Name, err))
			return
		}
		s.o.Log.Info("run requested from the dashboard", zap.String("job", j.Name), zap.String("by", by), zap.String("state", st.State))
		s.done(w, r, j.Name, "run:"+st.State)
		return
	}
	rd, err := s.o.Redis()
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	rr := api.NewRunRequest(j.Name, by, reason, false, s.o.Now())
	st, err := api.RequestRun(r.Context(), rd, rr, runTakeTimeout)
	switch {
	case errors.Is(err, api.ErrNotTaken):
		s.fail(w, r, http.StatusGatewayTimeout, fmt.Sprintf("no daemon took the run request of %s within %v; it was withdrawn "+
			"and will not run (is the job enabled on a live node? see Nodes)", j.Name, runTakeTimeout))
		return
	case err != nil:
		s.backendError(w, r, err)
		return
	}
	s.o.Log.Info("run requested from the dashboard", zap.String("job", j.Name), zap.String("by", by), zap.String("request", rr.ID))
	s.done(w, r, j.Name, "run:"+st.State)
}
