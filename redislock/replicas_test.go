package redislock

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
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
	req := func(slot int64) actors.ClaimRequest {
		return actors.ClaimRequest{Job: "backup", Slot: slot, Owner: "n1:run", TTL: 10 * time.Second, Lease: true}
	}
	c, err := r.Claim(ctxT(t), req(100))
	if err != nil || c.Outcome != actors.Claimed || c.Replicas != 1 || c.Fence != 1 {
		t.Fatalf("claim with the replica up: got %+v, %v; want claimed, 1 replica, fence 1", c, err)
	}
	if _, err := r.Release(ctxT(t), "backup", "n1:run"); err != nil {
		t.Fatalf("release: %v", err)
	}
	if v := replica.Do("HGET", r.Key("state", "backup"), "slot"); v != "100" {
		t.Errorf("the replica's state slot: got %q, want 100", v)
	}

	replica.Kill()
	start := time.Now()
	c, err = r.Claim(ctxT(t), req(101))
	took := time.Since(start)
	if err != nil || c.Outcome != actors.NotReplicated || c.Replicas != 0 || c.Fence != 2 {
		t.Fatalf("claim with the replica stopped: got %+v, %v; want not_replicated, 0 replicas, fence 2", c, err)
	}
	if took < ackTimeout {
		t.Errorf("claim with the replica stopped took %v, want at least the ack timeout %v (WAIT)", took, ackTimeout)
	}
	if holder := master.Do("GET", r.Key("job", "backup")); holder != "n1:run" {
		t.Errorf("lease after a not-replicated claim: got %q, want it held (the caller releases it)", holder)
	}
	start = time.Now()
	c, err = r.Claim(ctxT(t), req(101))
	if err != nil || c.Outcome != actors.ClaimedElsewhere || time.Since(start) >= ackTimeout {
		t.Errorf("a losing claim: got %+v, %v after %v; want claimed_elsewhere without waiting", c, err, time.Since(start))
	}
	if got := actors.NotReplicated.String(); got != actors.SkipNotReplicated {
		t.Errorf("NotReplicated.String(): got %q, want %q", got, actors.SkipNotReplicated)
	}
}

// The replicated claim loads the script with EVAL when the server does not
// know it (after SCRIPT FLUSH, a restart or a failover).
func TestClaim_MinReplicasAckedAfterScriptFlush(t *testing.T) {
	master := redistest.Start(t)
	redistest.StartReplica(t, master)
	r := newRedis(t, master.Addr(), Options{MinReplicasAcked: 1})
	master.Do("SCRIPT", "FLUSH")
	c, err := r.Claim(ctxT(t), actors.ClaimRequest{Job: "j", Slot: 5, Owner: "n:r", TTL: time.Second, Lease: true})
	if err != nil || c.Outcome != actors.Claimed || c.Replicas != 1 {
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
		cl, err := r.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: 7, Owner: "n:r", TTL: time.Second, Lease: true})
		if err != nil || cl.Outcome != actors.Claimed || cl.Replicas != 1 {
			t.Errorf("claim of %s on shard %d: got %+v, %v; want claimed, acknowledged by 1 replica", job, c.Shard(r.Key("job", job)), cl, err)
		}
	}
}
