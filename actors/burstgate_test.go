package actors_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/fakeproc"
	"github.com/cronlock/cronlock/nodeload"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// slowFirstLocker is the memory backend whose claims of job "a" take 100
// ms; it notes when each claim was sent, by job.
type slowFirstLocker struct {
	*redislock.Memory
	mu   sync.Mutex
	sent map[string][]time.Time
}

func (l *slowFirstLocker) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	l.mu.Lock()
	l.sent[req.Job] = append(l.sent[req.Job], time.Now())
	l.mu.Unlock()
	if req.Job == "a" {
		time.Sleep(100 * time.Millisecond)
	}
	return l.Memory.Claim(ctx, req)
}

// At an instant where this node claims jobs a and w first (rank 0) and b
// second (rank 1, deferred in the burst until the node's rank-0 claims of
// the instant are answered, and as long again), w's claim is answered at
// once but its process starts only after b's claim was sent: a claim
// waiting its turn in the burst holds the node's winners (ClaimGate), or
// at a herd the winners' forks starve the claims still to be sent.
func TestJob_BurstDeferredClaimHoldsWinners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		load := nodeload.New(0, true, nil)
		load.SetJobs([]string{"a", "b", "w"})                       // indices 0, 1, 2: a and w share their rank
		load.SetPeers("n1", []nodeload.Peer{{ID: "n2"}}, time.Hour) // n2 never claims: n1 wins all
		locker := &slowFirstLocker{Memory: redislock.NewMemory(), sent: map[string][]time.Time{}}
		var mu sync.Mutex
		started := map[string][]time.Time{}
		start := func(s process.Spec) (Proc, error) {
			for _, kv := range s.Env {
				if job, ok := strings.CutPrefix(kv, "CRONLOCK_JOB="); ok {
					mu.Lock()
					started[job] = append(started[job], time.Now())
					mu.Unlock()
				}
			}
			return fakeproc.Start(s)
		}
		kill := make(chan struct{})
		results := make(chan RunFinished, 100)
		deps := JobDeps{Log: zap.NewNop(), Metrics: NewMetrics(nil), Locker: locker, NodeID: "n1",
			Results: results, Phantoms: make(chan Phantom, 10), Kill: kill, Start: start,
			Load: load, Claims: NewClaimGate(), Burst: nodeload.NewBurst()}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		jobs := map[string]*Job{}
		for _, name := range []string{"a", "b", "w"} {
			j := NewJob(testJob(t, name, "exit 0"), deps)
			jobs[name] = j
			wg.Go(func() { j.Run(ctx) })
		}
		go func() {
			for range results {
			}
		}()
		ids := []string{"n1", "n2"}
		slot := rankedSlot(time.Now(), "a", "n1", 0, ids)
		if nodeload.Rank("w", 2, slot.Unix(), "n1", ids) != 0 || nodeload.Rank("b", 1, slot.Unix(), "n1", ids) != 1 {
			t.Fatalf("slot %v: ranks a %d, w %d, b %d; want 0, 0, 1", slot, 0, nodeload.Rank("w", 2, slot.Unix(), "n1", ids),
				nodeload.Rank("b", 1, slot.Unix(), "n1", ids))
		}
		time.Sleep(time.Until(slot))
		// a and b first, until b waits its turn: otherwise w's actor may
		// claim (at once, from memory) and start before b's actor has
		// even taken its fire, and nothing holds w (flaked 6–9 in 1,000).
		for _, name := range []string{"a", "b"} {
			jobs[name].Inbox() <- Fire{Job: name, Slot: slot}
		}
		synctest.Wait()
		jobs["w"].Inbox() <- Fire{Job: "w", Slot: slot}
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		close(kill)
		wg.Wait()
		close(results)

		bSent := within(locker.sent["b"], slot)
		wStart := within(started["w"], slot)
		aSent := within(locker.sent["a"], slot)
		if bSent.IsZero() || wStart.IsZero() || aSent.IsZero() {
			t.Fatalf("a's claim sent %v, b's %v, w started %v; want all", aSent, bSent, wStart)
		}
		if wStart.Before(bSent) {
			t.Errorf("w started %v after the slot, before b's deferred claim was sent (%v after): the burst did not hold it",
				wStart.Sub(slot), bSent.Sub(slot))
		}
		if d := bSent.Sub(slot); d < 150*time.Millisecond {
			t.Errorf("b's claim sent %v after the slot, want after a's 100 ms claim and as long again", d)
		}
	})
}

// within is the first of ts in [slot, slot+1s), or the zero time.
func within(ts []time.Time, slot time.Time) time.Time {
	i := slices.IndexFunc(ts, func(t time.Time) bool { return !t.Before(slot) && t.Before(slot.Add(time.Second)) })
	if i < 0 {
		return time.Time{}
	}
	return ts[i]
}
