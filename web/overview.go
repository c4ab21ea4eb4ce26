package web

import (
	"net/http"
	"slices"
	"time"
)

// overviewProblems is how many problem occurrences the overview lists;
// overviewNext how many next fire times.
const (
	overviewProblems = 50
	overviewNext     = 15
)

// overviewPage is the overview's data.
type overviewPage struct {
	// Counts of the problem kinds and statuses, each linked to the list.
	Failed, Missed, Late, TooLong int
	Problems                      []problem // newest first, at most overviewProblems
	More                          int       // problems not listed
	Running                       []jobRow
	Next                          []nextFire
	Status                        map[string]int
	Statuses                      []string
	Jobs, Live, Gone              int
	Drift                         int
}

// nextFire is one upcoming fire time of a job.
type nextFire struct {
	Job, Zone string
	At        time.Time
}

// overview answers GET /ui/: failures first (the last 24 hours), then
// what runs now, then what runs next.
func (s *server) overview(w http.ResponseWriter, r *http.Request, a access) {
	snap, ok := s.snapshot(w, r, true)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "overview", a, "Overview", buildOverview(snap))
}

// snapshot returns the all-jobs view (with the problems of the last 24
// hours when withProblems), or answers 503.
func (s *server) snapshot(w http.ResponseWriter, r *http.Request, withProblems bool) (*snapshot, bool) {
	st, ctx, cancel, ok := s.storeFor(w, r)
	if !ok {
		return nil, false
	}
	defer cancel()
	snap, err := s.snap.get(ctx, st, s.o.Jobs(), s.o.Now(), withProblems)
	if err != nil {
		s.backendError(w, r, err)
		return nil, false
	}
	return snap, true
}

// buildOverview derives the overview from a snapshot.
func buildOverview(snap *snapshot) overviewPage {
	p := overviewPage{Status: map[string]int{}, Statuses: statuses, Jobs: len(snap.Jobs), Drift: len(snap.Cluster.Drift)}
	for _, pb := range snap.Problems {
		switch pb.Kind {
		case pbFailed:
			p.Failed++
		case pbMissed:
			p.Missed++
		case pbLate:
			p.Late++
		case pbTooLong:
			p.TooLong++
		}
	}
	p.Problems = snap.Problems[:min(len(snap.Problems), overviewProblems)]
	p.More = len(snap.Problems) - len(p.Problems)
	var next []nextFire
	for _, j := range snap.Jobs {
		p.Status[j.Status]++
		if len(j.RunningOn) > 0 {
			p.Running = append(p.Running, j)
		}
		if t := j.NextTime(); !t.IsZero() && !j.Paused && j.Enabled {
			next = append(next, nextFire{Job: j.Job, Zone: j.Timezone, At: t})
			if len(next) > 4*overviewNext { // keep the sort small at 10,000 jobs
				next = earliest(next, overviewNext)
			}
		}
	}
	p.Next = earliest(next, overviewNext)
	for _, n := range snap.Cluster.Nodes {
		if n.State == "live" {
			p.Live++
		} else {
			p.Gone++
		}
	}
	return p
}

// earliest returns the n earliest of next, sorted (by time, then job).
func earliest(next []nextFire, n int) []nextFire {
	slices.SortFunc(next, func(a, b nextFire) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if a.Job < b.Job {
			return -1
		}
		return 1
	})
	return next[:min(len(next), n)]
}
