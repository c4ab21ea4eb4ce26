package nodeload

import (
	"fmt"

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

// TestLoad_Enter: the claim delay is the rank among the live peers that
// may run the job (RankStep each, plus PerBurstClaim each per claim of the
// same slot before it) plus PerRun per run in progress beyond
// the peers' mean and the slack, at most MaxDelay; 0 without ordering,
// without peers, with an expired view; the gauge counts the runs.
func TestLoad_Enter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := []Peer{{ID: "n2", Running: 10}, {ID: "n3", Running: 10, Tags: map[string]string{"role": "db"}}}
		all := []string{"n1", "n2", "n3"}
		// slotOf finds a slot of job "j" where n1 has rank want among all.
		slotOf := func(want int) int64 {
			for s := int64(1); ; s++ {
				if Rank("j", jIndex, s, "n1", all) == want {
					return s
				}
			}
		}
		tests := []struct {
			name      string
			rank      int
			running   int
			selectors []string
			want      time.Duration
		}{
			{"rank 0, idle", 0, 0, nil, 0},
			{"rank 1, idle", 1, 0, nil, RankStep},
			{"rank 2, idle", 2, 0, nil, 2 * RankStep},
			{"rank 0, within the slack", 0, 14, nil, 0}, // 10 + 2 + 10/4 = 14.5
			{"rank 0, 5.5 runs over the slack", 0, 20, nil, 5500 * time.Microsecond},
			{"rank 2, 30.5 over: capped", 2, 45, nil, MaxDelay},
			{"rank 1, 1.5 over", 1, 16, nil, RankStep + 1500*time.Microsecond},
			{"rank 2 among all, n3 only may run it", 2, 0, []string{"role=db"}, time.Duration(Rank("j", jIndex, slotOf(2), "n1", []string{"n1", "n3"})) * RankStep},
		}
		for _, tt := range tests {
			l := New(0, true, nil)
			l.SetPeers("n1", append(peers, Peer{ID: "n1", Running: 99}), time.Minute) // its own entry is left out
			for range tt.running {
				l.Reserve()
				l.Won()
			}
			if got := l.Enter("j", slotOf(tt.rank), tt.selectors); got != tt.want {
				t.Errorf("%s: delay %v, want %v", tt.name, got, tt.want)
			}
			if got := testutil.ToFloat64(l.gauge); got != float64(tt.running) {
				t.Errorf("%s: gauge %v, want %d", tt.name, got, tt.running)
			}
		}

		l := New(0, true, nil)
		if d := l.Enter("j", slotOf(2), nil); d != 0 {
			t.Errorf("peers unknown: delay %v, want 0", d)
		}
		l.SetPeers("n1", peers, 10*time.Second)
		if d := l.Enter("j", slotOf(2), []string{"zone=x"}); d != 0 {
			t.Errorf("no peer may run the job: delay %v, want 0", d)
		}
		if d := l.Enter("j", slotOf(2), nil); d != 2*RankStep {
			t.Errorf("rank 2 with a valid view: delay %v, want %v", d, 2*RankStep)
		}
		time.Sleep(10 * time.Second)
		if d := l.Enter("j", slotOf(2), nil); d != 0 {
			t.Errorf("view expired: delay %v, want 0", d)
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
		burst := slotOf(2)
		for i := range 100 {
			job := fmt.Sprintf("b%03d", i)
			want := time.Duration(Rank(job, i, burst, "n1", all)) * (RankStep + time.Duration(i)*PerBurstClaim)
			if got := l.Enter(job, burst, nil); got != min(want, MaxDelay) {
				t.Fatalf("burst claim %d (%s, rank %d): delay %v, want %v", i, job, Rank(job, i, burst, "n1", all), got, min(want, MaxDelay))
			}
		}
		next := burst + 1
		for Rank("j", 100, next, "n1", all) != 1 {
			next++
		}
		if d := l.Enter("j", next, nil); d != RankStep {
			t.Errorf("the next slot's first claim at rank 1: delay %v, want %v", d, RankStep)
		}

		lone := New(0, false, nil)
		lone.SetPeers("n1", peers, time.Minute)
		for range 30 {
			lone.Reserve()
			lone.Won()
		}
		if d := lone.Enter("j", slotOf(2), nil); d != 0 {
			t.Errorf("unordered (memory backend) at rank 2 with 30 runs: delay %v, want 0", d)
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
		dDB := l2.Enter("j", s, []string{"role=db"})
		if want := time.Duration(Rank("j", jIndex, s, "n1", []string{"n2"})) * RankStep; dDB != want {
			t.Fatalf("slot %d, nodes: [role=db]: delay %v, want %v (n1's rank among n1, n2)", s, dDB, want)
		}
		dAny := l.Enter("j", s, nil)
		if want := time.Duration(Rank("j", jIndex, s, "n1", []string{"n2", "n3"})) * RankStep; dAny != want {
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
