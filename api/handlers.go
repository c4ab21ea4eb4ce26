package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/ledger"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/config"
)

// jobs answers GET /api/v1/jobs: api.Jobs of every configured job.
func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := Jobs(ctx, rd, s.o.Jobs(), s.o.Now())
	if err != nil {
		s.redisError(w, err)
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
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := Jobs(ctx, rd, []config.Job{j}, s.o.Now())
	if err != nil {
		s.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows[0])
}

// runs answers GET /api/v1/jobs/{job}/runs?limit=N, with output tails.
func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	s.jobList(w, r, func(ctx context.Context, rd Store, job string, n int) (any, error) {
		return Runs(ctx, rd, job, n, true)
	})
}

// occurrences answers GET
// /api/v1/jobs/{job}/occurrences?from=&to=&status=&limit=N: the job's
// ledger records, newest first (from and to in Unix seconds; status ran,
// skipped, missed, claimed, queued or notrun).
func (s *server) occurrences(w http.ResponseWriter, r *http.Request) {
	q, ok := occurrenceQuery(w, r, s.o.Now().Unix())
	if !ok {
		return
	}
	s.jobList(w, r, func(ctx context.Context, rd Store, job string, n int) (any, error) {
		q.Limit = n
		return Occurrences(ctx, rd, job, q)
	})
}

// occurrenceQuery reads from, to and status (limit is jobList's); from
// defaults to 0, to to now.
func occurrenceQuery(w http.ResponseWriter, r *http.Request, now int64) (OccurrenceQuery, bool) {
	q := OccurrenceQuery{To: now, Status: r.URL.Query().Get("status"), Limit: 1}
	for name, dst := range map[string]*int64{"from": &q.From, "to": &q.To} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want Unix seconds", name, v))
				return q, false
			}
			*dst = n
		}
	}
	if err := q.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return q, false
	}
	return q, true
}

// events answers GET /api/v1/jobs/{job}/events?limit=N.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	s.jobList(w, r, func(ctx context.Context, rd Store, job string, n int) (any, error) {
		return Events(ctx, rd, job, n, s.o.Now())
	})
}

// jobList answers a GET of one job's list (runs, events): the job from
// the path, limit=N from the query, then read's rows as JSON, or the error
// response of the step that failed.
func (s *server) jobList(w http.ResponseWriter, r *http.Request,
	read func(ctx context.Context, rd Store, job string, n int) (any, error)) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	n, ok := limit(w, r)
	if !ok {
		return
	}
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	rows, err := read(ctx, rd, j.Name, n)
	if err != nil {
		s.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// nodes answers GET /api/v1/nodes.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) {
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	v, err := Nodes(ctx, rd, s.o.Now())
	if err != nil {
		s.redisError(w, err)
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
func (p pauseRequest) spec() (PauseSpec, error) {
	spec := PauseSpec{Note: p.Note}
	var err error
	if p.For != "" {
		spec.ForSet = true
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
	var p ledger.Pause
	if err == nil {
		p, err = spec.Pause(s.requester(r), s.o.Now())
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := rd.PauseFor(ctx, j.Name, p); err != nil {
		s.redisError(w, err)
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
	rd, ctx, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	old, err := rd.ResumeBy(ctx, j.Name, s.requester(r), s.o.Now().UTC())
	if err != nil {
		s.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j.Name, "paused": false, "lifted": old})
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// decodeBody reads an optional JSON body (at most maxBody bytes, one JSON
// object and nothing after it) into v; unknown fields are an error.
func decodeBody(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", errBody, err)
	case len(data) > maxBody:
		return fmt.Errorf("%w: larger than %d KiB, the limit", errBody, maxBody>>10)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return fmt.Errorf("%w: %v; want a JSON object such as {\"for\": \"2h\", \"note\": \"why\"}", errBody, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON object; send one object", errBody)
	}
	return nil
}

// runRequest is the body of POST …/run.
type runRequest struct {
	Reason  string `json:"reason"`
	Force   bool   `json:"force"`
	Wait    bool   `json:"wait"`
	Timeout string `json:"timeout"`
}

// run answers POST /api/v1/jobs/{job}/run: as `cronlock run` (on the
// cluster): 200 with the request's status once a daemon took it (with
// "wait": once it finished or was refused), 504 when none took it within
// the timeout (default 30s; the request is withdrawn). On the memory
// backend this daemon runs it (Options.Run).
func (s *server) run(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	var req runRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := CheckText("reason", req.Reason); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout := 30 * time.Second
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > MaxRunTimeout {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout %q: want a duration above 0 and at most %v", req.Timeout, MaxRunTimeout))
			return
		}
		timeout = d
	}
	if s.o.Memory != nil && s.o.Run != nil {
		st, err := s.o.Run(r.Context(), j.Name, RunRequest{Requester: s.requester(r), Reason: req.Reason, Force: req.Force, Wait: req.Wait})
		if err != nil {
			writeHint(w, http.StatusGatewayTimeout, fmt.Sprintf("run of %s: %v", j.Name, err), "the run goes on in the daemon; "+
				"GET "+Prefix+"jobs/"+j.Name+"/runs shows it once it ended")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"job": j.Name, "request": st.ID, "status": st})
		return
	}
	if s.o.Memory != nil {
		writeHint(w, http.StatusNotImplemented, "run requests need the redis backend; this daemon uses the memory backend "+
			"(its config has no redis.address)", "run the job on the daemon's machine: cronlock run "+j.Name+
			" -config FILE (it runs there and then, outside the daemon); or give the daemons a Redis (redis.address) "+
			"to request runs through the API")
		return
	}
	rd, err := s.o.Redis()
	if err != nil {
		s.redisError(w, fmt.Errorf("not reachable: %w", err))
		return
	}
	rr := NewRunRequest(j.Name, s.requester(r), req.Reason, req.Force, s.o.Now())
	st, err := RequestRun(r.Context(), rd, rr, timeout)
	switch {
	case errors.Is(err, ErrNotTaken):
		writeHint(w, http.StatusGatewayTimeout, fmt.Sprintf("no daemon took the run request of %s within %v; it was withdrawn and will not run",
			j.Name, timeout), "is the job configured and enabled on a live daemon? GET "+Prefix+"nodes lists the live daemons and their config drift")
		return
	case err != nil:
		s.redisError(w, err)
		return
	}
	if req.Wait {
		st, err = WaitRun(r.Context(), rd, j.Name, rr.ID)
		if errors.Is(err, ErrTakerGone) || errors.Is(err, ErrStatusLost) {
			writeError(w, http.StatusBadGateway, err.Error())
			return
		}
		if err != nil {
			s.redisError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j.Name, "request": rr.ID, "status": st})
}
