package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
)

// runPage is the run page's data.
type runPage struct {
	Job    string
	Row    occRow
	Output string // the stored output tail, the job's env values redacted
	// Running is true while the run is in progress: its output is stored
	// when it ends. LiveURL is where its output streams from while it
	// runs: "" until live output exists (issue 35); assets/app.js follows
	// it as an EventSource when set.
	Running bool
	LiveURL string
}

// run answers GET /ui/jobs/{job}/runs/{id}: one occurrence, {id} its
// slot (Unix seconds) or m<token> for a manual run.
func (s *server) run(w http.ResponseWriter, r *http.Request, a access) {
	j, ok := s.findJob(r.PathValue("job"))
	if !ok {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("unknown job %q: not in this daemon's configuration", r.PathValue("job")))
		return
	}
	id := r.PathValue("id")
	st, ctx, cancel, err := s.store(r.Context())
	if err != nil {
		s.backendError(w, r, err)
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
		Running: found.Status == "claimed"}
	s.render(w, r, http.StatusOK, "run", a, j.Name+" "+id, p)
}

// minSecret is the shortest env value redacted: shorter ones ("1", "on")
// would blank out ordinary output and give little away.
const minSecret = 4

// redact replaces every value of the job's env of at least minSecret
// bytes in out with [env NAME]. The node will redact before the output
// leaves it (issue 35); this keeps the page safe meanwhile and after.
func redact(out string, j *config.Job) string {
	for name, v := range j.Env {
		if len(v) >= minSecret {
			out = strings.ReplaceAll(out, v, "[env "+name+"]")
		}
	}
	return out
}
