package actors_test

import (
	"context"
	"errors"
	"github.com/cronlock/cronlock/ledger/memory"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A phantom lease (a claim whose answer was lost) is released by Sweep at
// once, before catch-up claims could trip over it; leases of other owners
// are left alone.
func TestJanitor_SweepReleasesPhantomLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &countingLocker{Memory: memory.NewMemory()}
		if c, err := mem.Claim(t.Context(), manualClaim("j", "n1", "phantom", time.Hour)); err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		jan := NewJanitor(zap.NewNop(), mem, 4)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- jan.Run(ctx) }()
		jan.Inbox() <- Phantom{Job: "j", Owner: "n1:other", Until: time.Now().Add(time.Hour)}
		jan.Inbox() <- Phantom{Job: "j", Owner: "n1:phantom", Until: time.Now().Add(time.Hour)}
		jan.Sweep(t.Context())
		st, _ := mem.State(t.Context(), "j")
		if st.LeaseHolder != "" {
			t.Errorf("lease holder after Sweep: got %q, want released", st.LeaseHolder)
		}
		before := mem.releases.Load()
		time.Sleep(time.Second) // four retry periods: nothing is left to retry
		synctest.Wait()
		if got := mem.releases.Load() - before; got != 0 {
			t.Errorf("releases after Sweep: got %d, want 0 (nothing pending)", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// countingLocker counts Release calls.
type countingLocker struct {
	*memory.Memory
	releases atomic.Int32
}

func (c *countingLocker) Release(ctx context.Context, job, owner string) (bool, error) {
	c.releases.Add(1)
	return c.Memory.Release(ctx, job, owner)
}

// lossyFinish loses the answers of the first finishes: the first is
// applied and then fails (its answer lost), the second fails unapplied.
type lossyFinish struct {
	*memory.Memory
	calls atomic.Int32
}

func (l *lossyFinish) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	switch l.calls.Add(1) {
	case 1:
		_, _ = l.Memory.Finish(ctx, req)
		return ledger.Finished{}, context.DeadlineExceeded
	case 2:
		return ledger.Finished{}, context.DeadlineExceeded
	}
	return l.Memory.Finish(ctx, req)
}

// A run whose finish failed is still recorded, once: the janitor sends the
// finish again (Retry), whether Redis had applied the first one (run 1)
// or not (run 2); the success counts once for max_runs and the lease is
// released.
func TestJanitor_FailedFinishIsSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &lossyFinish{Memory: memory.NewMemory()}
		job, results, stop := withJanitor(t, mem, testJob(t, "j", "exit 0"))
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		for i := range 2 {
			time.Sleep(time.Until(slot.Add(time.Duration(i) * time.Second)))
			job.Inbox() <- Fire{Job: "j", Slot: slot.Add(time.Duration(i) * time.Second)}
			<-results
		}
		time.Sleep(time.Second) // four janitor periods
		synctest.Wait()
		h, err := mem.History(t.Context(), "j", 10)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := mem.State(t.Context(), "j")
		if len(h) != 2 || h[0].RunID == h[1].RunID || st.Runs != 2 || st.LeaseHolder != "" {
			t.Errorf("history %d records, state runs %d, lease %q; want 2 distinct records, 2 runs, no lease",
				len(h), st.Runs, st.LeaseHolder)
		}
		stop()
	})
}

// refusingFinish refuses every finish of job "bad" (a server that keeps
// answering an error: full memory, a key of the wrong type).
type refusingFinish struct{ *memory.Memory }

func (r refusingFinish) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	if req.Job == "bad" {
		return ledger.Finished{}, errors.New("OOM command not allowed when used memory > 'maxmemory'")
	}
	return r.Memory.Finish(ctx, req)
}

// A finish the server keeps refusing holds back neither the phantom
// releases nor the other finishes.
func TestJanitor_RefusedFinishHoldsNothingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := refusingFinish{memory.NewMemory()}
		if c, err := mem.Claim(t.Context(), manualClaim("j", "n1", "phantom", time.Hour)); err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		jan := NewJanitor(zap.NewNop(), mem, 4)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- jan.Run(ctx) }()
		slot := time.Now().Unix()
		jan.Finishes() <- ledger.FinishRequest{Job: "bad", Record: ledger.RunRecord{RunID: "r-bad", Slot: slot, End: time.Now(), Result: ledger.ResultSuccess}}
		jan.Finishes() <- ledger.FinishRequest{Job: "good", Record: ledger.RunRecord{RunID: "r-good", Slot: slot, End: time.Now(), Result: ledger.ResultSuccess}}
		jan.Inbox() <- Phantom{Job: "j", Owner: "n1:phantom", Until: time.Now().Add(time.Hour)}
		time.Sleep(time.Second) // four sweeps
		synctest.Wait()
		if st, _ := mem.State(t.Context(), "j"); st.LeaseHolder != "" {
			t.Errorf("phantom lease still held (%q) while a finish is refused", st.LeaseHolder)
		}
		if h, _ := mem.History(t.Context(), "good", 10); len(h) != 1 {
			t.Errorf("good job's history: %d records, want 1 (sent again past the refused one)", len(h))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Releasing the lease a failed finish had handed to the job's pending slot
// is logged as an error naming the job: that pending slot does not run.
func TestJanitor_HandedOnLeaseReleasedIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		if c, err := mem.Claim(t.Context(), manualClaim("q", "n1", "next", time.Hour)); err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		logs := sweepHandedOn(t, mem, "q", "n1:next")
		got := logs.FilterLevelExact(zap.ErrorLevel).FilterField(zap.String("job", "q")).All()
		if len(got) != 1 || !strings.HasPrefix(got[0].Message, "pending slot not run") {
			t.Errorf("error lines %v; want one \"pending slot not run\" for q", got)
		}
	})
}

// The lease a failed finish had in fact handed to the pending slot is
// taken back and the slot put back as pending (for the job's next claim),
// with a warning naming it.
func TestJanitor_HandedOnSlotPutBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		s := time.Now()
		var token int64
		for i, c := range []struct {
			node, run string
			want      ledger.Outcome
		}{{"n1", "a", ledger.Claimed}, {"n2", "b", ledger.Queued}} {
			time.Sleep(time.Until(s.Add(time.Duration(i) * time.Second))) // each claim at its slot (R2: none early)
			req := scheduleClaim("q", s.Add(time.Duration(i)*time.Second), c.node, c.run)
			req.TTL, req.Queue = time.Hour, true
			got, err := mem.Claim(t.Context(), req)
			if err != nil || got.Outcome != c.want {
				t.Fatalf("claim of %s:%s: %+v, %v; want %v", c.node, c.run, got, err, c.want)
			}
			token = max(token, got.Token)
		}
		if f, err := mem.Finish(t.Context(), ledger.FinishRequest{Job: "q", Owner: "n1:a", Next: "n1:next", TTL: time.Hour,
			Record: ledger.RunRecord{RunID: "a", Slot: s.Unix(), Fence: token}}); err != nil || f.Token == 0 || f.Pending != s.Unix()+1 {
			t.Fatalf("finish handing on: %+v, %v; want slot %d handed on with a token", f, err, s.Unix()+1)
		}
		logs := sweepHandedOn(t, mem, "q", "n1:next")
		if st, _ := mem.State(t.Context(), "q"); st.LeaseHolder != "" || st.Pending != s.Unix()+1 {
			t.Errorf("state %+v; want no lease and slot %d pending again", st, s.Unix()+1)
		}
		if got := logs.FilterMessageSnippet("pending slot put back").FilterField(zap.Int64("pending_slot", s.Unix()+1)).All(); len(got) != 1 {
			t.Errorf("got %d put-back warnings, want 1", len(got))
		}
	})
}

// sweepHandedOn runs a janitor on locker for one sweep of the HandedOn
// phantom of job's owner and returns its log.
func sweepHandedOn(t *testing.T, locker ledger.Locker, job, owner string) *observer.ObservedLogs {
	core, logs := observer.New(zap.InfoLevel)
	jan := NewJanitor(zap.New(core), locker, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- jan.Run(ctx) }()
	jan.Inbox() <- Phantom{Job: job, Owner: owner, Until: time.Now().Add(time.Hour), HandedOn: true}
	jan.Sweep(t.Context())
	cancel()
	<-done
	return logs
}

// flakyRelease fails the next fail Release calls, then releases.
type flakyRelease struct {
	ledger.Locker
	calls, fail atomic.Int32
}

func (f *flakyRelease) Release(context.Context, string, string) (bool, error) {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return false, errors.New("redis down")
	}
	return true, nil
}

// The retry ticker runs only while something waits: a phantom whose
// release fails twice is tried every 250 ms until it is released, and an
// idle janitor then calls nothing, round after round (its ticker stopped
// and started again).
func TestJanitor_RetriesOnlyWhileSomethingWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &flakyRelease{}
		jan := NewJanitor(zap.NewNop(), l, 4)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- jan.Run(ctx) }()
		for round := range 3 {
			l.fail.Store(2)
			before := l.calls.Load()
			jan.Inbox() <- Phantom{Job: "j", Owner: "o", Until: time.Now().Add(time.Hour)}
			time.Sleep(760 * time.Millisecond)
			synctest.Wait()
			if got := l.calls.Load() - before; got != 3 {
				t.Errorf("round %d: %d release calls in 760 ms, want 3 (at 250, 500 and 750 ms)", round, got)
			}
			before = l.calls.Load()
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if got := l.calls.Load() - before; got != 0 {
				t.Errorf("round %d: the idle janitor made %d calls in 5 s, want 0", round, got)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// lossyClaim applies the first claim and loses its answer; then Redis
// stays out of reach (every finish and release fails) until up is set.
type lossyClaim struct {
	*memory.Memory
	calls atomic.Int32
	up    atomic.Bool
}

func (l *lossyClaim) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	c, err := l.Memory.Claim(ctx, req)
	if l.calls.Add(1) == 1 && err == nil {
		return ledger.Claim{}, context.DeadlineExceeded
	}
	return c, err
}

func (l *lossyClaim) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	if !l.up.Load() {
		return ledger.Finished{}, context.DeadlineExceeded
	}
	return l.Memory.Finish(ctx, req)
}

func (l *lossyClaim) Release(ctx context.Context, job, owner string) (bool, error) {
	if !l.up.Load() {
		return false, context.DeadlineExceeded
	}
	return l.Memory.Release(ctx, job, owner)
}

// A claim Redis applied but whose answer was lost did not run: the
// janitor releases its lease and records the slot skipped redis_error, so
// the audit never calls it "unknown, may have run" and a max_runs: 1 job
// runs at its next slot instead of never (docs/protocol.md, R6). Redis is
// out of reach for twice the job's lock_ttl after the lost answer: the
// record is still settled when it answers again.
func TestJanitor_UnansweredClaimRecordedNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &lossyClaim{Memory: memory.NewMemory()}
		cfg := testJob(t, "j", "exit 0")
		cfg.MaxRuns = 1
		job, results, stop := withJanitor(t, mem, cfg)
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(slot))
		job.Inbox() <- Fire{Job: "j", Slot: slot}
		time.Sleep(2 * cfg.LockTTL) // the outage outlasts the lease
		synctest.Wait()
		if occ, _ := mem.Occurrences(t.Context(), "j", slot.Unix(), slot.Unix()); len(occ) != 1 || occ[0].Status != "claimed" {
			t.Fatalf("record during the outage: %+v, want the claim's", occ)
		}
		mem.up.Store(true)
		time.Sleep(500 * time.Millisecond) // two janitor periods
		synctest.Wait()
		occ, err := mem.Occurrences(t.Context(), "j", slot.Unix(), slot.Unix())
		if err != nil || len(occ) != 1 || occ[0].Status != "skipped" || occ[0].Reason != ledger.SkipRedisError {
			t.Fatalf("record of the claim whose answer was lost: %+v, %v; want skipped redis_error", occ, err)
		}
		if st, _ := mem.State(t.Context(), "j"); st.LeaseHolder != "" {
			t.Errorf("lease after the janitor: %q, want released", st.LeaseHolder)
		}
		next := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(next))
		job.Inbox() <- Fire{Job: "j", Slot: next}
		if fin := <-results; fin.Slot != next || fin.Result != ledger.ResultSuccess {
			t.Errorf("next slot: %+v, want it run (max_runs 1 not reached: nothing ran)", fin)
		}
		stop()
	})
}

// withJanitor starts a janitor on locker and a job actor for cfg whose
// phantoms and failed finishes go to it (a fake process start), and
// returns the actor, its results and a stop that ends both (failing the
// test on an error of either). Inside a synctest bubble.
func withJanitor(t *testing.T, locker ledger.Locker, cfg config.Job) (*Job, chan RunFinished, func()) {
	jan := NewJanitor(zap.NewNop(), locker, 4)
	jctx, stopJanitor := context.WithCancel(t.Context())
	janDone := make(chan error, 1)
	go func() { janDone <- jan.Run(jctx) }()
	metrics := NewMetrics(nil)
	metrics.InitJob(cfg.Name)
	results, kill := make(chan RunFinished, 10), make(chan struct{})
	job := NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: metrics, Locker: locker, NodeID: "n1",
		Results: results, Phantoms: jan.Inbox(), Finishes: jan.Finishes(), Kill: kill, Start: fakeproc.Start})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	return job, results, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("job Run: %v", err)
		}
		stopJanitor()
		if err := <-janDone; err != nil {
			t.Fatalf("janitor Run: %v", err)
		}
	}
}
