package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/engine"
	"go.uber.org/zap/zapcore"
)

// backfillUsage is the usage line of `cronlock backfill`.
const backfillUsage = `[-config FILE] JOB -from T -to T [-overlap queue|allow] [-dry-run]

Runs JOB, in this process, for every slot of its schedule from -from to
-to (RFC 3339, both included; -to not after now), through the same run
path as a scheduled run (lease, retries, hooks, history) with trigger
backfill. Each slot runs once in the cluster, by any path: a slot that the
schedule, a catch-up or an earlier or concurrent backfill ran is not run
again and is listed as already run; a slot recorded missed or skipped runs.
With -overlap queue (the default) the slots run one after the other, each
holding the job's lease (while a scheduled run holds it, the backfill
waits); with -overlap allow they all run at once, without the lease.
-dry-run lists the slots and which of them already ran (and where), and
runs nothing. A paused job's slots are skipped (paused) unless -force. At most 10000
slots. Exit code 0 when every slot ran with success or had already run,
1 otherwise.`

// maxBackfillSlots bounds the slots of one backfill.
const maxBackfillSlots = 10000

// runBackfill implements `cronlock backfill`.
func runBackfill(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("backfill", backfillUsage, env)
	fromS := f.fs.String("from", "", "first instant of the range, RFC 3339 (required)")
	toS := f.fs.String("to", "", "last instant of the range, RFC 3339, not after now (required)")
	overlap := f.fs.String("overlap", "queue", "queue: one slot after the other, under the lease; allow: all at once")
	dry := f.fs.Bool("dry-run", false, "list the slots; run nothing")
	force := f.fs.Bool("force", false, "run the slots of a paused job too, and slots before a detected loss of the ledger (state_lost: they may have run)")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	from, to, err := backfillRange(*fromS, *toS, *overlap, time.Now())
	if err != nil {
		fmt.Fprintf(env.stderr, "cronlock backfill: %v\n", err)
		return 2
	}
	out := zapcore.Lock(zapcore.AddSync(env.stdout))
	errw := zapcore.Lock(zapcore.AddSync(env.stderr))
	env = &runEnv{environ: env.environ, stdout: out, stderr: errw}
	s, code, err := openOps("backfill", f.config, memoryLocal, env)
	if s == nil {
		return opsFail(env, "backfill", code, err)
	}
	defer s.close()
	job, err := s.job(f.args[0])
	if err != nil {
		return opsFail(env, "backfill", 1, err)
	}
	slots, err := backfillSlots(job, from, to)
	if err != nil {
		return opsFail(env, "backfill", 1, err)
	}
	if s.kind == "memory" {
		if err := memoryDaemonRunning(ctx, s.cfg); err != nil {
			return opsFail(env, "backfill", 1, err)
		}
	}
	if *dry {
		return s.backfillDryRun(ctx, env, job.Name, slots)
	}
	log, err := manualLogger(s.cfg.Log, out, errw)
	if err != nil {
		return opsFail(env, "backfill", 1, fmt.Errorf("log: %w", err))
	}
	if s.note != "" {
		log.Warn(s.note)
	}
	res := engine.Backfill(ctx, s.cfg, *job, slots, engine.BackfillOptions{Allow: *overlap == config.OverlapAllow,
		ManualOptions: engine.ManualOptions{Log: log, Environ: env.environ, Locker: s.backend, Force: *force}})
	return printBackfill(env, job.Name, res)
}

// backfillRange parses and checks the flags of a backfill.
func backfillRange(fromS, toS, overlap string, now time.Time) (from, to time.Time, err error) {
	if fromS == "" || toS == "" {
		return from, to, errors.New("-from and -to are required (RFC 3339, e.g. -from 2026-11-30T00:00:00Z)")
	}
	if from, err = time.Parse(time.RFC3339, fromS); err != nil {
		return from, to, fmt.Errorf("-from %q: not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)", fromS)
	}
	if to, err = time.Parse(time.RFC3339, toS); err != nil {
		return from, to, fmt.Errorf("-to %q: not an RFC 3339 time (e.g. 2026-11-30T06:00:00Z)", toS)
	}
	switch {
	case to.Before(from):
		return from, to, fmt.Errorf("-to %s is before -from %s", toS, fromS)
	case to.After(now):
		return from, to, fmt.Errorf("-to %s is in the future: backfill runs past slots only (the schedule runs the others)", toS)
	case overlap != config.OverlapQueue && overlap != config.OverlapAllow:
		return from, to, fmt.Errorf("-overlap %q: want queue or allow", overlap)
	}
	return from, to, nil
}

// backfillSlots lists the job's slots in [from, to], at most
// maxBackfillSlots.
func backfillSlots(job *config.Job, from, to time.Time) ([]time.Time, error) {
	var slots []time.Time
	for t := job.Sched.Next(from.Add(-time.Second)); !t.IsZero() && !t.After(to); t = job.Sched.Next(t) {
		if len(slots) == maxBackfillSlots {
			return nil, fmt.Errorf("job %s has more than %d slots from %s to %s; narrow -from/-to",
				job.Name, maxBackfillSlots, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		slots = append(slots, t)
	}
	if len(slots) == 0 {
		return nil, fmt.Errorf("job %s (schedule %q) has no slot from %s to %s", job.Name, job.Schedule,
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return slots, nil
}

// backfillDryRun prints each slot and whether a backfill already ran it.
func (s *opsSession) backfillDryRun(ctx context.Context, env *runEnv, job string, slots []time.Time) int {
	cctx, cancel := s.call(ctx)
	defer cancel()
	occ, err := s.backend.Occurrences(cctx, job, slots[0].Unix(), slots[len(slots)-1].Unix())
	if err != nil {
		return opsFail(env, "backfill", 1, s.redisHint(err))
	}
	rec := map[int64]ledger.Occurrence{}
	for _, o := range occ {
		rec[o.Slot] = o
	}
	done := false // a job with max_runs that has made them: the claims refuse every slot
	if cfg, err := s.job(job); err == nil && cfg.MaxRuns > 0 && s.backend != nil {
		if st, err := s.backend.State(cctx, job); err == nil && st.Runs >= int64(cfg.MaxRuns) {
			done = true
		}
	}
	fmt.Fprintf(env.stdout, "backfill %s: %d slots (dry run, nothing is run)\n", job, len(slots))
	for _, t := range slots {
		what, note := "would run", ""
		if done {
			what, note = "not run", "max_runs: the job has made its max_runs successful runs"
		}
		if o, ok := rec[t.Unix()]; ok {
			switch {
			case o.Status == "skipped" && o.Reason == ledger.SkipStateLost:
				what, note = "not run", "state_lost: redis lost the ledger around it; -force runs it"
			case o.Status == "missed" || o.Status == "skipped":
				note = o.Status + " (" + o.Reason + ")"
			default:
				what, note = "already run", o.Status+" on "+o.Node
			}
		}
		fmt.Fprintf(env.stdout, "%-12s %s %s\n", what, t.UTC().Format(time.RFC3339), note)
	}
	return 0
}

// printBackfill prints one line per slot and a summary; it returns the
// exit code.
func printBackfill(env *runEnv, job string, res []engine.BackfillResult) int {
	var ran, already, other int
	for _, r := range res {
		slot := r.Slot.UTC().Format(time.RFC3339)
		switch r.Ran.Skip {
		case "":
			ran++
			fmt.Fprintf(env.stdout, "%-12s %s %s\n", "ran", slot, r.Ran.Finished.Result)
			if r.Ran.Finished.Result != ledger.ResultSuccess {
				other++
			}
		case ledger.SkipAlreadyRun:
			already++
			fmt.Fprintf(env.stdout, "%-12s %s\n", "already run", slot)
		default:
			other++
			fmt.Fprintf(env.stdout, "%-12s %s %s\n", "not run", slot, r.Ran.Skip)
		}
	}
	fmt.Fprintf(env.stdout, "backfill %s: %d slots: %d ran, %d already run, %d not run or not successful\n",
		job, len(res), ran, already, other)
	if other > 0 {
		return 1
	}
	return 0
}

// memoryDaemonRunning returns an error when a daemon runs with cfg's file
// on the memory backend: its state (which slots ran) is in its process, so
// a backfill from here could run slots again; nil when none answers on
// its control socket.
func memoryDaemonRunning(ctx context.Context, cfg *config.Config) error {
	c := newDaemonClient(cfg)
	cctx, cancel := context.WithTimeout(ctx, opsCallTimeout)
	defer cancel()
	v, err := c.nodes(cctx)
	if errors.Is(err, errNoDaemon) {
		return nil
	}
	return fmt.Errorf("backfill on the memory backend needs the daemon stopped: %s holds which slots ran, in its "+
		"process, and a backfill from here could run them again; stop it, backfill, then start it again "+
		"(or give the daemons a Redis: redis.address)", c.describe(v))
}
