package web

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
	"golang.org/x/sync/errgroup"
)

// Job statuses of the jobs list (the status filter), from a job's state.
const (
	stOK       = "ok"       // its last run succeeded
	stFailing  = "failing"  // its last run did not succeed
	stRunning  = "running"  // a run is in progress on a live node
	stPaused   = "paused"   // paused (cronlock pause)
	stDisabled = "disabled" // enabled: false
	stNever    = "never"    // no run recorded yet
	stDone     = "done"     // fires no more (max_runs, @at passed, window ended)
)

// statuses lists the status filter's values in the order the page offers.
var statuses = []string{stFailing, stRunning, stPaused, stOK, stNever, stDisabled, stDone}

// Problem kinds of the overview (occurrences of the last 24 hours).
const (
	pbFailed  = "failed"  // ran and did not succeed
	pbMissed  = "missed"  // no node claimed it in time
	pbLate    = "late"    // started more than lateAfter after its slot
	pbTooLong = "running" // running longer than runningLongAfter
)

// lateAfter is the start delay from which a run counts as late.
const lateAfter = 30 * time.Second

// window is the overview's look-back.
const window = 24 * time.Hour

// jobRow is one job of the all-jobs view.
type jobRow struct {
	api.JobStatus
	Status string
	// Failed, Missed, Late and TooLong count its occurrences of the last
	// 24 hours of each problem kind.
	Failed, Missed, Late, TooLong int
}

// problem is one occurrence of the overview's failure list.
type problem struct {
	Job  string
	Kind string
	Occ  ledger.Occurrence
	At   time.Time // its slot, or its claim for a manual run
	Note string
}

// snapshot is the all-jobs view: every configured job's status and its
// problems of the last 24 hours, and the node list, read at At.
type snapshot struct {
	At      time.Time
	Jobs    []jobRow // in configuration order
	Cluster *api.Cluster
	// Problems are newest first; read only for the overview (HasProblems).
	Problems    []problem
	HasProblems bool
}

// snapCache keeps the last snapshot for ttl; a leaf type guarded by its
// mutex, held while one is built, so that concurrent requests wait for one
// build rather than each making their own.
type snapCache struct {
	ttl  time.Duration
	mu   sync.Mutex
	last *snapshot
	jobs *config.Job // first job of the configuration it was built from
	n    int
}

// invalidate drops the cached snapshot (after a pause, resume or run).
func (c *snapCache) invalidate() {
	c.mu.Lock()
	c.last = nil
	c.mu.Unlock()
}

// get returns a snapshot no older than the cache's ttl of the running
// configuration, building one when needed; with withProblems it holds the
// problems of the last 24 hours too (read once per snapshot, alongside
// the states when the snapshot is built).
func (c *snapCache) get(ctx context.Context, st api.Store, jobs []config.Job, now time.Time, withProblems bool) (*snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	same := len(jobs) == c.n && (len(jobs) == 0 || &jobs[0] == c.jobs)
	if c.last == nil || !same || c.ttl <= 0 || now.Sub(c.last.At) >= c.ttl {
		snap, err := buildSnapshot(ctx, st, jobs, now, withProblems)
		if err != nil {
			return nil, err
		}
		c.last, c.n = snap, len(jobs)
		if len(jobs) > 0 {
			c.jobs = &jobs[0]
		}
	}
	if withProblems && !c.last.HasProblems {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(parallel)
		probs := readProblems(gctx, g, st, jobs, c.last.At)
		if err := g.Wait(); err != nil {
			return nil, err
		}
		addProblems(c.last, probs)
	}
	return c.last, nil
}

// parallel is how many backend calls one snapshot makes at once (the
// Redis client pipelines concurrent calls on its connection).
const parallel = 16

// chunk is how many jobs one api.Cluster.Jobs or OccurrencesOf call reads.
const chunk = 500

// buildSnapshot reads the node list once, then every job's state
// (api.Cluster.Jobs, in chunks) and, withProblems, its problems
// (readProblems), parallel calls bounded by parallel; it returns once
// every call has ended.
func buildSnapshot(ctx context.Context, st api.Store, jobs []config.Job, now time.Time, withProblems bool) (*snapshot, error) {
	snap := &snapshot{At: now, Jobs: make([]jobRow, len(jobs))}
	cluster, err := api.Nodes(ctx, st, now)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	snap.Cluster = cluster
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for lo := 0; lo < len(jobs); lo += chunk {
		hi := min(lo+chunk, len(jobs))
		g.Go(func() error {
			rows, err := cluster.Jobs(gctx, st, jobs[lo:hi], now)
			for i, row := range rows {
				snap.Jobs[lo+i].JobStatus = row
				snap.Jobs[lo+i].Status = jobStatus(&jobs[lo+i], row)
			}
			return err
		})
	}
	var probs [][]problem
	if withProblems {
		probs = readProblems(gctx, g, st, jobs, now)
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if withProblems {
		addProblems(snap, probs)
	}
	return snap, nil
}

// occurrencesReader is a store that reads many jobs' occurrences in one
// call (*redislock.Redis: two round trips for all); readProblems uses it
// when the store has it.
type occurrencesReader interface {
	OccurrencesOf(ctx context.Context, jobs []string, from, to int64) ([][]ledger.Occurrence, error)
}

var _ occurrencesReader = (*redislock.Redis)(nil)

// readProblems starts the reads of every job's occurrences of the 24
// hours before now on g (in chunks from an occurrencesReader, else one
// call a job) and returns each job's problems, in the order of jobs,
// filled in once g.Wait returned nil.
func readProblems(ctx context.Context, g *errgroup.Group, st api.Store, jobs []config.Job, now time.Time) [][]problem {
	from, to := now.Add(-window).Unix(), now.Unix()
	probs := make([][]problem, len(jobs))
	if or, ok := st.(occurrencesReader); ok {
		for lo := 0; lo < len(jobs); lo += chunk {
			hi := min(lo+chunk, len(jobs))
			g.Go(func() error {
				names := make([]string, 0, hi-lo)
				for i := lo; i < hi; i++ {
					names = append(names, jobs[i].Name)
				}
				occ, err := or.OccurrencesOf(ctx, names, from, to)
				for k := range occ {
					probs[lo+k] = problems(&jobs[lo+k], occ[k], now)
				}
				return err
			})
		}
		return probs
	}
	for i := range jobs {
		g.Go(func() error {
			occ, err := st.Occurrences(ctx, jobs[i].Name, from, to)
			probs[i] = problems(&jobs[i], occ, now)
			return err
		})
	}
	return probs
}

// addProblems adds probs (readProblems's, of the snapshot's jobs) to the
// snapshot: each job's counts and the list, newest first.
func addProblems(snap *snapshot, probs [][]problem) {
	for i := range snap.Jobs {
		row := &snap.Jobs[i]
		for _, p := range probs[i] {
			switch p.Kind {
			case pbFailed:
				row.Failed++
			case pbMissed:
				row.Missed++
			case pbLate:
				row.Late++
			case pbTooLong:
				row.TooLong++
			}
		}
		snap.Problems = append(snap.Problems, probs[i]...)
	}
	slices.SortStableFunc(snap.Problems, func(a, b problem) int { return b.At.Compare(a.At) })
	snap.HasProblems = true
}

// jobStatus is the jobs list's status of a job.
func jobStatus(j *config.Job, row api.JobStatus) string {
	switch {
	case !j.Enabled:
		return stDisabled
	case row.Paused:
		return stPaused
	case len(row.RunningOn) > 0:
		return stRunning
	case row.Done != "" || row.Window == "ended":
		return stDone
	case row.Last == nil:
		return stNever
	case row.Last.Result != ledger.ResultSuccess:
		return stFailing
	}
	return stOK
}

// runningLongAfter is when a run in progress counts as running too long:
// the job's warn_after (the running_long alert's bound) when set, else
// past 80% of its timeout, or an hour without either.
func runningLongAfter(j *config.Job) time.Duration {
	if j.WarnAfter > 0 {
		return j.WarnAfter
	}
	if j.Timeout > 0 {
		return j.Timeout * 8 / 10
	}
	return time.Hour
}

// problems returns the occurrences of occ (a job's last 24 hours) that
// the overview lists, each with its kind.
func problems(j *config.Job, occ []ledger.Occurrence, now time.Time) []problem {
	var out []problem
	for _, o := range occ {
		p := problem{Job: j.Name, Occ: o, At: occurrenceTime(o)}
		switch {
		case o.Status == "ran" && o.Result != ledger.ResultSuccess:
			p.Kind, p.Note = pbFailed, resultText(o)
		case o.Status == "missed":
			p.Kind, p.Note = pbMissed, o.Reason
		case o.Status == "claimed" && o.Started > 0 && o.Finished == 0 &&
			now.Sub(time.UnixMilli(o.Started)) > runningLongAfter(j):
			p.Kind, p.Note = pbTooLong, "running for "+roundDur(now.Sub(time.UnixMilli(o.Started)))+" on "+o.Node
		case o.Slot > 0 && o.Started > 0 && startDelay(o) > lateAfter:
			p.Kind, p.Note = pbLate, "started "+roundDur(startDelay(o))+" after its slot"
		default:
			continue
		}
		out = append(out, p)
	}
	return out
}

// occurrenceTime is when an occurrence was due: its slot, or for a manual
// run its claim.
func occurrenceTime(o ledger.Occurrence) time.Time {
	if o.Slot > 0 {
		return time.Unix(o.Slot, 0)
	}
	return time.UnixMilli(o.Claimed)
}

// startDelay is how long after its slot a run started; 0 when it did not
// or has no slot.
func startDelay(o ledger.Occurrence) time.Duration {
	if o.Slot == 0 || o.Started == 0 {
		return 0
	}
	return time.UnixMilli(o.Started).Sub(time.Unix(o.Slot, 0))
}

// resultText is a run's result in words: "failure (exit 1)".
func resultText(o ledger.Occurrence) string {
	if o.Result == ledger.ResultSuccess {
		return o.Result
	}
	return fmt.Sprintf("%s (exit %d)", o.Result, o.ExitCode)
}

// roundDur is d rounded for reading: ms below a second, then 0.1 s, then
// whole seconds.
func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// LastID is the occurrence id of the job's last run ("" when none).
func (r jobRow) LastID() string {
	if r.Last == nil {
		return ""
	}
	return ledger.OccurrenceID(r.Last.SlotUnix, r.Last.Fence)
}
