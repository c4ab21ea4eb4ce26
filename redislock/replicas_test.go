package redislock

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
)

// With MinReplicasAcked 1 against a real master and replica, a won claim
// is acknowledged by the replica and returned as Claimed; once the replica
// is stopped, a won claim comes back NotReplicated after the ack timeout,
// with its fence (the slot is recorded and the lease taken: the caller
// releases it). Claims that lose never wait.
func TestClaim_MinReplicasAcked(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	const ackTimeout = 300 * time.Millisecond
	r := newRedis(t, master.Addr(), Options{MinReplicasAcked: 1, ReplicaAckTimeout: ackTimeout})
	now := ledgertest.NowSlot(t, r)
	first := ledgertest.Sched("backup", now-1, "n1")
	c, err := r.Claim(ledgertest.Ctx(t), first)
	if err != nil || c.Outcome != ledger.Claimed || c.Replicas != 1 {
		t.Fatalf("claim with the replica up: got %+v, %v; want claimed, 1 replica", c, err)
	}
	if _, err := r.Release(ledgertest.Ctx(t), "backup", first.Owner()); err != nil {
		t.Fatalf("release: %v", err)
	}
	if v := replica.Do("HGET", r.Key("occ", "backup"), strconv.FormatInt(now-1, 10)); !strings.Contains(v, `"status":"claimed"`) {
		t.Errorf("the replica's record of the slot: got %q, want it claimed", v)
	}

	replica.Kill()
	second := ledgertest.Sched("backup", now, "n1")
	start := time.Now()
	c, err = r.Claim(ledgertest.Ctx(t), second)
	took := time.Since(start)
	if err != nil || c.Outcome != ledger.NotReplicated || c.Replicas != 0 || c.Token == 0 {
		t.Fatalf("claim with the replica stopped: got %+v, %v; want not_replicated, 0 replicas, a token", c, err)
	}
	if took < ackTimeout {
		t.Errorf("claim with the replica stopped took %v, want at least the ack timeout %v (WAIT)", took, ackTimeout)
	}
	if holder := master.Do("GET", r.Key("job", "backup")); holder != second.Owner() {
		t.Errorf("lease after a not-replicated claim: got %q, want it held (the caller releases it)", holder)
	}
	start = time.Now()
	c, err = r.Claim(ledgertest.Ctx(t), ledgertest.Sched("backup", now, "n2"))
	if err != nil || c.Outcome != ledger.ClaimedElsewhere || time.Since(start) >= ackTimeout {
		t.Errorf("a losing claim: got %+v, %v after %v; want claimed_elsewhere without waiting", c, err, time.Since(start))
	}
	if got := ledger.NotReplicated.String(); got != ledger.SkipNotReplicated {
		t.Errorf("NotReplicated.String(): got %q, want %q", got, ledger.SkipNotReplicated)
	}
}

// The replicated claim loads the script with EVAL when the server does not
// know it (after SCRIPT FLUSH, a restart or a failover).
func TestClaim_MinReplicasAckedAfterScriptFlush(t *testing.T) {
	master := redistest.Start(t)
	redistest.StartReplica(t, master)
	r := newRedis(t, master.Addr(), Options{MinReplicasAcked: 1})
	master.Do("SCRIPT", "FLUSH")
	c, err := r.Claim(ledgertest.Ctx(t), ledgertest.LeaseReq("j", time.Second))
	if err != nil || c.Outcome != ledger.Claimed || c.Replicas != 1 {
		t.Fatalf("claim after SCRIPT FLUSH: got %+v, %v; want claimed by 1 replica", c, err)
	}
}

// In Cluster mode the replicated claim runs on the shard that owns the
// job's keys and WAITs for that shard's replica.
func TestTopologies_ClusterMinReplicasAcked(t *testing.T) {
	redistest.RequireTopologies(t) // a Cluster with replicas (about 3 s)
	c := redistest.StartClusterReplicas(t, 3, 1)
	r, err := New(Options{Addresses: c.Addrs(), MinReplicasAcked: 1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	for _, job := range []string{"a", "b", "c", "d"} {
		cl, err := r.Claim(ledgertest.Ctx(t), ledgertest.LeaseReq(job, time.Second))
		if err != nil || cl.Outcome != ledger.Claimed || cl.Replicas != 1 {
			t.Errorf("claim of %s on shard %d: got %+v, %v; want claimed, acknowledged by 1 replica", job, c.Shard(r.Key("job", job)), cl, err)
		}
	}
}

// A finish that hands the lease to the pending slot (overlap queue) is a
// won claim of that slot: with MinReplicasAcked it waits for the replicas
// too. With the replica up the hand-over is acknowledged; with it stopped
// it comes back NotReplicated with the hand-over's fence (the next owner
// holds the lease: the caller releases it). A finish with nothing pending
// does not wait.
func TestFinish_MinReplicasAckedHandOver(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	// A generous timeout while the replica is up (a loaded machine), a
	// short one, on a second client, once it is stopped.
	const ackTimeout = 300 * time.Millisecond
	r := newRedis(t, master.Addr(), Options{MinReplicasAcked: 1, ReplicaAckTimeout: 3 * time.Second})
	short := newRedis(t, master.Addr(), Options{MinReplicasAcked: 1, ReplicaAckTimeout: ackTimeout})
	now := ledgertest.NowSlot(t, r)
	claim := func(slot int64, node string) (ledger.Claim, string) {
		t.Helper()
		req := ledgertest.Sched("q", slot, node)
		req.TTL, req.Queue = 10*time.Second, true
		c, err := r.Claim(ledgertest.Ctx(t), req)
		if err != nil {
			t.Fatalf("claim %d: %v", slot, err)
		}
		return c, req.Owner()
	}
	finish := func(r *Redis, owner, next string) (ledger.Finished, time.Duration) {
		t.Helper()
		start := time.Now()
		f, err := r.Finish(ledgertest.Ctx(t), ledger.FinishRequest{Job: "q", Owner: owner, Next: next, TTL: 10 * time.Second,
			Record: ledger.RunRecord{RunID: owner, Slot: ledgertest.Runs.Add(1), Fence: 1, Result: ledger.ResultSuccess}})
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		return f, time.Since(start)
	}
	c, a := claim(now-1, "n1")
	if c.Outcome != ledger.Claimed || c.Replicas != 1 {
		t.Fatalf("first claim: got %+v, want claimed by 1 replica", c)
	}
	if c, _ := claim(now, "n2"); c.Outcome != ledger.Queued {
		t.Fatalf("second claim: got %+v, want queued", c)
	}
	f, _ := finish(r, a, "n1:c")
	if f.Pending != now || f.Token == 0 || f.NotReplicated || f.Replicas != 1 {
		t.Fatalf("hand-over with the replica up: got %+v, want slot %d handed on, acknowledged by 1 replica", f, now)
	}
	ledgertest.WaitPast(t, r, now)
	if c, _ := claim(now+1, "n2"); c.Outcome != ledger.Queued {
		t.Fatalf("third claim: got %+v, want queued", c)
	}
	replica.Kill()
	f, took := finish(short, "n1:c", "n1:e")
	if f.Pending != now+1 || f.Token == 0 || !f.NotReplicated || f.Replicas != 0 {
		t.Fatalf("hand-over with the replica stopped: got %+v, want slot %d handed on but not replicated", f, now+1)
	}
	if took < ackTimeout {
		t.Errorf("hand-over with the replica stopped took %v, want at least the ack timeout %v (WAIT)", took, ackTimeout)
	}
	if holder := master.Do("GET", r.Key("job", "q")); holder != "n1:e" {
		t.Errorf("lease after a not-replicated hand-over: got %q, want n1:e (the caller releases it)", holder)
	}
	if f, took = finish(short, "n1:e", "n1:f"); f.Pending != 0 || f.NotReplicated || took >= ackTimeout {
		t.Errorf("finish with nothing pending: got %+v after %v, want no hand-over and no WAIT", f, took)
	}
}
