package actors_test

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"go.uber.org/zap"
)

// testMaxSkew is node.max_clock_skew as the config defaults it: a
// scheduled claim is accepted from testMaxSkew before its slot to
// testMaxSkew after it (the answer window of testJob's jobs), in the
// memory backend's time (the bubble's clock; docs/protocol.md, R2).
const testMaxSkew = 2 * time.Second

// scheduleClaim is a scheduled claim of job's slot by node:runID, with
// testJob's lease and testMaxSkew's windows.
func scheduleClaim(job string, slot time.Time, node, runID string) ledger.ClaimRequest {
	return ledger.ClaimRequest{Job: job, Slot: slot.Unix(), Trigger: ledger.TriggerSchedule, Node: node, RunID: runID,
		TTL: 30 * time.Second, Lease: true, Windows: ledger.Windows{Early: testMaxSkew, Answer: testMaxSkew}}
}

// manualClaim is a manual run's claim of job's lease by node:runID.
func manualClaim(job, node, runID string, ttl time.Duration) ledger.ClaimRequest {
	return ledger.ClaimRequest{Job: job, Trigger: ledger.TriggerManual, Node: node, RunID: runID, TTL: ttl, Lease: true}
}

// occurrence returns the ledger's record of job's slot in mem ("" status
// when there is none).
func occurrence(t *testing.T, mem *memory.Memory, job string, slot time.Time) ledger.Occurrence {
	t.Helper()
	occ, err := mem.Occurrences(t.Context(), job, slot.Unix(), slot.Unix())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range occ {
		if o.Slot == slot.Unix() {
			return o
		}
	}
	return ledger.Occurrence{}
}

func testJob(t *testing.T, name, command string) config.Job {
	return config.Job{Name: name, Schedule: "* * * * * *", Command: command, Shell: "/bin/sh",
		KillGrace: 2 * time.Second, LockTTL: 30 * time.Second, Enabled: true, Overlap: config.OverlapSkip,
		OnLockLost: config.LockLostKill, RetryBackoff: time.Second, HookTimeout: time.Minute,
		Location: time.UTC, Sched: MustSchedule(t, "* * * * * *")}
}

type jobHarness struct {
	name    string
	job     *Job
	metrics *Metrics
	locker  *memory.Memory
	results chan RunFinished
	kill    chan struct{}
	cancel  context.CancelFunc
	done    chan error
}

func startJob(t *testing.T, cfg config.Job) *jobHarness {
	t.Helper()
	h := &jobHarness{name: cfg.Name, metrics: NewMetrics(nil), locker: memory.NewMemory(),
		results: make(chan RunFinished, 10), kill: make(chan struct{}), done: make(chan error, 1)}
	h.metrics.InitJob(cfg.Name)
	h.job = NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: h.metrics, Locker: h.locker, NodeID: "n1",
		Results: h.results, Phantoms: make(chan Phantom, 10), Kill: h.kill, Start: fakeproc.Start})
	ctx, cancel := context.WithCancel(t.Context())
	h.cancel = cancel
	go func() { h.done <- h.job.Run(ctx) }()
	return h
}

func (h *jobHarness) skips(t *testing.T, reason string) float64 {
	return promtest.Value(t, h.metrics, "cronlock_skips_total", "job", h.name, "reason", reason)
}

func (h *jobHarness) running(t *testing.T) float64 {
	return promtest.Value(t, h.metrics, "cronlock_job_running", "job", h.name)
}

// A slot that fires while the previous run is still going on this node is
// skipped with reason overlap_local, never run alongside; its claim
// records it skipped overlap in the ledger, so the audit does not call it
// missed.
func TestJob_SkipsWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "long", "sleep 1000h"))
		slot := time.Now().Add(time.Second)
		time.Sleep(time.Second)
		h.job.Inbox() <- Fire{Job: "long", Slot: slot}
		time.Sleep(time.Second)
		h.job.Inbox() <- Fire{Job: "long", Slot: slot.Add(time.Second)}
		waitFor(t, func() bool { return h.skips(t, ledger.SkipOverlapLocal) == 1 })
		if o := occurrence(t, h.locker, "long", slot.Add(time.Second)); o.Status != "skipped" || o.Reason != ledger.SkipOverlap {
			t.Errorf("the overlapped slot's record: %+v, want skipped overlap", o)
		}
		if got := h.running(t); got != 1 {
			t.Errorf("job_running: got %v, want 1", got)
		}
		h.cancel()
		close(h.kill)
		if err := <-h.done; err != nil {
			t.Fatalf("Run: got %v, want nil", err)
		}
		fin := <-h.results
		if o := occurrence(t, h.locker, "long", slot); fin.Result != ledger.ResultFailure || fin.Fence <= 0 || o.Token != fin.Fence ||
			o.Status != "ran" || o.Result != ledger.ResultFailure {
			t.Errorf("got result %q fence %d, record %+v; want failure (killed at shutdown) with the fence of the slot's record", fin.Result, fin.Fence, o)
		}
	})
}

// On shutdown the job actor stops claiming, waits for its running run, and
// returns only once the run ended — here after Kill terminated it.
func TestJob_ShutdownWaitsThenKills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "j", "sleep 1000h"))
		h.job.Inbox() <- Fire{Job: "j", Slot: time.Now()}
		waitFor(t, func() bool { return h.running(t) == 1 })
		h.cancel()
		time.Sleep(time.Hour) // fake time: the actor keeps waiting for the run
		synctest.Wait()
		select {
		case err := <-h.done:
			t.Fatalf("Run returned %v before the run ended, want it to wait", err)
		default:
		}
		close(h.kill)
		if err := <-h.done; err != nil {
			t.Fatalf("Run: got %v, want nil", err)
		}
		if fin := <-h.results; fin.ExitCode != -1 {
			t.Errorf("got exit code %d, want -1 (killed)", fin.ExitCode)
		}
		st, _ := h.locker.State(context.Background(), "j")
		if st.LeaseHolder != "" {
			t.Errorf("lease still held by %q after the run, want released", st.LeaseHolder)
		}
	})
}

// A slot another node claimed (it has a record, rule R1) is skipped
// claimed_elsewhere.
func TestJob_SkipsSlotClaimedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startJob(t, testJob(t, "j", "true"))
		slot := time.Now()
		if c, err := h.locker.Claim(t.Context(), scheduleClaim("j", slot, "other", "1")); err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("other node's claim: %+v, %v", c, err)
		}
		h.job.Inbox() <- Fire{Job: "j", Slot: slot}
		waitFor(t, func() bool { return h.skips(t, ledger.SkipClaimedElsewhere) == 1 })
		h.cancel()
		<-h.done
		select {
		case fin := <-h.results:
			t.Fatalf("got a run %+v, want none", fin)
		default:
		}
	})
}

func TestJob_DisabledSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "off", "true")
		cfg.Enabled = false
		h := startJob(t, cfg)
		h.job.Inbox() <- Fire{Job: "off", Slot: time.Now()}
		waitFor(t, func() bool { return h.skips(t, ledger.SkipDisabled) == 1 })
		h.cancel()
		<-h.done
	})
}

// A run that fails is retried with doubling backoff, on the same lease.
func TestJob_RetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "r", "exit 3")
		cfg.Retries = 2
		h := startJob(t, cfg)
		h.job.Inbox() <- Fire{Job: "r", Slot: time.Now()}
		fin := <-h.results
		if fin.Attempts != 3 || fin.Result != ledger.ResultFailure || fin.ExitCode != 3 {
			t.Errorf("got attempts %d result %q exit %d, want 3 failure 3", fin.Attempts, fin.Result, fin.ExitCode)
		}
		h.cancel()
		<-h.done
	})
}

// waitFor waits until every goroutine of the bubble is durably blocked,
// then checks cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatal("condition not reached once the bubble was idle")
	}
}

var errRenew = errors.New("renew failed")

// flakyLocker wraps Memory and fails renewals on demand.
type flakyLocker struct {
	*memory.Memory
	fail     atomic.Bool
	notHeld  atomic.Bool
	renewals atomic.Int32
}

func (f *flakyLocker) Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error) {
	f.renewals.Add(1)
	switch {
	case f.notHeld.Load():
		return 0, ledger.ErrNotHeld
	case f.fail.Load():
		return 0, errRenew
	}
	return f.Memory.Renew(ctx, job, owner, ttl)
}

// Run returns once its ctx is cancelled, also when the cancel comes just
// as its last run ends (a cancel between the actor's exit check and its
// wait left it waiting for nothing: `cronlock run` hung). Real time, many
// rounds: the window is a few instructions wide (the race detector widens
// it).
func TestJob_RunReturnsWhenCancelledAsItsRunEnds(t *testing.T) {
	for i := range 200 {
		h := startJob(t, testJob(t, "j", "exit 0"))
		reply := make(chan Ran, 1)
		h.job.Inbox() <- RunNow{Reply: reply}
		<-reply
		h.cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Run did not return within 5s of its cancel", i)
		}
	}
}
