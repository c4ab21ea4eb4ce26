package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
)

// tableTime is how the status table shows instants: in the job's zone with
// its offset.
const tableTime = "2006-01-02 15:04:05 -07:00"

// runStatus implements `cronlock status [-config FILE] [-json] [JOB...]`:
// one row per configured job (or per named job) with its next fire time,
// last run, lease holder, pause flag and fencing token, read from Redis
// (or, on the memory backend, from the running daemon), named in the
// table's first line. Errors print one line and return 1.
func runStatus(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("status", "[-config FILE] [-json] [JOB...]", env)
	asJSON := f.fs.Bool("json", false, "print a JSON array instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	s, code, err := openOps("status", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "status", code, err)
	}
	defer s.close()
	jobs, err := s.selectJobs(f.args)
	if err != nil {
		return opsFail(env, "status", 1, err)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	rows, err := s.jobStatus(cctx, jobs, len(f.args) > 0)
	if err != nil {
		return opsFail(env, "status", 1, err)
	}
	if *asJSON {
		return printJSON(env, rows)
	}
	var cluster *api.Cluster
	if s.daemon != nil {
		cluster, _ = s.nodes(cctx) // for the header only
	}
	fmt.Fprintln(env.stdout, s.header(cluster))
	printStatusTable(env, rows)
	if s.kind == "redis" && nothingThere(rows) {
		fmt.Fprintf(env.stderr, "cronlock status: note: %s holds no state of these jobs and no live daemon's heartbeat: "+
			"if daemons run them, check redis.address, redis.db and redis.key_prefix against theirs\n", s.cfg.Redis.Where())
	}
	return 0
}

// nothingThere reports whether rows show no trace of any daemon: no job
// ever claimed or ran, none paused, and no live node (a job without
// nodes: lists every live node as a runner). Then the command most
// likely reads another Redis, db or key prefix than the daemons.
func nothingThere(rows []api.JobStatus) bool {
	for _, r := range rows {
		if r.Last != nil || r.Fence != 0 || r.Slot != 0 || r.Paused || r.LeaseHolder != "" || len(r.Runners) > 0 {
			return false
		}
	}
	return len(rows) > 0
}

// daemonNodes is the memory-backend daemon's node list for a header; nil
// on Redis, or when it cannot be read.
func (s *opsSession) daemonNodes(ctx context.Context) *api.Cluster {
	if s.daemon == nil {
		return nil
	}
	v, err := s.daemon.nodes(ctx)
	if err != nil {
		return nil
	}
	return v
}

// selectJobs returns the named jobs (all when names is empty).
func (s *opsSession) selectJobs(names []string) ([]config.Job, error) {
	if len(names) == 0 {
		return s.cfg.Jobs, nil
	}
	out := make([]config.Job, 0, len(names))
	for _, n := range names {
		j, err := s.job(n)
		if err != nil {
			return nil, err
		}
		out = append(out, *j)
	}
	return out, nil
}

// printStatusTable prints the status rows as an aligned table.
func printStatusTable(env *runEnv, rows []api.JobStatus) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT FIRE\tLAST RUN\tNODE\tRESULT\tEXIT\tLEASE\tPAUSED\tFENCE\tDRIFT\t")
	for _, r := range rows {
		next := "-"
		switch {
		case !r.Enabled:
			next = "(disabled)"
		case r.Unrunnable:
			next = "(unrunnable: no live node has " + strings.Join(r.Nodes, ", ") + ")"
		case r.Done == "max_runs":
			next = fmt.Sprintf("(done: %d of max_runs %d)", r.Runs, r.MaxRuns)
		case r.Done == "at_passed":
			next = "(done: @at passed)"
		case r.Window == "ended":
			next = "(active window ended " + r.ActiveUntil + ")"
		case !r.NextTime().IsZero() && r.Window == "not_started":
			next = r.NextTime().Format(tableTime) + " (active from " + r.ActiveFrom + ")"
		case !r.NextTime().IsZero():
			next = r.NextTime().Format(tableTime)
		case r.Window != "":
			next = "(no fire time left before active_until " + r.ActiveUntil + ")"
		}
		last, node, result, exit := "never", "-", "-", "-"
		if r.Last != nil {
			last = r.Last.StartTime().In(r.Location()).Format(tableTime)
			node, result, exit = r.Last.Node, r.Last.Result, strconv.Itoa(r.Last.ExitCode)
		}
		lease := "-"
		if r.LeaseHolder != "" {
			lease = fmt.Sprintf("%s (%v left)", ownerNode(r.LeaseHolder), (time.Duration(r.LeaseTTLMs) * time.Millisecond).Round(time.Second))
		}
		paused := "no"
		if r.Paused {
			paused = "yes"
			if r.Pause != nil && !r.Pause.Until.IsZero() {
				paused += ", until " + r.Pause.Until.In(r.Location()).Format(tableTime)
			}
			if r.Pause != nil && r.Pause.Note != "" {
				paused += ": " + r.Pause.Note
			}
		}
		driftText := "-"
		if r.Drift != nil {
			driftText = strings.TrimPrefix(r.Drift.String(), r.Job+": ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", r.Job, r.Schedule, next, last, node, result,
			exit, lease, paused, r.Fence, driftText)
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
// [-missed | -status S] [-from T] [-to T] [-runs | -events | -output SLOT] JOB`: the
// job's occurrences from the ledger (docs/protocol.md), newest first — ran,
// skipped with the reason, missed — or, with -runs, its finished runs with
// their output tails, or with -events its audit trail, or with -output
// the stored output of one occurrence. Errors print one
// line and return 1.
func runHistory(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("history", "[-config FILE] [-n 20] [-json] [-missed | -status S] [-from T] [-to T] [-runs | -events | -output SLOT] JOB", env)
	outputS := f.fs.String("output", "", "print the stored output of the occurrence of this slot (Unix seconds or RFC 3339; m<token>: a manual run)")
	n := f.fs.Int("n", 20, "number of occurrences (or runs, or events) to show (1..1000)")
	events := f.fs.Bool("events", false, "show the job's audit trail (pauses, resumes, run requests, reloads) instead")
	runsOnly := f.fs.Bool("runs", false, "show the job's finished runs (with -json: their output tails) instead")
	missed := f.fs.Bool("missed", false, "only occurrences that did not run: skipped (with the reason) and missed")
	status := f.fs.String("status", "", "only occurrences of this status: ran, skipped, missed, claimed, queued")
	fromS := f.fs.String("from", "", "oldest slot: RFC 3339, or a duration ago (e.g. 24h)")
	toS := f.fs.String("to", "", "newest slot: RFC 3339, or a duration ago (default now)")
	asJSON := f.fs.Bool("json", false, "print a JSON array instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	if *n < 1 || *n > 1000 {
		return opsFail(env, "history", 2, fmt.Errorf("-n %d: want 1..1000", *n))
	}
	q, err := historyQuery(*fromS, *toS, *status, *missed, *n, time.Now())
	if err != nil {
		return opsFail(env, "history", 2, err)
	}
	s, code, err := openOps("history", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "history", code, err)
	}
	defer s.close()
	if _, err := s.job(f.args[0]); err != nil {
		return opsFail(env, "history", 1, err)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	switch {
	case *outputS != "":
		id, err := outputSlot(*outputS)
		if err != nil {
			return opsFail(env, "history", 2, err)
		}
		return s.printOutput(cctx, env, "history", f.args[0], id)
	case *events:
		return s.printEvents(cctx, env, f.args[0], *n, *asJSON)
	case *runsOnly:
		return s.printRuns(cctx, env, f.args[0], *n, *asJSON)
	}
	rows, err := s.occurrences(cctx, f.args[0], q)
	if err != nil {
		return opsFail(env, "history", 1, err)
	}
	if *asJSON {
		return printJSON(env, rows)
	}
	fmt.Fprintln(env.stdout, s.header(s.daemonNodes(cctx)))
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no occurrences recorded for %s in that range\n", f.args[0])
		return 0
	}
	printOccurrences(env, rows)
	return 0
}

// historyQuery reads history's range and status flags.
func historyQuery(fromS, toS, status string, missed bool, n int, now time.Time) (api.OccurrenceQuery, error) {
	q := api.OccurrenceQuery{To: now.Unix(), Status: status, Limit: n}
	if missed {
		if status != "" {
			return q, errors.New("-missed and -status: give one")
		}
		q.Status = api.StatusNotRun
	}
	for _, f := range []struct {
		name, v string
		dst     *int64
	}{{"-from", fromS, &q.From}, {"-to", toS, &q.To}} {
		if f.v == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, f.v); err == nil {
			*f.dst = t.Unix()
		} else if d, err := time.ParseDuration(f.v); err == nil && d >= 0 {
			*f.dst = now.Add(-d).Unix()
		} else {
			return q, fmt.Errorf("%s %q: want an RFC 3339 time (2026-12-01T00:00:00Z) or a duration ago (24h)", f.name, f.v)
		}
	}
	return q, q.Validate()
}

// printOccurrences prints ledger records as an aligned table; instants in
// UTC.
func printOccurrences(env *runEnv, rows []ledger.Occurrence) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSTATUS\tRESULT OR REASON\tNODE\tTRIGGER\tSTARTED\tDURATION\tTOKEN\t")
	for _, o := range rows {
		slot := "manual"
		if o.Slot > 0 {
			slot = time.Unix(o.Slot, 0).UTC().Format(time.RFC3339)
		}
		what, started, took := o.Reason, "-", "-"
		if o.Status == "ran" {
			what = fmt.Sprintf("%s (exit %d)", o.Result, o.ExitCode)
		}
		if o.Started > 0 {
			started = time.UnixMilli(o.Started).UTC().Format(time.RFC3339)
			if o.Finished >= o.Started {
				took = (time.Duration(o.Finished-o.Started) * time.Millisecond).String()
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", slot, o.Status, dash(what), dash(o.Node), dash(o.Trigger),
			started, took, o.Token)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printRuns prints the job's last n finished runs (history -runs).
func (s *opsSession) printRuns(ctx context.Context, env *runEnv, job string, n int, asJSON bool) int {
	rows, err := s.runs(ctx, job, n, asJSON)
	if err != nil {
		return opsFail(env, "history", 1, err)
	}
	if asJSON {
		return printJSON(env, rows)
	}
	fmt.Fprintln(env.stdout, s.header(s.daemonNodes(ctx)))
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no runs recorded for %s\n", job)
		return 0
	}
	printHistoryTable(env, rows)
	return 0
}

// printHistoryTable prints runs as an aligned table; instants in UTC.
func printHistoryTable(env *runEnv, rows []*api.Run) {
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
		if r.Requester != "" {
			trigger += " by " + r.Requester
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t\n", r.StartTime().UTC().Format(time.RFC3339),
			r.EndTime().UTC().Format(time.RFC3339), r.EndTime().Sub(r.StartTime()).Round(time.Millisecond), r.Node, slot, trigger,
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
