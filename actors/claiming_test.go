package actors_test

import (
	"context"
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
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slowLocker delays every claim by delay (a slow or hung Redis) and then
// answers from the Memory it points to, or fails with the claim context's
// error when the delay outlasts it. The Memory can be swapped for an empty
// one: Redis restarted without persistence.
type slowLocker struct {
	mem         atomic.Pointer[memory.Memory]
	delay       atomic.Int64 // time.Duration, of each claim
	finishDelay atomic.Int64 // time.Duration, of each finish (release and record)
	claims      atomic.Int32
}

func newSlowLocker() *slowLocker {
	l := &slowLocker{}
	l.mem.Store(memory.NewMemory())
	return l
}

func (l *slowLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	l.claims.Add(1)
	t := time.NewTimer(time.Duration(l.delay.Load()))
	defer t.Stop()
	select {
	case <-t.C:
		return l.mem.Load().Claim(ctx, req)
	case <-ctx.Done():
		return ledger.Claim{}, ctx.Err()
	}
}
func (l *slowLocker) Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error) {
	return l.mem.Load().Renew(ctx, job, owner, ttl)
}
func (l *slowLocker) Release(ctx context.Context, job, owner string) (bool, error) {
	return l.mem.Load().Release(ctx, job, owner)
}
func (l *slowLocker) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	return l.mem.Load().Audit(ctx, req)
}
func (l *slowLocker) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	t := time.NewTimer(time.Duration(l.finishDelay.Load()))
	defer t.Stop()
	select {
	case <-t.C:
		return l.mem.Load().Finish(ctx, req)
	case <-ctx.Done():
		return ledger.Finished{}, ctx.Err()
	}
}

// logHarness is a job actor on l whose log is observed.
type logHarness struct {
	*jobHarness
	logs     *observer.ObservedLogs
	phantoms chan Phantom
}

func startJobOn(t *testing.T, name, command string, l ledger.Locker) *logHarness {
	t.Helper()
	return startJobCfgOn(t, testJob(t, name, command), l)
}

// startJobCfgOn is startJobOn with a job configuration of the caller's.
func startJobCfgOn(t *testing.T, cfg config.Job, l ledger.Locker) *logHarness {
	t.Helper()
	return startJobDeps(t, cfg, l, nil)
}

// startJobDeps is startJobCfgOn whose JobDeps set changes (nil: none)
// before the actor is made.
func startJobDeps(t *testing.T, cfg config.Job, l ledger.Locker, set func(*JobDeps)) *logHarness {
	t.Helper()
	name := cfg.Name
	core, logs := observer.New(zapcore.DebugLevel)
	h := &jobHarness{name: name, metrics: NewMetrics(nil), results: make(chan RunFinished, 10),
		kill: make(chan struct{}), done: make(chan error, 1)}
	h.metrics.InitJob(name)
	phantoms := make(chan Phantom, 10)
	deps := JobDeps{MaxSkew: testMaxSkew, Log: zap.New(core), Metrics: h.metrics, Locker: l,
		NodeID: "n1", Results: h.results, Phantoms: phantoms, Kill: h.kill, Start: fakeproc.Start}
	if set != nil {
		set(&deps)
	}
	h.job = NewJob(cfg, deps)
	ctx, cancel := context.WithCancel(t.Context())
	h.cancel = cancel
	go func() { h.done <- h.job.Run(ctx) }()
	return &logHarness{jobHarness: h, logs: logs, phantoms: phantoms}
}

// stop cancels the actor, kills its runs and waits for it.
func (h *logHarness) stop(t *testing.T) {
	h.cancel()
	close(h.kill)
	if err := <-h.done; err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
}

// skipped returns the skip reason logged for each slot (Unix seconds).
func (h *logHarness) skipped() map[int64]string {
	out := map[int64]string{}
	for _, e := range h.logs.FilterMessage("slot skipped").All() {
		out[e.ContextMap()["slot"].(int64)] = e.ContextMap()["reason"].(string)
	}
	return out
}

// Issue 9: while this node's claim of slot S hangs (claim timeout 2 s), the
// fire of S+1 is held, and when the claim fails both slots are skipped
// redis_error — never overlap_local, which would say this node runs the
// job.
func TestJob_FireDuringFailingClaimIsRedisError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSlowLocker()
		l.delay.Store(int64(time.Hour)) // hung
		h := startJobOn(t, "j", "exit 0", l)
		s := time.Now().Truncate(time.Second)
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		time.Sleep(time.Second)
		h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Second)}
		synctest.Wait()
		if got := h.skipped(); len(got) != 0 {
			t.Fatalf("while the claim is pending: got skips %v, want none (the fire is held)", got)
		}
		time.Sleep(1500 * time.Millisecond) // the claim of S times out at +2 s
		synctest.Wait()
		// Both slots are counted redis_error; the second line is
		// summarised (repeats.go), so only the first must be logged.
		if n := h.skips(t, ledger.SkipRedisError); n != 2 {
			t.Errorf("redis_error skips: got %v, want 2", n)
		}
		got := h.skipped()
		if got[s.Unix()] != ledger.SkipRedisError {
			t.Errorf("logged skips %v: want slot %d logged redis_error", got, s.Unix())
		}
		for slot, reason := range got {
			if reason != ledger.SkipRedisError {
				t.Errorf("slot %d logged %s, want redis_error", slot, reason)
			}
		}
		if n := h.skips(t, ledger.SkipOverlapLocal); n != 0 {
			t.Errorf("overlap_local skips: got %v, want 0", n)
		}
		if n := l.claims.Load(); n != 1 {
			t.Errorf("claims sent: got %d, want 1 (the held slot is not claimed)", n)
		}
		h.stop(t)
	})
}

// A fire that arrives while the previous run's release hangs (Redis froze
// after the run) is held too: the release fails, so it is skipped
// redis_error, not overlap_local; once Redis answers, the next slot runs.
func TestJob_FireDuringFailingReleaseIsRedisError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSlowLocker()
		l.finishDelay.Store(int64(time.Hour)) // hung after the claim
		h := startJobOn(t, "j", "sleep 100ms", l)
		s := time.Now().Truncate(time.Second)
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		time.Sleep(time.Second) // the run ended at +100 ms; its release hangs until +2.1 s
		h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Second)}
		synctest.Wait()
		if got := h.skipped(); len(got) != 0 {
			t.Fatalf("while the release is pending: got skips %v, want none (the fire is held)", got)
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := h.skipped(); len(got) != 1 || got[s.Unix()+1] != ledger.SkipRedisError {
			t.Errorf("got skips %v, want slot %d redis_error", got, s.Unix()+1)
		}
		if fin := <-h.results; !fin.Slot.Equal(s) || fin.Result != ledger.ResultSuccess {
			t.Errorf("first run: got slot %v result %q, want %v success", fin.Slot, fin.Result, s)
		}
		l.finishDelay.Store(0)
		p := <-h.phantoms // what the janitor would release
		if ok, err := l.Release(t.Context(), p.Job, p.Owner); !ok || err != nil {
			t.Fatalf("release of the phantom lease: got %v, %v; want true, nil", ok, err)
		}
		h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(3 * time.Second)}
		if fin := <-h.results; !fin.Slot.Equal(s.Add(3 * time.Second)) {
			t.Errorf("after Redis answers: got run of slot %v, want %v", fin.Slot, s.Add(3*time.Second))
		}
		if n := h.skips(t, ledger.SkipOverlapLocal); n != 0 {
			t.Errorf("overlap_local skips: got %v, want 0", n)
		}
		h.stop(t)
	})
}

// A fire held during a claim that is then won is skipped overlap_local: the
// node now runs the job. (The claim's round trip, 900 ms, fits the slot's
// answer window, testMaxSkew, twice: the run counts Redis time as the
// claim answered plus the whole round trip, rule R3.)
func TestJob_FireDuringWinningClaimIsOverlapLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSlowLocker()
		l.delay.Store(int64(900 * time.Millisecond)) // slow, within the 2 s claim timeout
		h := startJobOn(t, "j", "sleep 10s", l)
		s := time.Now().Truncate(time.Second)
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		time.Sleep(500 * time.Millisecond)
		h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Second)} // while the claim of s is pending
		time.Sleep(3 * time.Second)                               // its own claim (too early, then at its slot) is answered
		synctest.Wait()
		if got := h.skipped(); len(got) != 1 || got[s.Unix()+1] != ledger.SkipOverlapLocal {
			t.Errorf("got skips %v, want slot %d overlap_local", got, s.Unix()+1)
		}
		if got := h.running(t); got != 1 {
			t.Errorf("job_running: got %v, want 1", got)
		}
		h.stop(t)
		if fin := <-h.results; !fin.Slot.Equal(s) {
			t.Errorf("run of slot %v, want %v", fin.Slot, s)
		}
	})
}

// A fire held during a claim that is answered without a run (the slot was
// claimed elsewhere) is claimed normally when the answer comes.
func TestJob_FireDuringLosingClaimIsClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSlowLocker()
		s := time.Now().Truncate(time.Second)
		n2 := scheduleClaim("j", s, "n2", "x")
		n2.Lease = false // n2's run holds no lease here: the next slot is free to claim
		if c, err := l.mem.Load().Claim(t.Context(), n2); err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("n2's claim: %+v, %v", c, err)
		}
		l.delay.Store(int64(600 * time.Millisecond)) // twice within the answer window (rule R3)
		h := startJobOn(t, "j", "exit 0", l)
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		time.Sleep(300 * time.Millisecond)
		h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Second)} // while the claim of s is pending
		fin := <-h.results
		if !fin.Slot.Equal(s.Add(time.Second)) || fin.Result != ledger.ResultSuccess {
			t.Errorf("got run of slot %v result %q, want slot %v success", fin.Slot, fin.Result, s.Add(time.Second))
		}
		if got := h.skipped(); len(got) != 1 || got[s.Unix()] != ledger.SkipClaimedElsewhere {
			t.Errorf("got skips %v, want only slot %d claimed_elsewhere", got, s.Unix())
		}
		h.stop(t)
	})
}

// Redis restarted empty (rule R5): the node's next claim carries the
// ledger seq it saw, finds the ledger behind it and repairs it: the slots
// up to max_clock_skew after the loss, which have no record, are not run
// (skipped state_lost, each with a warning) — a slot whose record was lost
// may have run already; the repair is logged once as a warning naming
// what it found and counted once; the next slot runs, its fencing token
// above every token before the loss (rule R4: tokens follow Redis time
// in µs, not the lost counter).
func TestJob_RepairsStateRedisLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newSlowLocker()
		h := startJobOn(t, "j", "exit 0", l)
		s := time.Now().Truncate(time.Second).Add(time.Second)
		var last int64
		for i := range 3 {
			time.Sleep(time.Until(s.Add(time.Duration(i) * time.Second)))
			h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Duration(i) * time.Second)}
			fin := <-h.results
			if fin.Fence <= last {
				t.Fatalf("run %d: fence %d after %d, want strictly increasing", i, fin.Fence, last)
			}
			last = fin.Fence
		}
		l.mem.Store(memory.NewMemory()) // restarted empty
		for i := 3; i <= 6; i++ {
			slot := s.Add(time.Duration(i) * time.Second)
			time.Sleep(time.Until(slot))
			h.job.Inbox() <- Fire{Job: "j", Slot: slot}
			synctest.Wait()
		}
		fin := <-h.results
		if want := s.Add(6 * time.Second); !fin.Slot.Equal(want) || fin.Result != ledger.ResultSuccess || fin.Fence <= last {
			t.Errorf("after the loss: got run of slot %v result %s fence %d, want slot %v success with a fence above %d",
				fin.Slot, fin.Result, fin.Fence, want, last)
		}
		got := h.skipped()
		for i := int64(3); i <= 5; i++ {
			if got[s.Unix()+i] != ledger.SkipStateLost {
				t.Errorf("slot %d (within max_clock_skew of the loss): got skips %v, want state_lost", s.Unix()+i, got)
			}
			if o := occurrence(t, l.mem.Load(), "j", s.Add(time.Duration(i)*time.Second)); o.Status != "skipped" || o.Reason != ledger.SkipStateLost {
				t.Errorf("slot %d's record: %+v, want skipped state_lost", s.Unix()+i, o)
			}
		}
		if n := h.logs.FilterMessageSnippet("redis lost the job's ledger around it").FilterLevelExact(zapcore.WarnLevel).Len(); n != 3 {
			t.Errorf("state_lost warnings: got %d, want 3", n)
		}
		repairs := h.logs.FilterMessageSnippet("ledger state repaired").All()
		if len(repairs) != 1 || repairs[0].Level != zapcore.WarnLevel {
			t.Fatalf("repair logs: got %v, want one warning", repairs)
		}
		if f := repairs[0].ContextMap(); f["job"] != "j" || f["found_seq"] != int64(0) || f["seq"].(int64) < 5 {
			t.Errorf("repair log fields: got %v, want job j, found_seq 0, seq raised to at least what the node had seen (5, its last claim's answer)", f)
		}
		if got := promtest.Value(t, h.metrics, "cronlock_state_repairs_total", "job", "j"); got != 1 {
			t.Errorf("cronlock_state_repairs_total: got %v, want 1", got)
		}
		h.stop(t)
	})
}
