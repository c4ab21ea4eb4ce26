package actors_test

import (
	"context"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// One test per rule of protocol v2 (docs/protocol.md) that the actors
// keep: R1 as the run path sees it, R2's early edge, R3's start check,
// R7's expiry of a handed-on pending slot, R8's audit, and R3's bounds on
// the state directory and the process start.

// runStarted returns the "run started" lines of slot.
func (h *logHarness) runStarted(slot time.Time) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range h.logs.FilterMessage("run started").All() {
		if e.ContextMap()["slot"] == slot.Unix() {
			out = append(out, e)
		}
	}
	return out
}

// noResult fails when a run's result is waiting.
func (h *logHarness) noResult(t *testing.T, why string) {
	t.Helper()
	select {
	case fin := <-h.results:
		t.Errorf("%s: got a run of slot %v (%s), want none", why, fin.Slot, fin.Result)
	default:
	}
}

// R1: the claims of S+1 reach Redis before those of S (overlap allow, a
// late fire of S): S is not lost, both slots run, each has its own record,
// and the tokens follow the order of the claims, not of the slots.
func TestRule1_LaterSlotClaimedFirstDoesNotLoseTheEarlierOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		cfg := testJob(t, "a", "exit 0")
		cfg.Overlap = config.OverlapAllow
		h := startJobCfgOn(t, cfg, mem)
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s.Add(time.Second)))
		h.job.Inbox() <- Fire{Job: "a", Slot: s.Add(time.Second)}
		first := <-h.results
		h.job.Inbox() <- Fire{Job: "a", Slot: s} // 1 s late: within its answer window
		second := <-h.results
		if !first.Slot.Equal(s.Add(time.Second)) || !second.Slot.Equal(s) || first.Result != ledger.ResultSuccess ||
			second.Result != ledger.ResultSuccess {
			t.Fatalf("runs: slot %v (%s) then slot %v (%s); want %v then %v, both success", first.Slot, first.Result,
				second.Slot, second.Result, s.Add(time.Second), s)
		}
		if second.Fence <= first.Fence {
			t.Errorf("fences: S+1 got %d, S (claimed after it) %d; want S's above", first.Fence, second.Fence)
		}
		for _, slot := range []time.Time{s, s.Add(time.Second)} {
			if o := occurrence(t, mem, "a", slot); o.Status != "ran" || o.Node != "n1" {
				t.Errorf("slot %d's record: %+v, want ran by n1", slot.Unix(), o)
			}
		}
		if got := h.skipped(); len(got) != 0 {
			t.Errorf("skips %v, want none", got)
		}
		h.stop(t)
	})
}

// R2 and R3: a node whose clock is fast by less than max_clock_skew claims
// its slot early (its ticker fired early) and the claim is accepted, but
// the process starts only once Redis time has reached the slot: at the
// slot, not before. A node fast by more than max_clock_skew is refused
// (clock_skew, a warning with its offset from Redis time), nothing is
// recorded for the slot, and nothing runs.
func TestRule3_FastClockWaitsForTheSlotBeforeForking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		var skew atomic.Int64 // the node's clock minus the bubble's (Redis time)
		h := startJobDeps(t, testJob(t, "j", "exit 0"), mem, func(d *JobDeps) {
			d.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		})
		s := time.Now().Truncate(time.Second).Add(5 * time.Second)

		skew.Store(int64(1500 * time.Millisecond))
		time.Sleep(time.Until(s.Add(-1500 * time.Millisecond))) // the node's clock says s: its ticker fires
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		fin := <-h.results
		if !fin.Started.Equal(s) || fin.Result != ledger.ResultSuccess {
			t.Errorf("run of slot %v: started %v (%s), want at the slot", s, fin.Started, fin.Result)
		}
		if got := h.runStarted(s); len(got) != 1 || got[0].ContextMap()["fire_delay_us"] != int64(0) {
			t.Errorf("run started lines of slot %v: %v, want one with fire_delay_us 0", s, got)
		}
		if o := occurrence(t, mem, "j", s); o.Status != "ran" || o.Claimed != s.UnixMilli() || o.Started != s.UnixMilli() {
			t.Errorf("slot's record: %+v, want ran, claimed at the slot (the early claim answered too_early and sent "+
				"again then), started at it", o)
		}

		s2 := s.Add(5 * time.Second)
		skew.Store(int64(3 * time.Second))
		time.Sleep(time.Until(s2.Add(-3 * time.Second)))
		h.job.Inbox() <- Fire{Job: "j", Slot: s2}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		h.noResult(t, "a node 3 s fast")
		if got := h.skipped(); got[s2.Unix()] != "" {
			t.Errorf("slot skipped lines %v: want none for slot %d (clock_skew is a warning of its own)", got, s2.Unix())
		}
		if n := h.skips(t, ledger.SkipClockSkew); n != 1 {
			t.Errorf("clock_skew skips: got %v, want 1", n)
		}
		warned := h.logs.FilterMessageSnippet("redis time is outside the slot's claim window").All()
		if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel ||
			warned[0].ContextMap()["offset_from_redis"] != 3*time.Second {
			t.Errorf("clock skew warnings: %v, want one warning with offset_from_redis 3s", warned)
		}
		if o := occurrence(t, mem, "j", s2); o.Status != "" {
			t.Errorf("slot %d's record: %+v, want none (a refused clock writes nothing)", s2.Unix(), o)
		}
		h.stop(t)
	})
}

// lateArrivalLocker holds each claim delay before deciding it: a claim
// that reaches Redis late (the node or Redis overloaded), sent by a node
// whose clock is right.
type lateArrivalLocker struct {
	*memory.Memory
	delay atomic.Int64 // time.Duration
}

func (l *lateArrivalLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	time.Sleep(time.Duration(l.delay.Load()))
	return l.Memory.Claim(ctx, req)
}

// R2: a claim that reaches Redis after its slot's answer window from a
// node whose clock agrees with Redis's is refused like a wrong clock
// (nothing recorded, nothing run), but its signal says what happened: skip
// reason claim_late, a warning with how late it was and how long the round
// trip took, and no clock_skew (no offset blamed on a clock that is right).
func TestRule2_LateClaimIsClaimLateNotClockSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lateArrivalLocker{Memory: memory.NewMemory()}
		cfg := testJob(t, "j", "exit 0")
		const skew = 500 * time.Millisecond // node.max_clock_skew: the late claim stays within the claim timeout
		h := startJobDeps(t, cfg, l, func(d *JobDeps) { d.MaxSkew = skew })
		s := time.Now().Truncate(time.Second).Add(5 * time.Second)
		answer := ledger.AnswerWindow(skew, cfg.LockTTL, 0)
		l.delay.Store(int64(answer + 500*time.Millisecond))
		time.Sleep(time.Until(s))
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		time.Sleep(answer + 2*time.Second)
		synctest.Wait()
		h.noResult(t, "a claim that arrived late")
		if n := h.skips(t, ledger.SkipClaimLate); n != 1 {
			t.Errorf("claim_late skips: got %v, want 1", n)
		}
		if n := h.skips(t, ledger.SkipClockSkew); n != 0 {
			t.Errorf("clock_skew skips: got %v, want 0 (the clock is right)", n)
		}
		warned := h.logs.FilterMessageSnippet("the claim came late").All()
		if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel ||
			warned[0].ContextMap()["late_by"] != 500*time.Millisecond || warned[0].ContextMap()["sent_after_slot"] != time.Duration(0) ||
			warned[0].ContextMap()["claim_round_trip"] != answer+500*time.Millisecond {
			t.Errorf("late claim warnings: %v, want one warning, late_by 500ms, claim_round_trip %v", warned, answer+500*time.Millisecond)
		}
		if got := h.logs.FilterMessageSnippet("clock is off").All(); len(got) != 0 {
			t.Errorf("clock warnings %v, want none", got)
		}
		if o := occurrence(t, l.Memory, "j", s); o.Status != "" {
			t.Errorf("slot's record: %+v, want none (a refused late claim writes nothing)", o)
		}
		h.stop(t)
	})
}

// fireBehind starts job cfg on l with node.max_clock_skew 2 s and a clock
// behind the bubble's (Redis time) by behind, fires the slot 5 s ahead
// when the node's clock reaches it, and waits for settle.
func fireBehind(t *testing.T, cfg config.Job, l ledger.Locker, behind, settle time.Duration) *logHarness {
	t.Helper()
	h := startJobDeps(t, cfg, l, func(d *JobDeps) {
		d.MaxSkew = 2 * time.Second
		d.Now = func() time.Time { return time.Now().Add(-behind) }
	})
	s := time.Now().Truncate(time.Second).Add(5 * time.Second)
	time.Sleep(time.Until(s.Add(behind))) // the node's clock says s
	h.job.Inbox() <- Fire{Job: cfg.Name, Slot: s}
	time.Sleep(settle)
	synctest.Wait()
	return h
}

// checkBehindSkip checks a fireBehind slot's skips (clock_skew, claim_late
// counted) and that the one warning containing warning gives the node's
// offset from Redis time, -behind.
func (h *logHarness) checkBehindSkip(t *testing.T, clockSkew, claimLate float64, warning string, behind time.Duration) {
	t.Helper()
	if n, late := h.skips(t, ledger.SkipClockSkew), h.skips(t, ledger.SkipClaimLate); n != clockSkew || late != claimLate {
		t.Errorf("clock_skew, claim_late skips: got %v, %v, want %v, %v", n, late, clockSkew, claimLate)
	}
	warned := h.logs.FilterMessageSnippet(warning).All()
	if len(warned) != 1 || warned[0].ContextMap()["offset_from_redis"] != -behind {
		t.Errorf("warnings %q: %v, want one with offset_from_redis %v", warning, warned, -behind)
	}
}

// R2: a node whose clock is behind Redis's by less than
// node.max_clock_skew but more than the answer window (lock_ttl 1 s, the
// clock 1.5 s behind, max_clock_skew 2 s) sends its claims in time by its
// own clock and they arrive late in Redis time: clock_skew with the
// offset (the clock is what is wrong), not claim_late.
func TestRule2_SlowClockWithinMaxSkewIsClockSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testJob(t, "j", "exit 0")
		cfg.LockTTL = time.Second
		const behind = 1500 * time.Millisecond
		h := fireBehind(t, cfg, memory.NewMemory(), behind, 3*time.Second)
		h.noResult(t, "a node 1.5 s behind, lock_ttl 1s")
		h.checkBehindSkip(t, 1, 0, "fix NTP", behind)
		h.stop(t)
	})
}

// R8 with a local reason: a slot this node skipped on its own (here
// claim_late: its claim reached Redis after the window) and that no node
// claimed is recorded missed by this node's audit with that reason.
func TestRule8_MissedRecordCarriesTheLocalReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lateArrivalLocker{Memory: memory.NewMemory()}
		cfg := testJob(t, "j", "exit 0")
		cfg.Schedule, cfg.Sched = "*/5 * * * * *", MustSchedule(t, "*/5 * * * * *")
		const skew = 500 * time.Millisecond
		h := startJobDeps(t, cfg, l, func(d *JobDeps) { d.MaxSkew = skew })
		a, _, _ := newAuditor(l, "n1", time.Now())
		a.MaxSkew = skew
		if _, err := a.Audit(t.Context(), &cfg, h.job); err != nil { // reads audited_to: now
			t.Fatal(err)
		}
		answer := ledger.AnswerWindow(skew, cfg.LockTTL, 0)
		s0 := time.Now().Truncate(5 * time.Second).Add(5 * time.Second)
		time.Sleep(time.Until(s0))
		h.job.Inbox() <- Fire{Job: "j", Slot: s0} // runs: the ledger begins
		<-h.results
		s1 := s0.Add(5 * time.Second)
		l.delay.Store(int64(answer + 500*time.Millisecond))
		time.Sleep(time.Until(s1))
		h.job.Inbox() <- Fire{Job: "j", Slot: s1}
		time.Sleep(answer + AuditGrace + time.Second)
		synctest.Wait()
		if n := h.skips(t, ledger.SkipClaimLate); n != 1 {
			t.Fatalf("claim_late skips: %v, want 1", n)
		}
		if got, err := a.Audit(t.Context(), &cfg, h.job); err != nil || fmt.Sprint(got) != fmt.Sprint([]int64{s1.Unix()}) {
			t.Fatalf("audit: %v, %v; want slot %d", got, err, s1.Unix())
		}
		if o := occurrence(t, l.Memory, "j", s1); o.Status != "missed" || !strings.HasSuffix(o.Reason, fmt.Sprintf("this node skipped slot %d: claim_late", s1.Unix())) {
			t.Errorf("slot %d's record: %+v, want missed with this node's reason claim_late", s1.Unix(), o)
		}
		h.stop(t)
	})
}

// R2: a node whose clock is 1.2 s behind (within max_clock_skew 2 s and
// the answer window 2 s) and whose claim then takes 1 s to reach Redis is
// refused past the window: claim_late with the offset, not clock_skew
// (the clock alone would have left it 0.8 s).
func TestRule2_LateClaimFromASlowClockWithinTheWindowIsClaimLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lateArrivalLocker{Memory: memory.NewMemory()}
		l.delay.Store(int64(time.Second))
		const behind = 1200 * time.Millisecond
		h := fireBehind(t, testJob(t, "j", "exit 0"), l, behind, 4*time.Second)
		h.noResult(t, "a node 1.2 s behind whose claim took 1 s")
		h.checkBehindSkip(t, 0, 1, "the claim came late", behind)
		h.stop(t)
	})
}

// lateAnswerLocker decides each claim at once (in Redis time of the send)
// and delivers its answer delay later: a node paused, or an answer held
// by the network, right after the claim.
type lateAnswerLocker struct {
	*memory.Memory
	delay atomic.Int64 // time.Duration
}

func (l *lateAnswerLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	c, err := l.Memory.Claim(ctx, req)
	time.Sleep(time.Duration(l.delay.Load()))
	return c, err
}

// R3: a won claim whose lease is no longer live when its answer arrives
// (lock_ttl 3 s is live for 2.4 s from the send; the answer came after
// 2.5 s), or whose slot's answer window has passed (2 s; the lease still
// live), does not start: the slot is skipped lock_lost with a warning, its
// record says skipped lock_lost (with the claim's token), the lease is
// released, and the next slot runs. An answer within both runs.
func TestRule3_WonClaimWithoutALiveLeaseIsNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name            string
		lockTTL, skew   time.Duration // lock_ttl, node.max_clock_skew
		delay           time.Duration // the answer's delay
		wantSkip        string
		wantRunStarted  bool
		wantRecordState string
	}{
		{"lease no longer live", 3 * time.Second, 10 * time.Second, 2500 * time.Millisecond, ledger.SkipLockLost, false, "skipped"},
		{"answer window passed", 30 * time.Second, 2 * time.Second, 2500 * time.Millisecond, ledger.SkipLockLost, false, "skipped"},
		{"both within", 3 * time.Second, 10 * time.Second, 1500 * time.Millisecond, "", true, "ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &lateAnswerLocker{Memory: memory.NewMemory()}
				l.delay.Store(int64(tc.delay))
				cfg := testJob(t, "j", "exit 0")
				cfg.LockTTL = tc.lockTTL
				h := startJobDeps(t, cfg, l, func(d *JobDeps) { d.MaxSkew, d.ClaimTimeout = tc.skew, 5*time.Second })
				s := time.Now().Truncate(time.Second).Add(time.Second)
				time.Sleep(time.Until(s))
				h.job.Inbox() <- Fire{Job: "j", Slot: s}
				time.Sleep(5 * time.Second)
				synctest.Wait()

				o := occurrence(t, l.Memory, "j", s)
				if o.Status != tc.wantRecordState || o.Reason != tc.wantSkip || o.Token <= 0 || o.Node != "n1" {
					t.Errorf("slot's record: %+v, want %s %s with the claim's token", o, tc.wantRecordState, tc.wantSkip)
				}
				if got := len(h.runStarted(s)) == 1; got != tc.wantRunStarted {
					t.Errorf("run started: %v, want %v", got, tc.wantRunStarted)
				}
				if st, _ := l.State(t.Context(), "j"); st.LeaseHolder != "" {
					t.Errorf("lease held by %q after the slot, want released", st.LeaseHolder)
				}
				if tc.wantSkip == "" {
					if fin := <-h.results; !fin.Slot.Equal(s) || fin.Result != ledger.ResultSuccess {
						t.Errorf("run: slot %v result %s, want %v success", fin.Slot, fin.Result, s)
					}
					h.stop(t)
					return
				}
				h.noResult(t, "a claim not started")
				if n := h.skips(t, ledger.SkipLockLost); n != 1 {
					t.Errorf("lock_lost skips: got %v, want 1", n)
				}
				warned := h.logs.FilterMessageSnippet("won claim not started").All()
				if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel || warned[0].ContextMap()["reason"] != ledger.SkipLockLost {
					t.Errorf("not-started warnings: %v, want one warning with reason lock_lost", warned)
				}
				if got := h.skipped(); got[s.Unix()] != ledger.SkipLockLost {
					t.Errorf("skips %v, want slot %d lock_lost", got, s.Unix())
				}

				l.delay.Store(0)
				next := s.Add(10 * time.Second)
				time.Sleep(time.Until(next))
				h.job.Inbox() <- Fire{Job: "j", Slot: next}
				if fin := <-h.results; !fin.Slot.Equal(next) || fin.Result != ledger.ResultSuccess {
					t.Errorf("next slot: run of %v (%s), want %v success", fin.Slot, fin.Result, next)
				}
				h.stop(t)
			})
		})
	}
}

// R7: overlap queue without a catch-up window, a run (2.5 s) longer than
// its interval: the slot that came due during it is pending, and its next
// slot has come due by the time the run ends. The finish hands the lease
// on to the pending slot, but the handed-on run does not start: the slot
// is recorded skipped expired (info), the lease is released, no process
// starts, and the job runs again at its next slot.
func TestRule7_HandedOnPendingSlotExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		cfg := testJob(t, "q", "sleep 2500ms")
		cfg.Overlap = config.OverlapQueue
		h := startJobCfgOn(t, cfg, mem)
		s := time.Now().Truncate(time.Second).Add(time.Second)
		for i := range 3 { // s runs, s+1 is pending, s+2 finds it pending: overlap
			time.Sleep(time.Until(s.Add(time.Duration(i) * time.Second)))
			h.job.Inbox() <- Fire{Job: "q", Slot: s.Add(time.Duration(i) * time.Second)}
		}
		first := <-h.results
		time.Sleep(time.Until(s.Add(4 * time.Second)))
		synctest.Wait()
		if !first.Slot.Equal(s) || first.Result != ledger.ResultSuccess {
			t.Fatalf("first run: slot %v result %s, want %v success", first.Slot, first.Result, s)
		}
		h.noResult(t, "the expired pending slot")
		pending := s.Add(time.Second)
		if o := occurrence(t, mem, "q", pending); o.Status != "skipped" || o.Reason != ledger.SkipExpired ||
			o.Trigger != string(ledger.TriggerQueued) || o.Token <= first.Fence {
			t.Errorf("pending slot's record: %+v, want skipped expired, trigger queued, with the token the hand-on minted", o)
		}
		dropped := h.logs.FilterMessageSnippet("pending slot dropped").All()
		if len(dropped) != 1 || dropped[0].Level != zapcore.InfoLevel || dropped[0].ContextMap()["slot"] != pending.Unix() {
			t.Errorf("dropped lines: %v, want one at info for slot %d", dropped, pending.Unix())
		}
		if len(h.runStarted(pending)) != 0 {
			t.Errorf("the expired pending slot started a process")
		}
		if n := h.skips(t, ledger.SkipExpired); n != 1 {
			t.Errorf("expired skips: got %v, want 1", n)
		}
		if n := h.skips(t, ledger.SkipOverlap); n != 1 {
			t.Errorf("overlap skips: got %v, want 1 (slot %d)", n, s.Unix()+2)
		}
		if st, _ := mem.State(t.Context(), "q"); st.LeaseHolder != "" || st.Pending != 0 {
			t.Errorf("state after the expiry: lease %q, pending %d; want neither", st.LeaseHolder, st.Pending)
		}
		next := s.Add(5 * time.Second)
		time.Sleep(time.Until(next))
		h.job.Inbox() <- Fire{Job: "q", Slot: next}
		if fin := <-h.results; !fin.Slot.Equal(next) || fin.Trigger != ledger.TriggerSchedule || fin.Result != ledger.ResultSuccess {
			t.Errorf("next slot: run of %v (%s, %s), want %v schedule success", fin.Slot, fin.Trigger, fin.Result, next)
		}
		h.stop(t)
	})
}

// countingAudits counts the audit calls that reach the backend.
type countingAudits struct {
	*memory.Memory
	calls atomic.Int32
}

func (c *countingAudits) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	c.calls.Add(1)
	return c.Memory.Audit(ctx, req)
}

// newAuditor is an Auditor of node on l with testMaxSkew, started at
// started, logging to an observer; it returns its metrics too.
func newAuditor(l ledger.Locker, node string, started time.Time) (*Auditor, *observer.ObservedLogs, *Metrics) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := NewMetrics(nil)
	m.InitJob("tick")
	return &Auditor{Log: zap.New(core), Metrics: m, Locker: l, NodeID: node, MaxSkew: testMaxSkew,
		Now: time.Now, Started: started}, logs, m
}

// R8: two nodes audit a */5 job. Slots that come due with no record are
// recorded missed once their answer window and grace have passed, once in
// the cluster: by the node that audits first, with one warning naming the
// range and a count in cronlock_occurrences_missed_total; the other
// node's audit finds audited_to moved (stale) and records, counts and
// warns nothing. A slot that ran is not missed. More misses of the same
// outage are logged at info; after a slot that was decided, the next miss
// warns again. A slot not yet certain sends nothing to the backend.
func TestRule8_AuditorRecordsMissedOccurrencesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &countingAudits{Memory: memory.NewMemory()}
		t0 := time.Now() // 2000-01-01T00:00:00Z: a slot of the job
		cfg := testJob(t, "tick", "exit 0")
		cfg.Schedule, cfg.Sched = "*/5 * * * * *", MustSchedule(t, "*/5 * * * * *")
		a1, logs1, m1 := newAuditor(l, "n1", t0)
		a2, logs2, m2 := newAuditor(l, "n2", t0)
		for _, a := range []*Auditor{a1, a2} { // both read audited_to: t0
			if got, err := a.Audit(t.Context(), &cfg, nil); err != nil || len(got) != 0 {
				t.Fatalf("first audit: %v, %v; want nothing", got, err)
			}
		}
		time.Sleep(10 * time.Second)
		ran := scheduleClaim("tick", t0.Add(10*time.Second), "n3", "r")
		ran.Lease = false
		if c, err := l.Claim(t.Context(), ran); err != nil || c.Outcome != ledger.Claimed { // slot t0+10 is claimed
			t.Fatalf("claim of t0+10: %+v, %v", c, err)
		}
		time.Sleep(10 * time.Second) // t0+20: t0+5 and t0+15 are certain (window 2 s + grace 2 s), t0+20 not yet

		got, err := a1.Audit(t.Context(), &cfg, nil)
		if err != nil || fmt.Sprint(got) != fmt.Sprint([]int64{t0.Unix() + 5, t0.Unix() + 15}) {
			t.Fatalf("n1's audit: %v, %v; want slots %d and %d", got, err, t0.Unix()+5, t0.Unix()+15)
		}
		if got, err := a2.Audit(t.Context(), &cfg, nil); err != nil || len(got) != 0 {
			t.Fatalf("n2's audit after n1's: %v, %v; want nothing (stale)", got, err)
		}
		if got, err := a2.Audit(t.Context(), &cfg, nil); err != nil || len(got) != 0 {
			t.Fatalf("n2's second audit: %v, %v; want nothing", got, err)
		}
		warned := logs1.FilterMessageSnippet("occurrences missed").All()
		if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel {
			t.Fatalf("n1's missed-occurrence lines: %v, want one warning", warned)
		}
		if f := warned[0].ContextMap(); f["job"] != "tick" || f["missed"] != int64(2) || f["first_slot"] != t0.Unix()+5 ||
			f["last_slot"] != t0.Unix()+15 {
			t.Errorf("warning fields: %v, want job tick, missed 2, slots %d to %d", f, t0.Unix()+5, t0.Unix()+15)
		}
		if n := logs2.FilterMessageSnippet("missed").Len(); n != 0 {
			t.Errorf("n2 logged %d missed-occurrence lines, want 0", n)
		}
		for _, c := range []struct {
			m    *Metrics
			want float64
		}{{m1, 2}, {m2, 0}} {
			if got := promtest.Value(t, c.m, "cronlock_occurrences_missed_total", "job", "tick"); got != c.want {
				t.Errorf("cronlock_occurrences_missed_total: got %v, want %v", got, c.want)
			}
		}
		// n3's claim of t0+10 is within its lease and window still: claimed.
		for i, want := range []string{"missed", "claimed", "missed"} {
			slot := t0.Add(time.Duration(5*(i+1)) * time.Second)
			if o := occurrence(t, l.Memory, "tick", slot); o.Status != want {
				t.Errorf("slot %d's record: %+v, want %s", slot.Unix(), o, want)
			}
		}

		calls := l.calls.Load()
		for range 3 { // t0+20 is not certain until t0+24: nothing to ask
			if got, err := a1.Audit(t.Context(), &cfg, nil); err != nil || len(got) != 0 {
				t.Fatalf("audit before the next slot is certain: %v, %v", got, err)
			}
		}
		if n := l.calls.Load() - calls; n != 0 {
			t.Errorf("audits before the next slot was certain sent %d calls, want 0", n)
		}

		time.Sleep(5 * time.Second) // t0+25: t0+20 is missed too, the outage goes on
		if got, err := a1.Audit(t.Context(), &cfg, nil); err != nil || fmt.Sprint(got) != fmt.Sprint([]int64{t0.Unix() + 20}) {
			t.Fatalf("n1's audit at t0+25: %v, %v; want slot %d", got, err, t0.Unix()+20)
		}
		if more := logs1.FilterMessageSnippet("more occurrences missed").All(); len(more) != 1 || more[0].Level != zapcore.InfoLevel {
			t.Errorf("the outage going on: %v, want one line at info", more)
		}
		if n := logs1.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
			t.Errorf("n1's warnings: %d, want still 1", n)
		}

		ran = scheduleClaim("tick", t0.Add(25*time.Second), "n3", "r2")
		ran.Lease = false
		c, err := l.Claim(t.Context(), ran) // t0+25 is claimed
		if err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("claim of t0+25: %+v, %v", c, err)
		}
		time.Sleep(5 * time.Second) // t0+30: t0+25 is certain, and decided: the outage is over
		if got, err := a1.Audit(t.Context(), &cfg, nil); err != nil || len(got) != 0 {
			t.Fatalf("n1's audit at t0+30: %v, %v; want nothing missed", got, err)
		}
		time.Sleep(5 * time.Second) // t0+35: t0+30 is missed: a new outage
		if got, err := a1.Audit(t.Context(), &cfg, nil); err != nil || fmt.Sprint(got) != fmt.Sprint([]int64{t0.Unix() + 30}) {
			t.Fatalf("n1's audit at t0+35: %v, %v; want slot %d", got, err, t0.Unix()+30)
		}
		if n := logs1.FilterLevelExact(zapcore.WarnLevel).Len(); n != 2 {
			t.Errorf("n1's warnings after a slot was decided and the next missed: %d, want 2", n)
		}
		if got := promtest.Value(t, m1, "cronlock_occurrences_missed_total", "job", "tick"); got != 4 {
			t.Errorf("cronlock_occurrences_missed_total of n1: got %v, want 4", got)
		}
	})
}

// blockingRecords is a state directory whose writes hang until release
// is closed (a frozen file system).
type blockingRecords struct {
	release chan struct{}
	writes  atomic.Int32 // writes begun
}

func (b *blockingRecords) Put(statedir.Record) error {
	b.writes.Add(1)
	<-b.release
	return nil
}

func (b *blockingRecords) Replace(int, statedir.Record) error {
	b.writes.Add(1)
	<-b.release
	return nil
}

func (b *blockingRecords) Remove(string, int) error { return nil }

// R3: the job's timeout is armed before the run record's write, which
// runs beside it: with the write blocked, a timeout: 300ms run is killed
// 300 ms after its start (the run ends once the wait for the record,
// recordWait, gives up: an error line), and another job on the node
// starts on time meanwhile.
func TestRule3_BlockedRunRecordDelaysNoTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		store := &blockingRecords{release: make(chan struct{})}
		withStore := func(d *JobDeps) { d.Records = store }
		cfg := testJob(t, "slow", "sleep 10s")
		cfg.Timeout = 300 * time.Millisecond
		slow := startJobDeps(t, cfg, mem, withStore)
		other := startJobDeps(t, testJob(t, "other", "exit 0"), mem, withStore)
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))
		slow.job.Inbox() <- Fire{Job: "slow", Slot: s}
		time.Sleep(time.Second)
		other.job.Inbox() <- Fire{Job: "other", Slot: s.Add(time.Second)}
		time.Sleep(5 * time.Second)
		synctest.Wait()

		fin := <-slow.results
		if fin.Result != ledger.ResultTimeout || !fin.Started.Equal(s) || fin.Finished.Sub(fin.Started) != cfg.Timeout {
			t.Errorf("slow run: %s, started %v, lasted %v; want timeout, started %v, killed after %v",
				fin.Result, fin.Started, fin.Finished.Sub(fin.Started), s, cfg.Timeout)
		}
		timedOut := slow.logs.FilterMessageSnippet("run timed out").All()
		if len(timedOut) != 1 || !timedOut[0].Time.Equal(s.Add(cfg.Timeout)) {
			t.Errorf("timed-out lines: %v, want one at %v", timedOut, s.Add(cfg.Timeout))
		}
		if n := slow.logs.FilterMessageSnippet("run record write blocked").FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
			t.Errorf("blocked-write error lines: %d, want 1", n)
		}
		if o := occurrence(t, mem, "slow", s); o.Status != "ran" || o.Result != ledger.ResultTimeout {
			t.Errorf("slow slot's record: %+v, want ran with result timeout", o)
		}
		if st, _ := mem.State(t.Context(), "slow"); st.LeaseHolder != "" {
			t.Errorf("slow job's lease held by %q, want released", st.LeaseHolder)
		}
		if got := other.runStarted(s.Add(time.Second)); len(got) != 1 || got[0].ContextMap()["fire_delay_us"] != int64(0) {
			t.Errorf("other job's run started lines: %v, want one at its slot (fire_delay_us 0)", got)
		}
		if fin := <-other.results; fin.Result != ledger.ResultSuccess {
			t.Errorf("other job's run: %s, want success", fin.Result)
		}
		if n := store.writes.Load(); n != 2 {
			t.Errorf("record writes begun: %d, want 2 (one per run, both still blocked)", n)
		}
		close(store.release) // the file system thaws: the writes return
		synctest.Wait()
		slow.stop(t)
		other.stop(t)
	})
}

// hungStart is a Starter whose starts hang until release is closed, then
// start a fake process; it keeps the last one started.
type hungStart struct {
	release chan struct{}
	started atomic.Pointer[Proc]
}

func (h *hungStart) start(s process.Spec) (Proc, error) {
	<-h.release
	p, err := fakeproc.Start(s)
	if err == nil {
		h.started.Store(&p)
	}
	return p, err
}

// R3: a process start that has not returned after StartTimeout (a hung
// user lookup, a work_dir on a hung mount) is abandoned: the run ends
// with result error and its lease is released. When the start returns
// later, the process it started is killed at once.
func TestRule3_HungStartIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		hs := &hungStart{release: make(chan struct{})}
		h := startJobDeps(t, testJob(t, "j", "sleep 1h"), mem, func(d *JobDeps) { d.Start = hs.start })
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))
		h.job.Inbox() <- Fire{Job: "j", Slot: s}
		fin := <-h.results
		if fin.Result != ledger.ResultError || !fin.Finished.Equal(s.Add(StartTimeout)) {
			t.Errorf("run: %s, ended %v; want error, ended %v (StartTimeout after the slot)", fin.Result, fin.Finished, s.Add(StartTimeout))
		}
		synctest.Wait()
		if n := h.logs.FilterMessage("run could not start").Len(); n != 1 {
			t.Errorf("could-not-start lines: %d, want 1", n)
		}
		if st, _ := mem.State(t.Context(), "j"); st.LeaseHolder != "" {
			t.Errorf("lease held by %q after the abandoned start, want released", st.LeaseHolder)
		}
		close(hs.release) // the start returns, an hour-long process with it
		synctest.Wait()
		p := hs.started.Load()
		if p == nil {
			t.Fatal("the hung start never returned a process")
		}
		select {
		case <-(*p).Done():
		default:
			t.Error("the process of the abandoned start is still running, want it killed at once")
		}
		h.stop(t)
	})
}

// R8: Auditor.Due says when an audit of a job may next do anything, so
// that the engine skips the jobs in between: at once for a job never
// looked at, after its next slot's window and grace once audited, never
// for a disabled job. Audit before Due sends nothing.
func TestAuditor_DueSkipsJobsBetweenSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &countingAudits{Memory: memory.NewMemory()}
		t0 := time.Now() // 2000-01-01T00:00:00Z: a slot of the job
		cfg := testJob(t, "tick", "exit 0")
		cfg.Schedule, cfg.Sched = "*/5 * * * * *", MustSchedule(t, "*/5 * * * * *")
		a, _, _ := newAuditor(l, "n1", t0)
		if due := a.Due(&cfg); !due.IsZero() {
			t.Fatalf("due before the first audit: got %v, want the zero time", due)
		}
		if _, err := a.Audit(t.Context(), &cfg, nil); err != nil {
			t.Fatal(err)
		}
		want := t0.Add(5*time.Second + ledger.AnswerWindow(testMaxSkew, cfg.LockTTL, cfg.Jitter) + AuditGrace)
		if due := a.Due(&cfg); !due.Equal(want) {
			t.Fatalf("due after the first audit: got %v, want %v (slot t0+5, its window and grace)", due, want)
		}
		calls := l.calls.Load()
		time.Sleep(want.Sub(t0) - time.Second)
		if _, err := a.Audit(t.Context(), &cfg, nil); err != nil || l.calls.Load() != calls {
			t.Fatalf("audit before due: %v, %d backend calls; want none", err, l.calls.Load()-calls)
		}
		off := cfg
		off.Enabled = false
		if due := a.Due(&off); !due.After(t0.AddDate(1000, 0, 0)) {
			t.Fatalf("due of a disabled job: got %v, want the end of time", due)
		}
	})
}
