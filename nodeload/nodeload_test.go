package nodeload

import (
	"fmt"
	"math"

	"github.com/cespare/xxhash/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLoad_MaxParallel: at max_parallel reservations Reserve refuses, a
// Release makes room, and concurrent reservers never get more than the
// limit.
func TestLoad_MaxParallel(t *testing.T) {
	l := New(3, true, nil)
	for i := range 3 {
		if !l.Reserve() {
			t.Fatalf("reservation %d refused below the limit", i+1)
		}
	}
	if l.Reserve() {
		t.Fatal("4th reservation accepted at max_parallel 3")
	}
	l.Release(false)
	if !l.Reserve() {
		t.Fatal("reservation refused after a release")
	}

	l = New(20, true, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 100 {
		wg.Go(func() {
			if l.Reserve() {
				mu.Lock()
				got++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got != 20 {
		t.Errorf("100 concurrent reservers: %d accepted, want 20", got)
	}
}

// jIndex is the index a Load without SetJobs gives job "j".
var jIndex = int(xxhash.Sum64String("j") >> 1)

// rankDelay is the delay of a claim at rank that does not yield, the
// burst-th claim of its slot: Enter's formula written out.
func rankDelay(rank, burst int) time.Duration {
	if rank == 0 {
		return 0
	}
	return min(MaxDelay, LeadStep+time.Duration(rank-1)*RankStep+time.Duration(rank*burst)*PerBurstClaim)
}

// slotOf finds the first slot from 1 of job "j" (index jIndex) where n1
// has rank want among ids.
func slotOf(want int, ids ...string) int64 {
	for s := int64(1); ; s++ {
		if Rank("j", jIndex, s, "n1", ids) == want {
			return s
		}
	}
}

// TestLoad_Enter: the claim delay is 0 at rank 0, LeadStep at rank 1,
// LeadStep + RankStep (MaxDelay) at rank 2, among the live peers that may
// run the job, plus PerBurstClaim per rank per claim of the same slot
// before it; Enter returns the rank too. 0 and rank -1 without ordering,
// without peers, with an expired view and when no peer may run the job;
// the gauge counts the runs.
func TestLoad_Enter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := []Peer{{ID: "n2"}, {ID: "n3", Tags: map[string]string{"role": "db"}}}
		for _, tt := range []struct {
			name      string
			rank      int
			selectors []string
			want      time.Duration
		}{
			{"rank 0", 0, nil, 0},
			{"rank 1", 1, nil, LeadStep},
			{"rank 2", 2, nil, LeadStep + RankStep},
			{"rank 1 among n1, n3 (n3 only may run it)", 1, []string{"role=db"}, LeadStep},
		} {
			l := New(0, true, nil)
			l.SetPeers("n1", append(peers, Peer{ID: "n1", Running: 99}), time.Minute) // its own entry is left out
			ids := []string{"n1", "n2", "n3"}
			if tt.selectors != nil {
				ids = []string{"n1", "n3"}
			}
			d, rank := l.Enter("j", slotOf(tt.rank, ids...), tt.selectors)
			if d != tt.want || rank != tt.rank {
				t.Errorf("%s: delay %v at rank %d, want %v at rank %d", tt.name, d, rank, tt.want, tt.rank)
			}
		}
		if MaxDelay != LeadStep+RankStep || YieldDelay <= MaxDelay {
			t.Errorf("MaxDelay %v, want LeadStep + RankStep (%v), and below YieldDelay %v", MaxDelay, LeadStep+RankStep, YieldDelay)
		}

		l := New(0, true, nil)
		s2 := slotOf(2, "n1", "n2", "n3")
		if d, rank := l.Enter("j", s2, nil); d != 0 || rank != -1 {
			t.Errorf("peers unknown: delay %v, rank %d; want 0, -1", d, rank)
		}
		l.SetPeers("n1", peers, 10*time.Second)
		if d, rank := l.Enter("j", s2, []string{"zone=x"}); d != 0 || rank != -1 {
			t.Errorf("no peer may run the job: delay %v, rank %d; want 0, -1", d, rank)
		}
		if d, _ := l.Enter("j", s2, nil); d != rankDelay(2, 0) {
			t.Errorf("rank 2 with a valid view: delay %v, want %v", d, rankDelay(2, 0))
		}
		time.Sleep(10 * time.Second)
		if d, rank := l.Enter("j", s2, nil); d != 0 || rank != -1 {
			t.Errorf("view expired: delay %v, rank %d; want 0, -1", d, rank)
		}

		// A burst: claims of one slot entered in a row. Each rank-k claim
		// waits PerBurstClaim × k more per claim before it; rank 0 waits
		// nothing whatever the burst; a new slot starts a new burst.
		l = New(0, true, nil)
		l.SetPeers("n1", peers, time.Minute)
		var names []string
		for i := range 100 {
			names = append(names, fmt.Sprintf("b%03d", i))
		}
		l.SetJobs(append(names, "j")) // b000..b099 are 0..99, j 100
		all := []string{"n1", "n2", "n3"}
		for i := range 100 {
			job := fmt.Sprintf("b%03d", i)
			r := Rank(job, i, s2, "n1", all)
			if got, rank := l.Enter(job, s2, nil); got != rankDelay(r, i) || rank != r {
				t.Fatalf("burst claim %d (%s): delay %v at rank %d, want %v at rank %d", i, job, got, rank, rankDelay(r, i), r)
			}
		}
		next := s2 + 1
		for Rank("j", 100, next, "n1", all) != 1 {
			next++
		}
		if d, _ := l.Enter("j", next, nil); d != LeadStep {
			t.Errorf("the next slot's first claim at rank 1: delay %v, want %v", d, LeadStep)
		}

		lone := New(0, false, nil)
		lone.SetPeers("n1", peers, time.Minute)
		for range 30 {
			lone.Reserve()
			lone.Won()
		}
		if d, rank := lone.Enter("j", s2, nil); d != 0 || rank != -1 {
			t.Errorf("unordered (memory backend) at rank 2 with 30 runs: delay %v, rank %d; want 0, -1", d, rank)
		}
		if got := testutil.ToFloat64(lone.gauge); got != 30 {
			t.Errorf("gauge %v after 30 won claims, want 30", got)
		}
	})

	l := New(0, true, nil)
	l.Reserve()
	l.Won()
	l.Release(true)
	if l.InProgress() != 0 || testutil.ToFloat64(l.gauge) != 0 {
		t.Errorf("after the release: %d in progress, gauge %v; want 0", l.InProgress(), testutil.ToFloat64(l.gauge))
	}
	select {
	case <-l.Freed():
		t.Error("Freed closed before the next Release")
	default:
	}
	freed := l.Freed()
	l.Reserve()
	l.Release(false)
	select {
	case <-freed:
	default:
		t.Error("Freed not closed by Release")
	}
}

// win takes n places and wins them (runs in progress).
func win(l *Load, n int) {
	for range n {
		l.Reserve()
		l.Won()
	}
}

// release ends n runs in progress.
func release(l *Load, n int) {
	for range n {
		l.Release(true)
	}
}

// yields counts the claims of job "j" at slots 1..slots that Enter
// yields (delay YieldDelay), checking that every other claim has its
// rank's delay; each slot is a new burst.
func yields(t *testing.T, l *Load, slots int) int {
	t.Helper()
	n := 0
	for s := int64(1); s <= int64(slots); s++ {
		d, rank := l.Enter("j", s, nil)
		switch {
		case d == YieldDelay:
			n++
		case d != rankDelay(rank, 0):
			t.Fatalf("slot %d: delay %v at rank %d, want %v or YieldDelay", s, d, rank, rankDelay(rank, 0))
		}
	}
	return n
}

// TestLoad_YieldRunsInProgress: a node yields a share of its claims
// (YieldDelay, whatever the rank) by its runs in progress beyond an even
// share at the instants of the peers' records: YieldPerRun per run over
// the slack, by a draw of the job, the slot and the node id. The count it
// had at a record's instant is compared, not the current one: a node
// whose runs started after the peers wrote theirs yields nothing, one
// that was busier then yields although it is idle now.
func TestLoad_YieldRunsInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots = 4000
		t0 := time.Now()
		l := New(0, true, nil)
		// At t0 the peers had 10 runs each and so had n1: no excess.
		win(l, 10)
		l.SetPeers("n1", []Peer{{ID: "n2", Running: 10, At: t0}, {ID: "n3", Running: 10, At: t0}}, time.Minute)
		time.Sleep(time.Second)
		win(l, 30) // 40 now, started after the records
		if n := yields(t, l, slots); n != 0 {
			t.Errorf("as busy as the peers at their records' instant (40 runs now): %d of %d claims yielded, want 0", n, slots)
		}
		// Each slot's draw decides: the claim yields when its draw is
		// below the share.
		for s := int64(1); s <= 50; s++ {
			if yieldDraw("j", s, "n1") < 0 || yieldDraw("j", s, "n1") >= 1 {
				t.Fatalf("draw %v out of [0, 1)", yieldDraw("j", s, "n1"))
			}
		}

		// n1 had 40 at t1, the peers 10 each; now n1 has none. Its excess
		// is 2/3 × 30 − LoadSlack − LoadSlackShare × 10 = 18 runs.
		t1 := time.Now()
		time.Sleep(time.Second)
		release(l, 40)
		l.SetPeers("n1", []Peer{{ID: "n2", Running: 10, At: t1}, {ID: "n3", Running: 10, At: t1}}, time.Minute)
		share := (2.0/3*30 - LoadSlack - LoadSlackShare*10) * YieldPerRun
		want := 0
		for s := int64(1); s <= slots; s++ {
			if yieldDraw("j", s, "n1") < share {
				want++
			}
		}
		if n := yields(t, l, slots); n != want || float64(n) < 0.8*share*slots || float64(n) > 1.2*share*slots {
			t.Errorf("18 runs over an even share at the records' instant: %d of %d claims yielded, want %d (%.0f%% of them)", n, slots, want, 100*share)
		}

		// A peer's record from a clock ahead of this one is compared with
		// the count now (0): n1 is below the peers, nothing yields.
		l.SetPeers("n1", []Peer{{ID: "n2", Running: 10, At: time.Now().Add(time.Minute)}, {ID: "n3", Running: 10}}, time.Minute)
		if n := yields(t, l, slots); n != 0 {
			t.Errorf("idle now, peers' records from the future or without a time: %d claims yielded, want 0", n)
		}
	})
}

// TestLoad_YieldTaken: a claim won at rank ≥ 1 takes a slot from the
// order, a rank-0 slot that another node's claim came first for gives
// one; the net beyond TakeSlack yields YieldPerTaken per slot of the
// claims at rank ≥ 1 and YieldPerRun per slot of those at rank 0, fades
// with TakeDecay and is bounded; other answers and rank -1 count nothing.
func TestLoad_YieldTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots = 8000
		l := New(0, true, nil)
		l.SetPeers("n1", []Peer{{ID: "n2"}, {ID: "n3"}}, time.Hour)
		// count returns, for the claims at rank 0 and at rank ≥ 1 of slots
		// 1..slots, how many yield and how many there are.
		count := func() (y0, n0, y1, n1 int) {
			t.Helper()
			for s := int64(1); s <= slots; s++ {
				d, rank := l.Enter("j", s, nil)
				yielded := d == YieldDelay
				if !yielded && d != rankDelay(rank, 0) {
					t.Fatalf("slot %d: delay %v at rank %d, want %v or YieldDelay", s, d, rank, rankDelay(rank, 0))
				}
				switch {
				case rank == 0 && yielded:
					y0++
				case rank > 0 && yielded:
					y1++
				}
				if rank == 0 {
					n0++
				} else {
					n1++
				}
			}
			return y0, n0, y1, n1
		}
		for range TakeSlack {
			l.Answered(1, true, false)
		}
		l.Answered(-1, true, false) // no order: nothing
		l.Answered(0, true, false)  // its own slot
		l.Answered(1, false, false) // the lease was held
		l.Answered(2, false, true)  // lost at rank 2
		if y0, _, y1, _ := count(); y0+y1 != 0 {
			t.Errorf("%d slots taken (the slack): %d claims yielded, want 0", TakeSlack, y0+y1)
		}
		near := func(got, all int, share float64) bool {
			want := share * float64(all)
			return math.Abs(float64(got)-want) <= 0.15*want+3
		}
		expect := func(what string, net float64) {
			t.Helper()
			s0, s1 := min(1, (net-TakeSlack)*YieldPerRun), min(1, (net-TakeSlack)*YieldPerTaken)
			y0, n0, y1, n1 := count()
			if !near(y0, n0, s0) || !near(y1, n1, s1) {
				t.Errorf("%s: %d of %d rank-0 claims and %d of %d claims at rank ≥ 1 yielded, want about %.0f%% and %.0f%%",
					what, y0, n0, y1, n1, 100*s0, 100*s1)
			}
		}
		for range 8 {
			l.Answered(2, true, false)
		}
		expect("10 taken", 10)
		for range 3 {
			l.Answered(0, false, true)
		}
		expect("10 taken, 3 given", 7)
		time.Sleep(TakeDecay)
		expect("7 net a TakeDecay ago", 7/math.E)
		for range 1000 {
			l.Answered(1, true, false)
		}
		expect("1000 taken (bounded)", takenBound)
		if y0, _, y1, n1 := count(); y1 != n1 || y0 == 0 {
			t.Errorf("1000 taken: %d of %d claims at rank ≥ 1 yielded (want all), %d at rank 0 (want some)", y1, n1, y0)
		}
		for range 1000 {
			l.Answered(0, false, true)
		}
		for range int(takenBound) + TakeSlack + 1 {
			l.Answered(1, true, false)
		}
		if _, _, y1, _ := count(); y1 == 0 {
			t.Errorf("1000 given, then %d taken: no claim yielded (what was given is bounded at %v)", int(takenBound)+TakeSlack+1, -takenBound)
		}
	})
}

// TestLoad_History: the runs in progress at a past instant are read from
// the history, which keeps at least historyKeep (and twice the view's
// validity) and no more than about historyMaxSamples changes per span.
func TestLoad_History(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(0, true, nil)
		start := time.Now()
		time.Sleep(time.Second)
		at := map[time.Time]int{start: 0}
		for i := range 3000 { // 3000 changes 20 ms apart: 60 s
			if i%3 == 2 {
				release(l, 1)
			} else {
				win(l, 1)
			}
			at[time.Now()] = l.InProgress()
			time.Sleep(20 * time.Millisecond)
		}
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		for ts, n := range at {
			if now.Sub(ts) > historyKeep {
				continue
			}
			if got := l.countAt(ts); got != n {
				t.Fatalf("count at %v before now: %d, want %d", now.Sub(ts), got, n)
			}
		}
		if got := l.countAt(start.Add(-time.Hour)); got != l.history[0].n {
			t.Errorf("count before the history: %d, want the oldest kept %d", got, l.history[0].n)
		}
		if got := l.countAt(now.Add(time.Hour)); got != l.running {
			t.Errorf("count in the future: %d, want the current %d", got, l.running)
		}
		if n := len(l.history); n > 2*int(historyKeep/(20*time.Millisecond))+2 {
			t.Errorf("history of %d samples for %v of changes every 20 ms, want at most twice %v's", n, 60*time.Second, historyKeep)
		}
	})
}

// TestRank_Rendezvous: every node computes the same order (the ranks of
// the nodes of a (job, slot) are 0..N-1, each once, whatever order the
// ids are listed in), each node is rank 0 for about 1/N of the (job, slot)
// pairs and for exactly 1/N of the jobs due at one slot, the order changes
// from slot to slot, and Enter ranks only the peers whose tags match the
// job's nodes:.
func TestRank_Rendezvous(t *testing.T) {
	ids := []string{"n1", "n2", "n3", "web-4", "db-5"}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	const jobs, slots = 200, 300
	first := map[string]int{}
	sameOrderAsPrevious := 0
	var prev string
	for j := range jobs {
		job := fmt.Sprintf("job-%03d", j)
		for s := range int64(slots) {
			slot := 1_800_000_000 + s
			seen := make([]bool, len(ids))
			var winner string
			for _, id := range ids {
				r := Rank(job, j, slot, id, ids)
				if r2 := Rank(job, j, slot, id, rev); r2 != r {
					t.Fatalf("%s %d: %s has rank %d listed one way, %d the other", job, slot, id, r, r2)
				}
				if r < 0 || r >= len(ids) || seen[r] {
					t.Fatalf("%s %d: rank %d of %s out of range or given twice", job, slot, r, id)
				}
				seen[r] = true
				if r == 0 {
					winner = id
				}
			}
			first[winner]++
			if winner == prev {
				sameOrderAsPrevious++
			}
			prev = winner
		}
	}
	n := jobs * slots
	for _, id := range ids {
		// 60,000 pairs, p = 0.2: sd ≈ 98 (0.16%); 2% is over 12 sd.
		if share := float64(first[id]) / float64(n); share < 0.18 || share > 0.22 {
			t.Errorf("%s is rank 0 for %.1f%% of %d (job, slot) pairs, want about 20%%", id, 100*share, n)
		}
	}
	// The rank-0 node of a job's next slot is the same for every job
	// (the indexes turn with the slot), so only the 299 slot pairs are
	// independent: sd ≈ 2.3%.
	if share := float64(sameOrderAsPrevious) / float64(n); share > 0.30 {
		t.Errorf("the next slot has the same rank-0 node %.1f%% of the time, want about 20%%", 100*share)
	}

	// A burst: the 200 jobs due at one slot are split evenly, 40 each
	// (their indexes take turns through the nodes).
	for s := range int64(20) {
		count := map[string]int{}
		for j := range jobs {
			for _, id := range ids {
				if Rank(fmt.Sprintf("job-%03d", j), j, 1_800_000_000+s, id, ids) == 0 {
					count[id]++
				}
			}
		}
		for _, id := range ids {
			if count[id] != jobs/len(ids) {
				t.Errorf("slot %d: %s is rank 0 for %d of the %d jobs due, want %d", s, id, count[id], jobs, jobs/len(ids))
			}
		}
	}

	// Enter: n1's peers n2 (role=db) and n3 (no tags). For a job with
	// nodes: [role=db] only n2 ranks; for any job both do.
	l, l2 := New(0, true, nil), New(0, true, nil) // one per job: each slot's claim is a burst of one
	l.SetPeers("n1", []Peer{{ID: "n2", Tags: map[string]string{"role": "db"}}, {ID: "n3"}}, time.Hour)
	l2.SetPeers("n1", []Peer{{ID: "n2", Tags: map[string]string{"role": "db"}}, {ID: "n3"}}, time.Hour)
	db, anyJob := 0, 0
	for s := range int64(3000) {
		dDB, _ := l2.Enter("j", s, []string{"role=db"})
		if want := rankDelay(Rank("j", jIndex, s, "n1", []string{"n2"}), 0); dDB != want {
			t.Fatalf("slot %d, nodes: [role=db]: delay %v, want %v (n1's rank among n1, n2)", s, dDB, want)
		}
		dAny, _ := l.Enter("j", s, nil)
		if want := rankDelay(Rank("j", jIndex, s, "n1", []string{"n2", "n3"}), 0); dAny != want {
			t.Fatalf("slot %d, any node: delay %v, want %v (n1's rank among n1, n2, n3)", s, dAny, want)
		}
		if dDB == 0 {
			db++
		}
		if dAny == 0 {
			anyJob++
		}
	}
	if db < 1350 || db > 1650 || anyJob < 900 || anyJob > 1100 {
		t.Errorf("n1 claims at once for %d of 3000 slots of a role=db job (want about 1500) and %d of an any-node job (want about 1000)", db, anyJob)
	}
}

// TestLoad_ShortRunsShareRankZero: a job whose run took less than
// ShortRun is short: at every slot the short jobs of one block of
// ShortBlock indexes have the same rank-0 node (ShortTurn), while long
// jobs (no run seen, or a run of LongRun or more) keep taking turns by
// index. A run between the two thresholds changes nothing; a reload that
// drops the job forgets it.
func TestLoad_ShortRunsShareRankZero(t *testing.T) {
	peers := []Peer{{ID: "n2"}, {ID: "n3"}}
	all := []string{"n1", "n2", "n3"}
	l := New(0, true, nil)
	l.SetPeers("n1", peers, time.Hour)
	var names []string
	for i := range 3 * ShortBlock {
		names = append(names, fmt.Sprintf("j%04d", i))
	}
	l.SetJobs(names)
	rankZero := func(slot int64, i int) bool { _, rank := l.Enter(names[i], slot, nil); return rank == 0 }
	isShort := func(job string) bool { l.mu.Lock(); defer l.mu.Unlock(); _, ok := l.short[job]; return ok }

	// No run seen: the jobs of an instant take turns, a third each.
	const slot = 1_700_000_000
	n := 0
	for i := range ShortBlock {
		if rankZero(slot, i) {
			n++
		}
	}
	if n < ShortBlock/3-1 || n > ShortBlock/3+1 {
		t.Fatalf("long jobs: rank 0 for %d of %d, want a third", n, ShortBlock)
	}

	for i := range names {
		l.RunTook(names[i], ShortRun-time.Millisecond)
	}
	// Short: within a block every job has the same rank, over the blocks
	// and slots n1 takes rank 0 for about a third.
	zeros := 0
	for s := int64(slot); s < slot+30; s++ {
		for b := range 3 {
			first := rankZero(s, b*ShortBlock)
			for i := b * ShortBlock; i < (b+1)*ShortBlock; i++ {
				if rankZero(s, i) != first {
					t.Fatalf("slot %d: job %d of block %d has rank 0 %v, the block's first %v", s, i, b, !first, first)
				}
			}
			if want := Rank(names[b*ShortBlock], ShortTurn(b*ShortBlock), s, "n1", all) == 0; first != want {
				t.Fatalf("slot %d block %d: rank 0 %v, Rank with ShortTurn says %v", s, b, first, want)
			}
			if first {
				zeros++
			}
		}
	}
	if zeros < 20 || zeros > 40 {
		t.Errorf("short blocks: n1 has rank 0 for %d of 90 (slot, block), want about 30", zeros)
	}

	// Between the thresholds nothing changes; LongRun makes it long again.
	l.RunTook(names[0], LongRun-time.Millisecond)
	if !isShort(names[0]) {
		t.Errorf("a run of %v made the short job long", LongRun-time.Millisecond)
	}
	l.RunTook(names[0], LongRun)
	if isShort(names[0]) {
		t.Errorf("a run of %v left the job short", LongRun)
	}
	l.RunTook(names[1], ShortRun)
	if !isShort(names[1]) {
		t.Errorf("a run of exactly ShortRun made the short job long")
	}
	l.RunTook("new", ShortRun/2)
	l.RunTook("new", ShortRun) // between: stays short
	if !isShort("new") {
		t.Errorf("job new: not short after a run of %v", ShortRun/2)
	}
	l.SetJobs(names[1:]) // names[0] and "new" are gone
	if isShort("new") || !isShort(names[1]) {
		t.Errorf("after a reload: new short %v (want false), %s short %v (want true)", isShort("new"), names[1], isShort(names[1]))
	}
}

// A place given back after a refused TryReserve, before the caller waits,
// still wakes it: the channel is the one the refusal returned. (With a
// refused Reserve and then Freed, that Release would have woken nobody.)
func TestLoad_TryReserveSeesAReleaseBeforeTheWait(t *testing.T) {
	l := New(1, true, nil)
	if ok, _ := l.TryReserve(); !ok {
		t.Fatal("first TryReserve refused at max_parallel 1")
	}
	ok, freed := l.TryReserve()
	if ok || freed == nil {
		t.Fatalf("second TryReserve: ok %v, channel %v; want refused with a channel", ok, freed)
	}
	l.Release(false) // before the caller waits
	select {
	case <-freed:
	default:
		t.Fatal("the refusal's channel was not closed by the Release after it")
	}
	if ok, _ := l.TryReserve(); !ok {
		t.Fatal("TryReserve refused after the place was given back")
	}
}
