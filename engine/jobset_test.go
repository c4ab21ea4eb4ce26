package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The job set's first catch-up reports the slots no node claimed while the
// daemon was down (issue 8): one warning with the count and range, counted;
// a later catch-up (Redis back) does not report them again.
func TestJobSet_CatchupReportsMissedSlotsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
jobs:
  - {name: tick, schedule: "* * * * * *", command: "exit 0"}
`)
		mem := redislock.NewMemory()
		t0 := time.Now() // a whole second in a bubble
		if _, err := mem.Claim(t.Context(), actors.ClaimRequest{Job: "tick", Slot: t0.Add(time.Second).Unix()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5500 * time.Millisecond) // slots t0+2 … t0+5 pass unclaimed

		core, logs := observer.New(zapcore.InfoLevel)
		log := zap.New(core)
		m := actors.NewMetrics(nil)
		results := make(chan actors.RunFinished, 100)
		s, ctx := runJobSet(t, log, m, mem, results)

		if err := s.Apply(ctx, cfg.Jobs); err != nil {
			t.Fatal(err)
		}
		s.Catchup(ctx)
		synctest.Wait()
		warned := logs.FilterMessageSnippet("slots missed").All()
		if len(warned) != 1 {
			t.Fatalf("missed-slot warnings: got %v, want 1", warned)
		}
		f := warned[0].ContextMap()
		if f["missed"] != int64(4) || f["first_slot"] != t0.Unix()+2 || f["last_slot"] != t0.Unix()+5 {
			t.Errorf("warning fields: got %v, want missed 4 from %d to %d", f, t0.Unix()+2, t0.Unix()+5)
		}
		time.Sleep(time.Second) // t0+6 runs
		s.Catchup(ctx)          // as when Redis answers again
		synctest.Wait()
		if n := logs.FilterMessageSnippet("slots missed").Len(); n != 1 {
			t.Errorf("after a second catch-up: got %d warnings, want still 1", n)
		}
		if got := promtest.Value(t, m, "cronlock_missed_slots_total", "job", "tick"); got != 4 {
			t.Errorf("cronlock_missed_slots_total: got %v, want 4", got)
		}
		if fin := <-results; fin.Slot.Unix() != t0.Unix()+6 {
			t.Errorf("first run: got slot %d, want %d", fin.Slot.Unix(), t0.Unix()+6)
		}
	})
}

// countingReporter counts the missed-slot checks the job set sends.
type countingReporter struct {
	*redislock.Memory
	checks chan []actors.MissedCheck
}

func (c countingReporter) ReportMissed(ctx context.Context, checks []actors.MissedCheck) ([]actors.MissedReport, error) {
	c.checks <- checks
	return c.Memory.ReportMissed(ctx, checks)
}

// When Redis answers again, a job whose slots this node has seen decided
// since the certain slot is not checked (the report could only answer
// "nothing missed"); a job this node has seen nothing of still is.
func TestJobSet_CatchupSkipsJobsSeenDecided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
jobs:
  - {name: tick, schedule: "* * * * * *", command: "exit 0"}
  - {name: yearly, schedule: "0 0 1 1 *", command: "exit 0"}
`)
		mem := countingReporter{redislock.NewMemory(), make(chan []actors.MissedCheck, 10)}
		log := zap.NewNop()
		m := actors.NewMetrics(nil)
		results := make(chan actors.RunFinished, 100)
		s, ctx := runJobSet(t, log, m, mem, results)

		if err := s.Apply(ctx, cfg.Jobs); err != nil {
			t.Fatal(err)
		}
		s.Catchup(ctx) // at start: nothing seen yet, both jobs checked
		synctest.Wait()
		if got := <-mem.checks; len(got) != 2 {
			t.Fatalf("at start: got checks %+v, want one per job", got)
		}
		time.Sleep(4500 * time.Millisecond) // tick claims and runs 4 slots
		synctest.Wait()
		s.Catchup(ctx) // as when Redis answers again
		synctest.Wait()
		got := <-mem.checks
		if len(got) != 1 || got[0].Job != "yearly" {
			t.Errorf("Redis back: got checks %+v, want only yearly's (tick's slots were seen decided)", got)
		}
		if len(results) < 4 {
			t.Errorf("tick ran %d times, want at least 4", len(results))
		}
	})
}

// runJobSet starts a job set and its ticker on mem (fake processes, node
// n1) until the test ends; ctx is the one they run under.
func runJobSet(t *testing.T, log *zap.Logger, m *actors.Metrics, mem claimer, results chan actors.RunFinished) (*jobSet, context.Context) {
	ticker := actors.NewTicker(log, m, nil)
	s := newJobSet(log, actors.JobDeps{Log: log, Metrics: m, Locker: mem, NodeID: "n1", Results: results,
		Phantoms: make(chan actors.Phantom, 10), Kill: make(chan struct{}), Start: fakeproc.Start}, ticker, mem)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	go func() { _ = ticker.Run(ctx); done <- struct{}{} }()
	go func() { _ = s.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return s, ctx
}
