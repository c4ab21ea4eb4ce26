package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/process"
)

// runPage is the run page's data.
type runPage struct {
	Job    string
	Row    occRow
	Output string // the stored output tail, the job's env values redacted
	// Running is true while the run is in progress: its output is stored
	// when it ends. LiveURL is where its output streams from while it
	// runs (live); assets/app.js follows it as an EventSource when set.
	Running bool
	LiveURL string
	// Full: Output is the run's stored output (output.max_bytes), not the
	// ledger's 4 KiB tail.
	Full bool
	// HasHooks: the job has on_success or on_failure; Hooks are the kept
	// results of the run's hook (HookStore), redacted on the node.
	HasHooks bool
	Hooks    []ledger.HookResult
}

// run answers GET /ui/jobs/{job}/runs/{id}: one occurrence, {id} its
// slot (Unix seconds) or m<token> for a manual run.
func (s *server) run(w http.ResponseWriter, r *http.Request, a access) {
	j, ok := s.pathJob(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return
	}
	defer cancel()
	now := s.o.Now()
	q := api.OccurrenceQuery{To: now.Unix(), Limit: 10000}
	if slot, err := strconv.ParseInt(id, 10, 64); err == nil && slot > 0 {
		q.From, q.To = slot, slot
	} else if !strings.HasPrefix(id, "m") {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("%q is no occurrence id: want a slot in Unix seconds or m<token>", id))
		return
	}
	occ, err := api.Occurrences(ctx, st, j.Name, q)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	var found *ledger.Occurrence
	for i := range occ {
		if occ[i].ID == id {
			found = &occ[i]
			break
		}
	}
	if found == nil {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("job %s has no occurrence %s in its ledger (never due, not yet decided, or "+
			"older than the ledger's retention)", j.Name, id))
		return
	}
	evs, err := api.Events(ctx, st, j.Name, jobEvents, now)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	p := runPage{Job: j.Name, Row: newOccRow(*found, evs, now), Output: redact(found.Output, &j),
		Running: found.Status == "claimed", HasHooks: j.OnSuccess != "" || j.OnFailure != ""}
	s.fillOutput(ctx, &p, j, id)
	s.fillHooks(ctx, &p, j, id)
	s.render(w, r, http.StatusOK, "run", a, j.Name+" "+id, p)
}

// fillOutput sets a running run's LiveURL (its output streams from the
// start, so the page starts empty), or a finished run's full stored
// output in place of the ledger's tail. Without a store, or when it cannot
// be read, the page keeps the tail.
func (s *server) fillOutput(ctx context.Context, p *runPage, j config.Job, id string) {
	if s.o.Output == nil {
		return
	}
	if p.Running {
		p.LiveURL, p.Output = "/ui/jobs/"+url.PathEscape(j.Name)+"/runs/"+url.PathEscape(id)+"/live", ""
		return
	}
	out, err := s.o.Output()
	if err != nil {
		return
	}
	if b, err := out.Output(ctx, j.Name, id); err == nil {
		p.Output, p.Full = redact(string(b), &j), true
	}
}

// fillHooks sets the run's kept hook results, when the store keeps them;
// a read that fails leaves none (the page says none is kept).
func (s *server) fillHooks(ctx context.Context, p *runPage, j config.Job, id string) {
	if s.o.Output == nil {
		return
	}
	out, err := s.o.Output()
	if err != nil {
		return
	}
	if hs, ok := out.(ledger.HookStore); ok {
		p.Hooks, _ = hs.HookResults(ctx, j.Name, id)
	}
}

// live answers GET /ui/jobs/{job}/runs/{id}/live: the run's output as
// text/event-stream (api.ServeFollow, counted with the API's followers:
// 429 beyond api.MaxFollowers), for the run page's script.
func (s *server) live(w http.ResponseWriter, r *http.Request, _ access) {
	j, ok := s.findJob(r.PathValue("job"))
	if !ok || s.o.Output == nil {
		http.Error(w, "no live output for this job here", http.StatusNotFound)
		return
	}
	id, _, err := api.OccurrenceID(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	out, err := s.o.Output()
	if err != nil {
		http.Error(w, "backend not reachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	st, _, cancel, err := s.store(r.Context())
	if err != nil {
		http.Error(w, "backend not reachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	cancel() // st is used with the request's context
	api.ServeFollow(w, r, s.o.Followers, st, out, j.Name, id, s.o.Now)
}

// redact replaces every value of the job's env of at least
// process.MinSecret bytes, and each line of a multi-line value, in out with
// [redacted env NAME] by the node's own rule (process.Redactor), as the node
// does before output leaves it: a second guard, for records written before
// nodes redacted.
func redact(out string, j *config.Job) string {
	return process.NewRedactor(j.Env, nil).RedactString(out)
}
