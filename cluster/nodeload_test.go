package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLoad_MaxParallel: at max_parallel reservations Reserve refuses, a
// Release makes room, and concurrent reservers never get more than the
// limit.
func TestLoad_MaxParallel(t *testing.T) {
	l := NewLoad(3, true, nil)
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

	l = NewLoad(20, true, nil)
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

// rankDelay is the claim delay at rank: Enter's rule written out.
func rankDelay(rank int) time.Duration {
	return min(MaxDelay, time.Duration(rank)*RankStep)
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

// TestLoad_Enter: the claim delay is rank × RankStep among the live peers
// that may run the job, at most MaxDelay (rank 4 and up), whatever claims
// of the same slot entered before it; Enter returns the rank too. 0 and
// rank -1 without ordering, without peers, with an expired view and when
// no peer may run the job; the gauge counts the runs.
func TestLoad_Enter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := []Peer{{ID: "n2"}, {ID: "n3", Tags: map[string]string{"role": "db"}}}
		many := []Peer{{ID: "n2"}, {ID: "n3"}, {ID: "n4"}, {ID: "n5"}, {ID: "n6"}}
		for _, tt := range []struct {
			name      string
			peers     []Peer
			rank      int
			selectors []string
			want      time.Duration
		}{
			{"rank 0", peers, 0, nil, 0},
			{"rank 1", peers, 1, nil, RankStep},
			{"rank 2", peers, 2, nil, 2 * RankStep},
			{"rank 1 among n1, n3 (n3 only may run it)", peers, 1, []string{"role=db"}, RankStep},
			{"rank 3 of 6", many, 3, nil, 3 * RankStep},
			{"rank 4 of 6 (MaxDelay)", many, 4, nil, MaxDelay},
			{"rank 5 of 6 (capped at MaxDelay)", many, 5, nil, MaxDelay},
		} {
			l := NewLoad(0, true, nil)
			l.SetPeers("n1", append(slices.Clone(tt.peers), Peer{ID: "n1", Running: 99}), time.Minute) // its own entry is left out
			ids := []string{"n1"}
			for _, p := range tt.peers {
				if tt.selectors == nil || p.Tags["role"] == "db" {
					ids = append(ids, p.ID)
				}
			}
			d, rank := l.Enter("j", slotOf(tt.rank, ids...), tt.selectors)
			if d != tt.want || rank != tt.rank {
				t.Errorf("%s: delay %v at rank %d, want %v at rank %d", tt.name, d, rank, tt.want, tt.rank)
			}
		}

		l := NewLoad(0, true, nil)
		s2 := slotOf(2, "n1", "n2", "n3")
		if d, rank := l.Enter("j", s2, nil); d != 0 || rank != -1 {
			t.Errorf("peers unknown: delay %v, rank %d; want 0, -1", d, rank)
		}
		l.SetPeers("n1", peers, 10*time.Second)
		if d, rank := l.Enter("j", s2, []string{"zone=x"}); d != 0 || rank != -1 {
			t.Errorf("no peer may run the job: delay %v, rank %d; want 0, -1", d, rank)
		}
		if d, _ := l.Enter("j", s2, nil); d != rankDelay(2) {
			t.Errorf("rank 2 with a valid view: delay %v, want %v", d, rankDelay(2))
		}
		time.Sleep(10 * time.Second)
		if d, rank := l.Enter("j", s2, nil); d != 0 || rank != -1 {
			t.Errorf("view expired: delay %v, rank %d; want 0, -1", d, rank)
		}

		// Many claims of one slot in a row (a burst of due jobs): each
		// waits its rank's delay, no more; SetJobs gives each job its
		// place among the sorted names as its turn.
		l = NewLoad(0, true, nil)
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
			if got, rank := l.Enter(job, s2, nil); got != rankDelay(r) || rank != r {
				t.Fatalf("burst claim %d (%s): delay %v at rank %d, want %v at rank %d", i, job, got, rank, rankDelay(r), r)
			}
		}

		lone := NewLoad(0, false, nil)
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

	l := NewLoad(0, true, nil)
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

// TestLoad_HoldCountsAtTheLimit: Hold takes a place that is a run in
// progress even at max_parallel (a handed-on pending slot must run), so
// the next Reserve is refused until its Release(true).
func TestLoad_HoldCountsAtTheLimit(t *testing.T) {
	l := NewLoad(1, true, nil)
	if !l.Reserve() {
		t.Fatal("first reservation refused at max_parallel 1")
	}
	l.Won()
	l.Hold() // over the limit: it must run
	if l.InProgress() != 2 || testutil.ToFloat64(l.gauge) != 2 {
		t.Fatalf("after Hold at the limit: %d in progress, gauge %v; want 2", l.InProgress(), testutil.ToFloat64(l.gauge))
	}
	l.Release(true)
	if l.Reserve() {
		t.Fatal("Reserve accepted while the held run fills max_parallel 1")
	}
	l.Release(true)
	if !l.Reserve() || l.InProgress() != 0 {
		t.Fatalf("after both releases: Reserve refused or %d in progress; want a place and 0", l.InProgress())
	}
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
	l, l2 := NewLoad(0, true, nil), NewLoad(0, true, nil)
	l.SetPeers("n1", []Peer{{ID: "n2", Tags: map[string]string{"role": "db"}}, {ID: "n3"}}, time.Hour)
	l2.SetPeers("n1", []Peer{{ID: "n2", Tags: map[string]string{"role": "db"}}, {ID: "n3"}}, time.Hour)
	db, anyJob := 0, 0
	for s := range int64(3000) {
		dDB, _ := l2.Enter("j", s, []string{"role=db"})
		if want := rankDelay(Rank("j", jIndex, s, "n1", []string{"n2"})); dDB != want {
			t.Fatalf("slot %d, nodes: [role=db]: delay %v, want %v (n1's rank among n1, n2)", s, dDB, want)
		}
		dAny, _ := l.Enter("j", s, nil)
		if want := rankDelay(Rank("j", jIndex, s, "n1", []string{"n2", "n3"})); dAny != want {
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

// A place given back after a refused TryReserve, before the caller waits,
// still wakes it: the channel is the one the refusal returned. (With a
// refused Reserve and then Freed, that Release would have woken nobody.)
func TestLoad_TryReserveSeesAReleaseBeforeTheWait(t *testing.T) {
	l := NewLoad(1, true, nil)
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

// TestLoad_Settled: Settled's channel is closed at once when no rank-0
// claim of the slot is in flight, and otherwise when the last one sent is
// answered; another slot's claims do not hold it.
func TestLoad_Settled(t *testing.T) {
	l := NewLoad(0, true, nil)
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if !closed(l.Settled(10)) {
		t.Fatal("Settled with no claim in flight: open, want closed")
	}
	l.FirstSent(10)
	l.FirstSent(10)
	l.FirstSent(11)
	c := l.Settled(10)
	l.FirstAnswered(10)
	if closed(c) {
		t.Fatal("Settled after 1 of 2 answers: closed, want open")
	}
	l.FirstAnswered(10)
	if !closed(c) || !closed(l.Settled(10)) {
		t.Fatal("Settled after both answers: open, want closed")
	}
	if closed(l.Settled(11)) {
		t.Fatal("Settled(11) with its claim in flight: closed, want open")
	}
	l.FirstAnswered(11)
	l.FirstAnswered(11) // one too many: ignored
	if !closed(l.Settled(11)) {
		t.Fatal("Settled(11) after its answer: open, want closed")
	}
}

// TestLoad_StallIn: a slot's rank-0 claims in flight stall SettleStall
// after the latest was sent or answered; an answer restarts the count; a
// slot with none in flight has nothing to stall.
func TestLoad_StallIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoad(0, true, nil)
		if _, ok := l.StallIn(10); ok {
			t.Fatal("StallIn with no claim in flight: ok")
		}
		l.FirstSent(10)
		l.FirstSent(10)
		time.Sleep(SettleStall / 4)
		if in, ok := l.StallIn(10); !ok || in != SettleStall*3/4 {
			t.Fatalf("StallIn a quarter of SettleStall after the send: %v, %v; want %v", in, ok, SettleStall*3/4)
		}
		l.FirstAnswered(10)
		if in, _ := l.StallIn(10); in != SettleStall {
			t.Fatalf("StallIn after an answer: %v, want %v", in, SettleStall)
		}
		time.Sleep(SettleStall)
		if in, ok := l.StallIn(10); !ok || in > 0 {
			t.Fatalf("StallIn SettleStall after the last answer: %v, %v; want stalled", in, ok)
		}
		l.FirstAnswered(10)
		if _, ok := l.StallIn(10); ok {
			t.Fatal("StallIn once all are answered: ok")
		}
	})
}
