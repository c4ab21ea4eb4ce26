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
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// capNode is one job actor of a simulated node with its own load.
type capNode struct {
	job  *Job
	logs *observer.ObservedLogs
	stop func()
}

func startCapNode(t *testing.T, node, job, command string, mem *memory.Memory, load *cluster.Load) *capNode {
	t.Helper()
	return startCapNodeJob(t, node, testJob(t, job, command), mem, load)
}

func startCapNodeJob(t *testing.T, node string, cfg config.Job, mem *memory.Memory, load *cluster.Load) *capNode {
	t.Helper()
	return startCapNodeLocker(t, node, cfg, mem, load)
}

func startCapNodeLocker(t *testing.T, node string, cfg config.Job, locker ledger.Locker, load *cluster.Load) *capNode {
	t.Helper()
	job := cfg.Name
	core, logs := observer.New(zapcore.DebugLevel)
	m := NewMetrics(nil)
	m.InitJob(job)
	kill := make(chan struct{})
	results := make(chan RunFinished, 10)
	j := NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.New(core), Metrics: m, Locker: locker, NodeID: node,
		Results: results, Phantoms: make(chan Phantom, 10), Kill: kill, Start: fakeproc.Start, Load: load})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	return &capNode{job: j, logs: logs, stop: func() {
		cancel()
		close(kill)
		<-done
	}}
}

func (c *capNode) skip(slot time.Time) (reason string, level zapcore.Level) {
	for _, e := range c.logs.FilterMessage("slot skipped").All() {
		if e.ContextMap()["slot"].(int64) == slot.Unix() {
			return e.ContextMap()["reason"].(string), e.Level
		}
	}
	return "", 0
}

// rankedSlot is the first whole second after after at which node has rank
// in the claim order of job (index 0 of its load's jobs) among ids
// (cluster.Rank).
func rankedSlot(after time.Time, job, node string, rank int, ids []string) time.Time {
	s := after.Truncate(time.Second).Add(time.Second)
	for cluster.Rank(job, 0, s.Unix(), node, ids) != rank {
		s = s.Add(time.Second)
	}
	return s
}

// TestJob_MaxParallel: a node at node.max_parallel does not claim: the
// slot is skipped node_busy (info) and the busy node writes no record,
// whether or not another node claims it (v2 does not look: a slot no node
// claims is recorded missed by the audit, rule R8). A run that ends makes
// room.
func TestJob_MaxParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		load1 := cluster.NewLoad(1, true, nil)
		a1 := startCapNode(t, "n1", "a", "sleep 10s", mem, load1)
		b1 := startCapNode(t, "n1", "b", "exit 0", mem, load1)
		b2 := startCapNode(t, "n2", "b", "exit 0", mem, cluster.NewLoad(0, true, nil))
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))

		a1.job.Inbox() <- Fire{Job: "a", Slot: s}
		synctest.Wait()
		if load1.InProgress() != 1 {
			t.Fatalf("after a's claim: %d runs in progress on n1, want 1", load1.InProgress())
		}
		b1.job.Inbox() <- Fire{Job: "b", Slot: s} // n1 is full, nobody else claims
		time.Sleep(time.Second)
		synctest.Wait()
		if r, lvl := b1.skip(s); r != SkipNodeBusy || lvl != zapcore.InfoLevel {
			t.Errorf("b slot %v on the full node: skipped %q at %v, want node_busy at info", s, r, lvl)
		}
		if o := occurrence(t, mem, "b", s); o.Status != "" {
			t.Errorf("b's record of slot %v: %+v, want none: the busy node must not record the slot", s, o)
		}

		s2 := s.Add(time.Second)
		b2.job.Inbox() <- Fire{Job: "b", Slot: s2} // n2 has room and claims
		synctest.Wait()
		b1.job.Inbox() <- Fire{Job: "b", Slot: s2}
		time.Sleep(time.Second)
		synctest.Wait()
		if r, lvl := b1.skip(s2); r != SkipNodeBusy || lvl != zapcore.InfoLevel {
			t.Errorf("b slot %v claimed by n2: n1 skipped %q at %v, want node_busy at info", s2, r, lvl)
		}
		if o := occurrence(t, mem, "b", s2); o.Status != "ran" || o.Node != "n2" {
			t.Errorf("b's record of slot %v: %+v, want ran by n2", s2, o)
		}

		time.Sleep(10 * time.Second) // a's run ends
		synctest.Wait()
		if load1.InProgress() != 0 {
			t.Fatalf("after a's run: %d runs in progress, want 0", load1.InProgress())
		}
		s3 := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s3))
		b1.job.Inbox() <- Fire{Job: "b", Slot: s3}
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if r, _ := b1.skip(s3); r != "" {
			t.Errorf("b slot %v with room on n1: skipped %q, want it run", s3, r)
		}
		if o := occurrence(t, mem, "b", s3); o.Status != "ran" || o.Node != "n1" {
			t.Errorf("b's record of slot %v: %+v, want ran by n1", s3, o)
		}
		for _, c := range []*capNode{a1, b1, b2} {
			c.stop()
		}
	})
}

// TestJob_MaxParallelQueue: on a node at node.max_parallel 1, a slot of an
// overlap queue job that comes due while the job's own run holds the
// lease is still queued (its claim adds no run in progress: not
// node_busy), and the queued slot handed on by the run's Finish takes
// over that run's place: it counts as a run in progress from the first
// instant, so another job's slot meanwhile is node_busy, and the place is
// given back once it ends.
func TestJob_MaxParallelQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		load := cluster.NewLoad(1, true, nil)
		cfg := testJob(t, "q", "sleep 2500ms")
		cfg.Overlap, cfg.CatchupWindow = config.OverlapQueue, 5*time.Second // the pending slot runs after its next came due (R7)
		q := startCapNodeJob(t, "n1", cfg, mem, load)
		b := startCapNode(t, "n1", "b", "exit 0", mem, load)
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))
		q.job.Inbox() <- Fire{Job: "q", Slot: s}
		time.Sleep(time.Second)
		q.job.Inbox() <- Fire{Job: "q", Slot: s.Add(time.Second)} // the run of s holds the lease
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if r, _ := q.skip(s.Add(time.Second)); r != "" || q.logs.FilterMessageSnippet("slot queued").Len() != 1 || load.InProgress() != 1 {
			t.Fatalf("q slot %v at the limit: skipped %q, %d queued logs, %d runs in progress; want it queued, 1 run in progress",
				s.Add(time.Second), r, q.logs.FilterMessageSnippet("slot queued").Len(), load.InProgress())
		}
		time.Sleep(time.Until(s.Add(2500 * time.Millisecond))) // the first run ends, the queued slot runs at once
		synctest.Wait()
		if q.logs.FilterMessageSnippet("running the pending slot").Len() != 1 || load.InProgress() != 1 {
			t.Fatalf("after the first run: pending slot run %d times, %d runs in progress; want it running, 1 in progress",
				q.logs.FilterMessageSnippet("running the pending slot").Len(), load.InProgress())
		}
		s3 := s.Add(3 * time.Second)
		time.Sleep(time.Until(s3))
		b.job.Inbox() <- Fire{Job: "b", Slot: s3}
		time.Sleep(time.Second)
		synctest.Wait()
		if r, _ := b.skip(s3); r != SkipNodeBusy {
			t.Errorf("b slot %v while the queued slot runs: skipped %q, want node_busy", s3, r)
		}
		time.Sleep(time.Until(s.Add(6 * time.Second))) // the queued slot's run (from 2.5 s, 2.5 s long) has ended
		synctest.Wait()
		if load.InProgress() != 0 {
			t.Errorf("after the queued run: %d runs in progress, want 0", load.InProgress())
		}
		for _, c := range []*capNode{q, b} {
			c.stop()
		}
	})
}

// TestJob_ClaimOrder: two nodes with one view of each other: for a slot
// where n2 is rank 0, n2's claim leaves at once and wins (its run starts
// at the slot: fire_delay_us 0) and n1's leaves RankStep later and finds
// the slot claimed; in the other order, n1 wins. The ranking decides the
// winner, not which fire arrived first.
func TestJob_ClaimOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		load1, load2 := cluster.NewLoad(0, true, nil), cluster.NewLoad(0, true, nil)
		load1.SetPeers("n1", []cluster.Peer{{ID: "n2"}}, time.Hour)
		load2.SetPeers("n2", []cluster.Peer{{ID: "n1"}}, time.Hour)
		load1.SetJobs([]string{"a"})
		load2.SetJobs([]string{"a"})
		a1 := startCapNode(t, "n1", "a", "exit 0", mem, load1)
		a2 := startCapNode(t, "n2", "a", "exit 0", mem, load2)
		ids := []string{"n1", "n2"}
		s := rankedSlot(time.Now(), "a", "n2", 0, ids)
		next := rankedSlot(s, "a", "n1", 0, ids)
		for _, tc := range []struct {
			slot          time.Time
			winner, loser *capNode
			winnerName    string
		}{{s, a2, a1, "n2"}, {next, a1, a2, "n1"}} {
			time.Sleep(time.Until(tc.slot))
			tc.loser.job.Inbox() <- Fire{Job: "a", Slot: tc.slot} // the loser's fire arrives first
			synctest.Wait()
			tc.winner.job.Inbox() <- Fire{Job: "a", Slot: tc.slot}
			time.Sleep(time.Second / 2)
			synctest.Wait()
			var started []map[string]any
			for _, e := range tc.winner.logs.FilterMessage("run started").All() {
				if e.ContextMap()["slot"].(int64) == tc.slot.Unix() {
					started = append(started, e.ContextMap())
				}
			}
			if len(started) != 1 || started[0]["fire_delay_us"] != int64(0) {
				t.Fatalf("slot %d: %s (rank 0) logged run started %v, want once with fire_delay_us 0", tc.slot.Unix(), tc.winnerName, started)
			}
			if reason, _ := tc.loser.skip(tc.slot); reason != ledger.SkipClaimedElsewhere {
				t.Errorf("slot %d: the rank-1 node skipped it %q, want %q", tc.slot.Unix(), reason, ledger.SkipClaimedElsewhere)
			}
			if o := occurrence(t, mem, "a", tc.slot); o.Node != tc.winnerName || o.Status != "ran" {
				t.Errorf("slot %d's record: %+v, want ran by %s", tc.slot.Unix(), o, tc.winnerName)
			}
		}
		a1.stop()
		a2.stop()
	})
}

// peekingLocker is the memory ledger with a Peek (ledger.Peeker) read from
// its records, counting claims and peeks.
type peekingLocker struct {
	*memory.Memory
	claims, peeks atomic.Int64
	behind        atomic.Bool // Peek reports the ledger's seq as 0: behind what a node saw (Redis lost state)
}

func (l *peekingLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	l.claims.Add(1)
	return l.Memory.Claim(ctx, req)
}

func (l *peekingLocker) Peek(ctx context.Context, job string, slot int64) (ledger.Claim, bool, error) {
	l.peeks.Add(1)
	occ, err := l.Memory.Occurrences(ctx, job, slot, slot)
	if err != nil {
		return ledger.Claim{}, false, err
	}
	st, err := l.Memory.State(ctx, job)
	if err != nil {
		return ledger.Claim{}, false, err
	}
	if l.behind.Load() {
		st.Seq = 0
	}
	for _, o := range occ {
		if o.Slot == slot {
			return ledger.Claim{Outcome: ledger.ClaimedElsewhere, Status: o.Status, Reason: o.Reason, Seq: st.Seq, Runs: st.Runs}, true, nil
		}
	}
	return ledger.Claim{}, false, nil
}

// TestJob_LowerRankReadsTheRecordFirst: a rank-1 node reads the slot's
// record before claiming (cluster.Load.Settled, ledger.Peeker). When the
// rank-0 node claimed it, the rank-1 node sends no claim and skips the
// slot claimed_elsewhere, as the claim would have answered; when the
// rank-0 node did not claim (down), it finds no record, claims and runs
// the slot RankStep after it. A record that says skipped is reported with
// its reason, as a claim's answer is.
func TestJob_LowerRankReadsTheRecordFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		l1, l2 := &peekingLocker{Memory: mem}, &peekingLocker{Memory: mem}
		load1, load2 := cluster.NewLoad(0, true, nil), cluster.NewLoad(0, true, nil)
		load1.SetPeers("n1", []cluster.Peer{{ID: "n2"}}, time.Hour)
		load2.SetPeers("n2", []cluster.Peer{{ID: "n1"}}, time.Hour)
		load1.SetJobs([]string{"a"})
		load2.SetJobs([]string{"a"})
		n1 := startCapNodeLocker(t, "n1", testJob(t, "a", "exit 0"), l1, load1)
		n2 := startCapNodeLocker(t, "n2", testJob(t, "a", "exit 0"), l2, load2)
		ids := []string{"n1", "n2"}
		// fireBoth fires slot on n2 (rank 0) and n1 at its time and waits
		// for both to decide it.
		fireBoth := func(slot time.Time) {
			time.Sleep(time.Until(slot))
			n2.job.Inbox() <- Fire{Job: "a", Slot: slot}
			n1.job.Inbox() <- Fire{Job: "a", Slot: slot}
			time.Sleep(time.Second / 2)
			synctest.Wait()
		}

		s := rankedSlot(time.Now(), "a", "n2", 0, ids) // n1 is rank 1
		fireBoth(s)
		if reason, _ := n1.skip(s); reason != ledger.SkipClaimedElsewhere {
			t.Errorf("slot %d: rank-1 n1 skipped it %q, want %q", s.Unix(), reason, ledger.SkipClaimedElsewhere)
		}
		if c, p := l1.claims.Load(), l1.peeks.Load(); c != 0 || p != 1 {
			t.Errorf("n1 sent %d claims and %d reads, want 0 and 1 (the record answered)", c, p)
		}
		if o := occurrence(t, mem, "a", s); o.Node != "n2" || o.Status != "ran" {
			t.Errorf("slot %d's record: %+v, want ran by n2", s.Unix(), o)
		}

		down := rankedSlot(s, "a", "n2", 0, ids) // n2 does not fire: down
		time.Sleep(time.Until(down))
		n1.job.Inbox() <- Fire{Job: "a", Slot: down}
		time.Sleep(time.Second / 2)
		synctest.Wait()
		if c, p := l1.claims.Load(), l1.peeks.Load(); c != 1 || p != 2 {
			t.Errorf("n1 sent %d claims and %d reads in all, want 1 and 2 (no record: the claim was sent)", c, p)
		}
		if o := occurrence(t, mem, "a", down); o.Node != "n1" || o.Status != "ran" || o.Started != down.Add(cluster.RankStep).UnixMilli() {
			t.Errorf("slot %d's record: %+v, want ran by n1, started RankStep after the slot", down.Unix(), o)
		}

		paused := rankedSlot(down, "a", "n2", 0, ids)
		if err := mem.Pause(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		fireBoth(paused)
		if reason, _ := n1.skip(paused); reason != ledger.SkipPaused {
			t.Errorf("slot %d (paused, decided by n2): n1 skipped it %q, want %q from the record", paused.Unix(), reason, ledger.SkipPaused)
		}
		if c := l1.claims.Load(); c != 1 {
			t.Errorf("n1 sent %d claims in all, want 1", c)
		}
		if err := mem.Resume(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}

		// The ledger is behind what n1 has seen (Redis lost state): the
		// record does not stand in for the claim, which is sent (and
		// repairs the ledger, R5).
		l1.behind.Store(true)
		lost := rankedSlot(paused, "a", "n2", 0, ids)
		fireBoth(lost)
		if c, p := l1.claims.Load(), l1.peeks.Load(); c != 2 || p != 4 {
			t.Errorf("n1 sent %d claims and %d reads in all, want 2 and 4 (a ledger behind what n1 saw: claimed)", c, p)
		}
		if reason, _ := n1.skip(lost); reason != ledger.SkipClaimedElsewhere {
			t.Errorf("slot %d: n1 skipped it %q, want %q", lost.Unix(), reason, ledger.SkipClaimedElsewhere)
		}
		n1.stop()
		n2.stop()
	})
}

// unansweredLocker answers every claim after delay; Peek never answers before
// ctx ends.
type unansweredLocker struct {
	*memory.Memory
	delay         time.Duration
	claims, peeks atomic.Int64
}

func (l *unansweredLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	l.claims.Add(1)
	time.Sleep(l.delay)
	return l.Memory.Claim(ctx, req)
}

func (l *unansweredLocker) Peek(ctx context.Context, job string, slot int64) (ledger.Claim, bool, error) {
	l.peeks.Add(1)
	<-ctx.Done()
	return ledger.Claim{}, false, ctx.Err()
}

// TestJob_LowerRankReadIsBounded: a rank-1 node waits for its own rank-0
// claim of the same slot (job b) before it reads job a's record:
//
//   - answered after 150 ms (a herd: Redis slow, but answering): it waits
//     for it, reads, finds no record (the rank-0 node of a is down), claims
//     150 ms after the slot, and runs;
//   - never answered (an outage): it stops waiting cluster.SettleStall
//     after b's claim was sent and claims at once, without a read (which
//     the client would retry until Redis is back): the claim decides;
//   - answered, but the read of a's record is not (a connection that
//     failed): no claim, the slot is skipped redis_error by 3B/4 (B =
//     min(max_clock_skew, lock_ttl)), as a failed claim would be;
//   - a shutdown during the wait claims nothing: shutting_down.
func TestJob_LowerRankReadIsBounded(t *testing.T) {
	for _, tc := range []string{"answered", "outage", "read unanswered", "shutdown"} {
		synctest.Test(t, func(t *testing.T) {
			mem := memory.NewMemory()
			load := cluster.NewLoad(0, true, nil)
			load.SetPeers("n1", []cluster.Peer{{ID: "n2"}}, 24*time.Hour)
			load.SetJobs([]string{"a", "b"})
			cfgA := testJob(t, "a", "exit 0")
			var lockerA ledger.Locker = &peekingLocker{Memory: mem}
			bDelay := 150 * time.Millisecond
			switch tc {
			case "read unanswered":
				lockerA = &unansweredLocker{Memory: mem}
			case "outage", "shutdown":
				lockerA, bDelay = &unansweredLocker{Memory: mem}, time.Hour
			}
			a := startCapNodeLocker(t, "n1", cfgA, lockerA, load)
			b := startCapNodeLocker(t, "n1", testJob(t, "b", "exit 0"), &unansweredLocker{Memory: mem, delay: bDelay}, load)
			ids := []string{"n1", "n2"}
			s := time.Now().Truncate(time.Second).Add(time.Second)
			for cluster.Rank("a", 0, s.Unix(), "n1", ids) != 1 || cluster.Rank("b", 1, s.Unix(), "n1", ids) != 0 {
				s = s.Add(time.Second)
			}
			bound := min(testMaxSkew, cfgA.LockTTL)
			time.Sleep(time.Until(s))
			b.job.Inbox() <- Fire{Job: "b", Slot: s}
			a.job.Inbox() <- Fire{Job: "a", Slot: s}
			switch tc {
			case "shutdown":
				time.Sleep(cluster.SettleStall / 2)
				a.stop()
				if reason, _ := a.skip(s); reason != ledger.SkipShuttingDown {
					t.Errorf("slot %d of a, stopped while it waited: skipped %q, want %q", s.Unix(), reason, ledger.SkipShuttingDown)
				}
			case "outage":
				time.Sleep(2 * bound)
				synctest.Wait()
				if o := occurrence(t, mem, "a", s); o.Status != "ran" || o.Claimed != s.Add(cluster.SettleStall).UnixMilli() {
					t.Errorf("slot %d of a: %+v, want ran, claimed SettleStall (%v) after the slot", s.Unix(), o, cluster.SettleStall)
				}
				if p := lockerA.(*unansweredLocker).peeks.Load(); p != 0 {
					t.Errorf("reads of a sent: %d, want 0", p)
				}
				a.stop()
			case "read unanswered":
				time.Sleep(3 * bound / 4)
				synctest.Wait()
				if reason, _ := a.skip(s); reason != ledger.SkipRedisError {
					t.Errorf("slot %d of a, its read unanswered: skipped %q, want %q by 3B/4", s.Unix(), reason, ledger.SkipRedisError)
				}
				if c, p := lockerA.(*unansweredLocker).claims.Load(), lockerA.(*unansweredLocker).peeks.Load(); c != 0 || p != 1 {
					t.Errorf("claims and reads of a sent: %d, %d; want 0, 1", c, p)
				}
				a.stop()
			case "answered":
				time.Sleep(2 * bound)
				synctest.Wait()
				if o := occurrence(t, mem, "a", s); o.Status != "ran" || o.Claimed != s.Add(bDelay).UnixMilli() {
					t.Errorf("slot %d of a: %+v, want ran, claimed when b's claim was answered, %v after the slot", s.Unix(), o, bDelay)
				}
				a.stop()
			}
			if o := occurrence(t, mem, "a", s); (tc == "shutdown" || tc == "read unanswered") && o.Status != "" {
				t.Errorf("slot %d of a (%s): record %+v, want none", s.Unix(), tc, o)
			}
			b.stop()
		})
	}
}
