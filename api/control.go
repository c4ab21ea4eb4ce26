package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
)

// NextTimes is how many next fire times a JobStatus lists.
const NextTimes = 3

// JobStatus is one job in `cronlock status -json` and GET /api/v1/jobs.
type JobStatus struct {
	Job      string `json:"job"`
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
	Enabled  bool   `json:"enabled"`
	// Next is the next fire time in the job's zone (RFC 3339), "" when the
	// schedule has no further time; NextFireTimes the next NextTimes.
	Next          string   `json:"next"`
	NextFireTimes []string `json:"next_fire_times"`
	Last          *Run     `json:"last"` // null when the job never ran
	LeaseHolder   string   `json:"lease_holder"`
	LeaseTTLMs    int64    `json:"lease_ttl_ms"` // remaining lease time
	Paused        bool     `json:"paused"`
	// Pause is who paused the job, when, why and until; null when not
	// paused.
	Pause *ledger.Pause `json:"pause"`
	Fence int64         `json:"fence"` // last fencing token handed out
	Slot  int64         `json:"slot"`  // last claimed or skipped slot, Unix seconds
	// RunningOn are the live nodes with a run of the job in progress, by
	// their heartbeat records (sorted).
	RunningOn []string `json:"running_on"`
	// Drift is how the job differs between the live nodes; null when it is
	// configured alike on all of them.
	Drift *cluster.Job `json:"drift"`
	// Runs is the job's successful runs counted for max_runs; MaxRuns its
	// limit (0 = none).
	Runs    int64 `json:"runs"`
	MaxRuns int   `json:"max_runs"`
	// Pending is the job's pending slot (overlap queue, replace), Unix
	// seconds, 0 = none.
	Pending int64 `json:"pending_slot"`
	// Done says why the job fires no more ("" while it does): "max_runs"
	// once Runs has reached MaxRuns, "at_passed" once its @at time passed.
	Done string `json:"done"`
	// ActiveFrom and ActiveUntil are the job's active window as configured
	// ("" = unbounded); Window is "" without one, else "not_started",
	// "active" or "ended" (the job does not fire any more).
	ActiveFrom  string `json:"active_from"`
	ActiveUntil string `json:"active_until"`
	Window      string `json:"window"`
	// Nodes is the job's nodes: (empty when any node may run it); Runners
	// the live nodes whose node.tags match it (every live node for a job
	// without nodes:, sorted), by their heartbeat records written within
	// cluster.MaxAge beats; Unrunnable is true when the job has a
	// nodes: and no live node matches it: its slots are not run.
	Nodes      []string `json:"nodes"`
	Runners    []string `json:"runners"`
	Unrunnable bool     `json:"unrunnable"`
	loc        *time.Location
	next       time.Time
}

// Location is the job's zone.
func (s JobStatus) Location() *time.Location { return s.loc }

// NextTime is the next fire time in the job's zone; zero when none.
func (s JobStatus) NextTime() time.Time { return s.next }

// UnmarshalJSON reads a JobStatus as the API writes it, with its zone and
// next fire time (Location, NextTime) from Timezone and Next (UTC when
// the zone is unknown here).
func (s *JobStatus) UnmarshalJSON(b []byte) error {
	type plain JobStatus
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	s.loc = time.UTC
	if loc, err := time.LoadLocation(s.Timezone); err == nil {
		s.loc = loc
	}
	s.next = time.Time{}
	if t, err := time.Parse(time.RFC3339, s.Next); err == nil {
		s.next = t.In(s.loc)
	}
	return nil
}

// Run is one finished run (history, and the last run in JobStatus).
// Instants are RFC 3339 in UTC; Slot is "" for a manual run.
type Run struct {
	RunID      string `json:"run_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
	DurationMs int64  `json:"duration_ms"`
	Node       string `json:"node"`
	Slot       string `json:"slot"`
	SlotUnix   int64  `json:"slot_unix"`
	Trigger    string `json:"trigger"`             // schedule | catchup | queued | backfill | manual ("" for runs recorded before triggers were)
	Requester  string `json:"requester,omitempty"` // who asked for a manual run, user@host
	Attempts   int    `json:"attempts"`
	Result     string `json:"result"`
	ExitCode   int    `json:"exit_code"`
	Fence      int64  `json:"fence"`
	OutputTail string `json:"output_tail,omitempty"`
	start, end time.Time
}

// StartTime and EndTime are the run's instants.
func (r *Run) StartTime() time.Time { return r.start }

// EndTime is when the run ended.
func (r *Run) EndTime() time.Time { return r.end }

// UnmarshalJSON reads a Run as the API writes it, with its instants
// (StartTime, EndTime) from Start and End.
func (r *Run) UnmarshalJSON(b []byte) error {
	type plain Run
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.start, _ = time.Parse(time.RFC3339Nano, r.Start)
	r.end, _ = time.Parse(time.RFC3339Nano, r.End)
	return nil
}

// NewRun converts a record; the output tail is kept only when tail.
func NewRun(r ledger.RunRecord, tail bool) *Run {
	h := &Run{RunID: r.RunID, Start: r.Start.UTC().Format(time.RFC3339Nano),
		End: r.End.UTC().Format(time.RFC3339Nano), DurationMs: r.End.Sub(r.Start).Milliseconds(),
		Node: r.Node, SlotUnix: r.Slot, Trigger: string(r.Trigger), Requester: r.Requester, Attempts: r.Attempts, Result: r.Result, ExitCode: r.ExitCode,
		Fence: r.Fence, start: r.Start, end: r.End}
	if r.Slot != 0 {
		h.Slot = time.Unix(r.Slot, 0).UTC().Format(time.RFC3339)
	}
	if tail {
		h.OutputTail = r.OutputTail
	}
	return h
}

// ReadStore is what the reads of this package need: *redislock.Redis (the
// cluster's state in Redis), or the state of one daemon on the memory
// backend (package engine), whose node list is that daemon alone.
type ReadStore interface {
	State(ctx context.Context, job string) (ledger.JobState, error)
	History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error)
	// Occurrences returns the job's ledger records with slots in [from,
	// to], oldest first (docs/protocol.md).
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
	Events(ctx context.Context, job string, n int) ([]redislock.Event, error)
	// Nodes returns the heartbeat records (cluster.Record as JSON).
	Nodes(ctx context.Context) ([][]byte, error)
	cluster.JobsReader
}

var _ ReadStore = (*redislock.Redis)(nil)

// Jobs returns the status of each of jobs (one round trip each, or one for
// all from a StatesReader, plus two for the node list), in order.
func Jobs(ctx context.Context, r ReadStore, jobs []config.Job, now time.Time) ([]JobStatus, error) {
	cluster, err := Nodes(ctx, r, now)
	if err != nil {
		return nil, err
	}
	return cluster.Jobs(ctx, r, jobs, now)
}

// Jobs returns the status of each of jobs as the function Jobs does, with
// the cluster's view c read before (one round trip per job, or one for
// all from a StatesReader), in order: a caller reading many jobs in
// parallel reads the node list once.
func (c *Cluster) Jobs(ctx context.Context, r ReadStore, jobs []config.Job, now time.Time) ([]JobStatus, error) {
	states, err := readStates(ctx, r, jobs)
	if err != nil {
		return nil, err
	}
	out := make([]JobStatus, 0, len(jobs))
	for i := range jobs {
		row := newJobStatus(&jobs[i], states[i], now)
		c.annotate(&row)
		out = append(out, row)
	}
	return out, nil
}

// StatesReader is a ReadStore that reads many jobs' states in one call
// (*redislock.Redis: one round trip for all); the reads of many jobs use
// it when the store has it.
type StatesReader interface {
	States(ctx context.Context, jobs []string) ([]ledger.JobState, error)
}

var _ StatesReader = (*redislock.Redis)(nil)

// readStates reads the states of jobs, in order: in one States call when
// r is a StatesReader, else one State call each.
func readStates(ctx context.Context, r ReadStore, jobs []config.Job) ([]ledger.JobState, error) {
	if sr, ok := r.(StatesReader); ok && len(jobs) > 1 {
		names := make([]string, len(jobs))
		for i := range jobs {
			names[i] = jobs[i].Name
		}
		return sr.States(ctx, names)
	}
	out := make([]ledger.JobState, len(jobs))
	for i := range jobs {
		st, err := r.State(ctx, jobs[i].Name)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// newJobStatus builds a job's row from its state.
func newJobStatus(j *config.Job, st ledger.JobState, now time.Time) JobStatus {
	row := JobStatus{Job: j.Name, Schedule: j.Schedule, Timezone: j.Location.String(), Enabled: j.Enabled,
		LeaseHolder: st.LeaseHolder, LeaseTTLMs: st.LeaseTTL.Milliseconds(), Paused: st.Paused, Pause: st.Pause,
		Fence: st.Fence, Slot: st.Slot, Runs: st.Runs, MaxRuns: j.MaxRuns, Pending: st.Pending,
		ActiveFrom: j.ActiveFrom, ActiveUntil: j.ActiveUntil, Window: WindowState(j, now),
		Nodes: append([]string{}, j.Nodes...), Runners: []string{}, loc: j.Location, NextFireTimes: []string{}}
	if at, once := j.Sched.Once(); once && !at.After(now) {
		row.Done = "at_passed"
	}
	if j.MaxRuns > 0 && st.Runs >= int64(j.MaxRuns) {
		row.Done = "max_runs"
	}
	t := now
	for i := 0; i < NextTimes; i++ {
		if t = j.Sched.Next(t); t.IsZero() {
			break
		}
		if i == 0 {
			row.next = t.In(j.Location)
			row.Next = row.next.Format(time.RFC3339)
		}
		row.NextFireTimes = append(row.NextFireTimes, t.In(j.Location).Format(time.RFC3339))
	}
	if st.Last != nil {
		row.Last = NewRun(*st.Last, false)
	}
	return row
}

// WindowState describes job j's active window at now: "" without one,
// else "not_started", "active" or "ended".
func WindowState(j *config.Job, now time.Time) string {
	if j.Sched == nil {
		return ""
	}
	from, until := j.Sched.Window()
	switch {
	case from.IsZero() && until.IsZero():
		return ""
	case !until.IsZero() && !now.Before(until):
		return "ended"
	case !from.IsZero() && now.Before(from):
		return "not_started"
	}
	return "active"
}

// Runs returns job's last n runs, newest first, with their output tails
// when tail.
func Runs(ctx context.Context, r ReadStore, job string, n int, tail bool) ([]*Run, error) {
	recs, err := r.History(ctx, job, n)
	if err != nil {
		return nil, err
	}
	rows := make([]*Run, 0, len(recs))
	for _, rec := range recs {
		rows = append(rows, NewRun(rec, tail))
	}
	return rows, nil
}

// PauseSpec is a pause request: an optional end (For, or Until; not both)
// and a note.
type PauseSpec struct {
	// For is the pause's length; it counts only when ForSet (so that an
	// explicit "-for 0s" is refused rather than read as "no end").
	For    time.Duration
	ForSet bool
	Until  time.Time
	Note   string
}

// MaxPauseNote is the longest pause note, in bytes: the note goes into the
// pause key and each of the ~1000 entries of the job's event stream.
const MaxPauseNote = 1024

// minPause is the shortest pause end: the pause key's TTL is whole
// milliseconds.
const minPause = time.Millisecond

// Pause returns the pause record of the request made by by at now, or an
// error naming the bad field: For and Until both set, For set below 1ms
// (0 and negative included), Until less than 1ms in the future, a note
// longer than MaxPauseNote bytes or holding a control character (a newline
// would forge rows in status and history -events).
func (p PauseSpec) Pause(by string, now time.Time) (ledger.Pause, error) {
	out := ledger.Pause{By: by, At: now.UTC(), Note: p.Note}
	if err := CheckText("note", p.Note); err != nil {
		return out, err
	}
	switch {
	case p.ForSet && !p.Until.IsZero():
		return out, fmt.Errorf("for and until both set: give one end")
	case p.ForSet && p.For < minPause:
		return out, fmt.Errorf("for %v: want a positive duration of at least 1ms, e.g. 2h (leave it out for a pause without end)", p.For)
	case p.ForSet:
		out.Until = out.At.Add(p.For)
	case !p.Until.IsZero() && !p.Until.After(now):
		return out, fmt.Errorf("until %s is not in the future", p.Until.Format(time.RFC3339))
	case !p.Until.IsZero() && p.Until.Sub(now) < minPause:
		return out, fmt.Errorf("until %s: want an end at least 1ms in the future", p.Until.Format(time.RFC3339Nano))
	case !p.Until.IsZero():
		out.Until = p.Until.UTC()
	}
	return out, nil
}

// CheckText refuses an operator's free text (a pause note, a run
// request's reason), naming field, when it is longer than MaxPauseNote
// bytes, not valid UTF-8 or holds a control character: it is printed in
// the tables of status, history and history -events, where a newline
// would forge rows.
func CheckText(field, text string) error {
	if len(text) > MaxPauseNote {
		return fmt.Errorf("%s: %d bytes, at most %d: give the reason in a line and link to the details", field, len(text), MaxPauseNote)
	}
	if !utf8.ValidString(text) {
		return fmt.Errorf("%s: not valid UTF-8", field)
	}
	for _, r := range text {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s: contains the control character %q; give one line without tabs or newlines", field, r)
		}
	}
	return nil
}
