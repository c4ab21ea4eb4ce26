package engine

import (
	"context"
	"github.com/cronlock/cronlock/ledger/memory"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// testMaxSkew is node.max_clock_skew as the config defaults it: the early
// edge and the answer window of a scheduled claim (docs/protocol.md, R2).
const testMaxSkew = 2 * time.Second

// The job set audits its jobs every second (docs/protocol.md, R8):
// every node was stopped across 3 slots of a */5 job; once this node has
// started and the slots' answer window and grace have passed, the 3 are
// recorded missed in the ledger, in one warning naming the range and that
// this node was not running, counted in cronlock_occurrences_missed_total,
// and never again at the audits after; the slots the node ran are not
// missed.
func TestJobSet_AuditsMissedOccurrencesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
jobs:
  - {name: tick, schedule: "*/5 * * * * *", command: "exit 0"}
`)
		mem := memory.NewMemory()
		t0 := time.Now() // 2000-01-01T00:00:00Z in a bubble: a slot of the job
		// A node audited the job up to t0, then every node stopped.
		if a, err := mem.Audit(t.Context(), ledger.AuditRequest{Job: "tick"}); err != nil || a.From != t0.Unix() {
			t.Fatalf("first audit: %+v, %v; want audited_to %d", a, err, t0.Unix())
		}
		time.Sleep(19500 * time.Millisecond) // t0+5, +10, +15 pass; each answer window + grace (4 s) has too

		core, logs := observer.New(zapcore.InfoLevel)
		log := zap.New(core)
		m := actors.NewMetrics(nil)
		results := make(chan actors.RunFinished, 100)
		audit := &actors.Auditor{Log: log, Metrics: m, Locker: mem, NodeID: "n1", MaxSkew: testMaxSkew,
			Now: time.Now, Started: time.Now()}
		s, ctx := runJobSet(t, log, m, mem, results, audit)
		if err := s.Apply(ctx, cfg.Jobs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(t0.Add(31 * time.Second))) // t0+20, +25, +30 run; audits every second
		synctest.Wait()

		warned := logs.FilterMessageSnippet("occurrences missed").All()
		if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel {
			t.Fatalf("missed-occurrence warnings: got %v, want one warning", warned)
		}
		f := warned[0].ContextMap()
		if f["job"] != "tick" || f["missed"] != int64(3) || f["first_slot"] != t0.Unix()+5 || f["last_slot"] != t0.Unix()+15 ||
			!strings.Contains(f["reason"].(string), "this node was not running") {
			t.Errorf("warning fields: got %v, want job tick, missed 3 from %d to %d, this node not running", f, t0.Unix()+5, t0.Unix()+15)
		}
		if got := promtest.Value(t, m, "cronlock_occurrences_missed_total", "job", "tick"); got != 3 {
			t.Errorf("cronlock_occurrences_missed_total: got %v, want 3", got)
		}
		occ, err := mem.Occurrences(t.Context(), "tick", t0.Unix(), t0.Unix()+30)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range occ {
			got = append(got, o.ID+" "+o.Status)
		}
		want := []string{"946684805 missed", "946684810 missed", "946684815 missed", "946684820 ran", "946684825 ran", "946684830 ran"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("ledger: got %v, want %v", got, want)
		}
		for i := range 3 {
			if fin := <-results; fin.Slot.Unix() != t0.Unix()+20+5*int64(i) || fin.Trigger != ledger.TriggerSchedule {
				t.Errorf("run %d: slot %d trigger %s, want %d schedule", i, fin.Slot.Unix(), fin.Trigger, t0.Unix()+20+5*int64(i))
			}
		}
	})
}

// A job with a catch-up window whose slot passed while the daemon was
// down runs it at the job set's catch-up (trigger catchup); the audit
// then finds the slot decided and records nothing missed.
func TestJobSet_CatchupRunsTheSlotTheAuditThenSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := parseConfig(t, `
jobs:
  - {name: tick, schedule: "*/10 * * * * *", command: "exit 0", catchup_window: 30s}
`)
		mem := memory.NewMemory()
		t0 := time.Now()
		if _, err := mem.Audit(t.Context(), ledger.AuditRequest{Job: "tick"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Second) // t0+10 passes while the daemon is down

		core, logs := observer.New(zapcore.InfoLevel)
		log := zap.New(core)
		m := actors.NewMetrics(nil)
		results := make(chan actors.RunFinished, 100)
		audit := &actors.Auditor{Log: log, Metrics: m, Locker: mem, NodeID: "n1", MaxSkew: testMaxSkew,
			Now: time.Now, Started: time.Now()}
		s, ctx := runJobSet(t, log, m, mem, results, audit)
		if err := s.Apply(ctx, cfg.Jobs); err != nil {
			t.Fatal(err)
		}
		s.Catchup(ctx)
		if fin := <-results; fin.Slot.Unix() != t0.Unix()+10 || fin.Trigger != ledger.TriggerCatchup || fin.Result != ledger.ResultSuccess {
			t.Errorf("catch-up run: slot %d trigger %s result %s, want %d catchup success", fin.Slot.Unix(), fin.Trigger,
				fin.Result, t0.Unix()+10)
		}
		time.Sleep(time.Until(t0.Add(25 * time.Second))) // t0+20 runs; the audits pass t0+10 and t0+20
		synctest.Wait()
		if n := logs.FilterMessageSnippet("occurrences missed").Len(); n != 0 {
			t.Errorf("missed-occurrence warnings: got %d, want none (the catch-up ran the slot)", n)
		}
		if got := promtest.Value(t, m, "cronlock_occurrences_missed_total", "job", "tick"); got != 0 {
			t.Errorf("cronlock_occurrences_missed_total: got %v, want 0", got)
		}
		if fin := <-results; fin.Slot.Unix() != t0.Unix()+20 || fin.Trigger != ledger.TriggerSchedule {
			t.Errorf("next run: slot %d trigger %s, want %d schedule", fin.Slot.Unix(), fin.Trigger, t0.Unix()+20)
		}
	})
}

// runJobSet starts a job set and its ticker on mem (fake processes, node
// n1, max_clock_skew testMaxSkew) with audit (nil = none) until the test
// ends; ctx is the one they run under.
func runJobSet(t *testing.T, log *zap.Logger, m *actors.Metrics, mem claimer, results chan actors.RunFinished,
	audit *actors.Auditor) (*jobSet, context.Context) {
	ticker := actors.NewTicker(log, m, nil)
	s := newJobSet(log, actors.JobDeps{Log: log, Metrics: m, Locker: mem, NodeID: "n1", Results: results,
		Phantoms: make(chan actors.Phantom, 10), Kill: make(chan struct{}), Start: fakeproc.Start, MaxSkew: testMaxSkew},
		ticker, audit)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	go func() { _ = ticker.Run(ctx); done <- struct{}{} }()
	go func() { _ = s.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return s, ctx
}
