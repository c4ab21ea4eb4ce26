package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
)

// tableTime is how the status table shows instants: in the job's zone with
// its offset.
const tableTime = "2006-01-02 15:04:05 -07:00"

// statusRow is one job in `cronlock status -json`.
type statusRow struct {
	Job      string `json:"job"`
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
	Enabled  bool   `json:"enabled"`
	// Next is the next fire time in the job's zone (RFC 3339), "" when the
	// schedule has no further time.
	Next        string      `json:"next"`
	Last        *historyRow `json:"last"` // null when the job never ran
	LeaseHolder string      `json:"lease_holder"`
	LeaseTTLMs  int64       `json:"lease_ttl_ms"` // remaining lease time
	Paused      bool        `json:"paused"`
	Fence       int64       `json:"fence"` // last fencing token handed out
	Slot        int64       `json:"slot"`  // last claimed or skipped slot, Unix seconds
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
	loc  *time.Location
	next time.Time
}

// historyRow is one run in `cronlock history -json` (and the last run in
// status). Instants are RFC 3339 in UTC; Slot is "" for a manual run.
type historyRow struct {
	RunID      string `json:"run_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
	DurationMs int64  `json:"duration_ms"`
	Node       string `json:"node"`
	Slot       string `json:"slot"`
	SlotUnix   int64  `json:"slot_unix"`
	Trigger    string `json:"trigger"` // schedule | catchup | manual ("" for runs recorded before triggers were)
	Attempts   int    `json:"attempts"`
	Result     string `json:"result"`
	ExitCode   int    `json:"exit_code"`
	Fence      int64  `json:"fence"`
	OutputTail string `json:"output_tail,omitempty"`
	start, end time.Time
}

// newHistoryRow converts a record; the output tail is kept only when tail.
func newHistoryRow(r actors.RunRecord, tail bool) *historyRow {
	h := &historyRow{RunID: r.RunID, Start: r.Start.UTC().Format(time.RFC3339Nano),
		End: r.End.UTC().Format(time.RFC3339Nano), DurationMs: r.End.Sub(r.Start).Milliseconds(),
		Node: r.Node, SlotUnix: r.Slot, Trigger: string(r.Trigger), Attempts: r.Attempts, Result: r.Result, ExitCode: r.ExitCode,
		Fence: r.Fence, start: r.Start, end: r.End}
	if r.Slot != 0 {
		h.Slot = time.Unix(r.Slot, 0).UTC().Format(time.RFC3339)
	}
	if tail {
		h.OutputTail = r.OutputTail
	}
	return h
}

// runStatus implements `cronlock status [-config FILE] [-json] [JOB...]`:
// one row per configured job (or per named job) with its next fire time,
// last run, lease holder, pause flag and fencing token, read from Redis.
// Errors print one line and return 1.
func runStatus(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("status", "[-config FILE] [-json] [JOB...]", env)
	asJSON := f.fs.Bool("json", false, "print a JSON array instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	s, code, err := openOps("status", f.config, false, env)
	if s == nil {
		return opsFail(env, "status", code, err)
	}
	defer s.close()
	jobs, err := s.selectJobs(f.args)
	if err != nil {
		return opsFail(env, "status", 1, err)
	}
	now := time.Now()
	rows := make([]statusRow, 0, len(jobs))
	for _, j := range jobs {
		row, err := s.status(ctx, j, now)
		if err != nil {
			return opsFail(env, "status", 1, s.redisHint(err))
		}
		rows = append(rows, row)
	}
	if *asJSON {
		return printJSON(env, rows)
	}
	printStatusTable(env, rows)
	return 0
}

// selectJobs returns the named jobs (all when names is empty).
func (s *opsSession) selectJobs(names []string) ([]*config.Job, error) {
	if len(names) == 0 {
		out := make([]*config.Job, len(s.cfg.Jobs))
		for i := range s.cfg.Jobs {
			out[i] = &s.cfg.Jobs[i]
		}
		return out, nil
	}
	out := make([]*config.Job, 0, len(names))
	for _, n := range names {
		j, err := s.job(n)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// status reads one job's state (one round trip) and builds its row.
func (s *opsSession) status(ctx context.Context, j *config.Job, now time.Time) (statusRow, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	st, err := s.backend.State(cctx, j.Name)
	if err != nil {
		return statusRow{}, err
	}
	row := statusRow{Job: j.Name, Schedule: j.Schedule, Timezone: j.Location.String(), Enabled: j.Enabled,
		LeaseHolder: st.LeaseHolder, LeaseTTLMs: st.LeaseTTL.Milliseconds(), Paused: st.Paused,
		Fence: st.Fence, Slot: st.Slot, Runs: st.Runs, MaxRuns: j.MaxRuns, Pending: st.Pending, loc: j.Location}
	if at, once := j.Sched.Once(); once && !at.After(now) {
		row.Done = "at_passed"
	}
	if j.MaxRuns > 0 && st.Runs >= int64(j.MaxRuns) {
		row.Done = "max_runs"
	}
	if next := j.Sched.Next(now); !next.IsZero() {
		row.next = next.In(j.Location)
		row.Next = row.next.Format(time.RFC3339)
	}
	if st.Last != nil {
		row.Last = newHistoryRow(*st.Last, false)
	}
	return row, nil
}

// printStatusTable prints the status rows as an aligned table.
func printStatusTable(env *runEnv, rows []statusRow) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT FIRE\tLAST RUN\tNODE\tRESULT\tEXIT\tLEASE\tPAUSED\tFENCE\t")
	for _, r := range rows {
		next := "-"
		switch {
		case !r.Enabled:
			next = "(disabled)"
		case r.Done == "max_runs":
			next = fmt.Sprintf("(done: %d of max_runs %d)", r.Runs, r.MaxRuns)
		case r.Done == "at_passed":
			next = "(done: @at passed)"
		case !r.next.IsZero():
			next = r.next.Format(tableTime)
		}
		last, node, result, exit := "never", "-", "-", "-"
		if r.Last != nil {
			last = r.Last.start.In(r.loc).Format(tableTime)
			node, result, exit = r.Last.Node, r.Last.Result, strconv.Itoa(r.Last.ExitCode)
		}
		lease := "-"
		if r.LeaseHolder != "" {
			lease = fmt.Sprintf("%s (%v left)", ownerNode(r.LeaseHolder), (time.Duration(r.LeaseTTLMs) * time.Millisecond).Round(time.Second))
		}
		paused := "no"
		if r.Paused {
			paused = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Job, r.Schedule, next, last, node, result,
			exit, lease, paused, r.Fence)
	}
	_ = tw.Flush()
}

// ownerNode returns the node ID of a lease value "nodeID:uuid".
func ownerNode(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i > 0 {
		return owner[:i]
	}
	return owner
}

// runHistory implements `cronlock history [-config FILE] [-n 20] [-json]
// JOB`: the job's most recent runs, newest first. -json includes each run's
// output tail. Errors print one line and return 1.
func runHistory(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("history", "[-config FILE] [-n 20] [-json] JOB", env)
	n := f.fs.Int("n", 20, "number of runs to show (1..1000)")
	asJSON := f.fs.Bool("json", false, "print a JSON array (with output tails) instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	if *n < 1 || *n > 1000 {
		return opsFail(env, "history", 2, fmt.Errorf("-n %d: want 1..1000", *n))
	}
	s, code, err := openOps("history", f.config, false, env)
	if s == nil {
		return opsFail(env, "history", code, err)
	}
	defer s.close()
	if _, err := s.job(f.args[0]); err != nil {
		return opsFail(env, "history", 1, err)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	recs, err := s.backend.History(cctx, f.args[0], *n)
	if err != nil {
		return opsFail(env, "history", 1, s.redisHint(err))
	}
	rows := make([]*historyRow, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, newHistoryRow(r, *asJSON))
	}
	if *asJSON {
		return printJSON(env, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no runs recorded for %s\n", f.args[0])
		return 0
	}
	printHistoryTable(env, rows)
	return 0
}

// printHistoryTable prints runs as an aligned table; instants in UTC.
func printHistoryTable(env *runEnv, rows []*historyRow) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tEND\tDURATION\tNODE\tSLOT\tTRIGGER\tATTEMPTS\tRESULT\tEXIT\tFENCE\t")
	for _, r := range rows {
		slot, trigger := r.Slot, r.Trigger
		if slot == "" {
			slot = "-"
		}
		if trigger == "" {
			trigger = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t\n", r.start.UTC().Format(time.RFC3339),
			r.end.UTC().Format(time.RFC3339), r.end.Sub(r.start).Round(time.Millisecond), r.Node, slot, trigger,
			r.Attempts, r.Result, r.ExitCode, r.Fence)
	}
	_ = tw.Flush()
}

// printJSON writes v as indented JSON to stdout and returns 0.
func printJSON(env *runEnv, v any) int {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return 0
}
