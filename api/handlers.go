package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/control"
	"github.com/cronlock/cronlock/redislock"
)

// jobs answers GET /api/v1/jobs: control.Jobs of every configured job.
func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := control.Jobs(ctx, rd, s.o.Jobs(), s.o.Now())
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// job answers GET /api/v1/jobs/{job}.
func (s *server) job(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := control.Jobs(ctx, rd, []config.Job{j}, s.o.Now())
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows[0])
}

// runs answers GET /api/v1/jobs/{job}/runs?limit=N, with output tails.
func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	n, ok := limit(w, r)
	if !ok {
		return
	}
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := control.Runs(ctx, rd, j.Name, n, true)
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// events answers GET /api/v1/jobs/{job}/events?limit=N.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	n, ok := limit(w, r)
	if !ok {
		return
	}
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := control.Events(ctx, rd, j.Name, n, s.o.Now())
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// nodes answers GET /api/v1/nodes.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) {
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	v, err := control.Nodes(ctx, rd, s.o.Now())
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// openapi answers GET /api/v1/openapi.json.
func (s *server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}

// pauseRequest is the body of POST …/pause.
type pauseRequest struct {
	For   string `json:"for"`
	Until string `json:"until"`
	Note  string `json:"note"`
}

// spec converts the request, naming the bad field.
func (p pauseRequest) spec() (control.PauseSpec, error) {
	spec := control.PauseSpec{Note: p.Note}
	var err error
	if p.For != "" {
		if spec.For, err = time.ParseDuration(p.For); err != nil {
			return spec, fmt.Errorf("for %q: want a duration, e.g. 2h", p.For)
		}
	}
	if p.Until != "" {
		if spec.Until, err = time.Parse(time.RFC3339, p.Until); err != nil {
			return spec, fmt.Errorf("until %q: want RFC 3339, e.g. 2026-12-01T18:00:00Z", p.Until)
		}
	}
	return spec, nil
}

// pause answers POST /api/v1/jobs/{job}/pause: as `cronlock pause`.
func (s *server) pause(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	var req pauseRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	spec, err := req.spec()
	var p redislock.Pause
	if err == nil {
		p, err = spec.Pause(s.requester(r), s.o.Now())
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := rd.PauseFor(ctx, j.Name, p); err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j.Name, "paused": true, "pause": p})
}

// resume answers POST /api/v1/jobs/{job}/resume: as `cronlock resume`.
func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	rd, ctx, cancel, ok := s.redis(w, r)
	if !ok {
		return
	}
	defer cancel()
	old, err := rd.ResumeBy(ctx, j.Name, s.requester(r), s.o.Now().UTC())
	if err != nil {
		redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j.Name, "paused": false, "lifted": old})
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// decodeBody reads an optional JSON body into v; unknown fields are an
// error.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return fmt.Errorf("%w: %v; want a JSON object such as {\"for\": \"2h\", \"note\": \"why\"}", errBody, err)
	}
	return nil
}
