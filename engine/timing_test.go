package engine

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/ledger"
)

// TestTimingRelations checks the timing constants of different packages
// that must agree, one relation a row, each with why it must hold; the
// defaults of the config (node.max_clock_skew, node.shutdown_timeout, a
// job's lock_ttl) are read from a parsed config. actors' own unexported
// constants are checked in actors/timing_test.go.
//
// Relations that hold by construction are derived in code instead, and
// not tested here (a check that cannot fail checks nothing):
//   - the claim order: cluster.MaxDelay = 4 × cluster.RankStep; actors'
//     busyWait (a run's wait for a place at node.max_parallel) =
//     2 × cluster.MaxDelay;
//   - the heartbeat: cluster.DefaultTTL = 3 × DefaultHeartbeatEvery, and a
//     Heartbeat's record TTL is 3 × its interval unless given;
//   - the lease (actors/lease.go): renewed every TTL/3 (overlap replace: at
//     most replaceRenewEvery), each renewal bounded by TTL/3, declared lost
//     safetyMargin before its expiry with safetyMargin ≤ TTL/2, so at
//     least one renewal is tried before a lease is given up;
//   - the claim: claimTimeout = actors.DefaultClaimTimeout (+
//     redis.replica_ack_timeout with min_replicas_acked); a run request's
//     answer waits claimTimeout + 1 s (runHere);
//   - the audit pass: auditPass = auditEvery / 2 bounds a pass and each
//     call in it, so one pass ends before the next is due;
//   - ledger.AnswerWindow = min(max_clock_skew, lock_ttl) + jitter;
//   - api.MaxRunTimeout = ledger.PendingWindow;
//   - the health monitor: redislock's stall threshold is half its probe
//     timeout; auditPass = auditEvery / 2;
//   - shutdownSlack = process.DefaultDrainTimeout + actors.ReleaseTimeout.
func TestTimingRelations(t *testing.T) {
	cfg := parseConfig(t, "jobs:\n  - {name: j, schedule: '* * * * *', command: 'true'}\n")
	skew, shutdown, lockTTL := cfg.Node.MaxClockSkew, cfg.Node.ShutdownTimeout, cfg.Jobs[0].LockTTL
	for _, r := range []struct {
		relation string
		holds    bool
	}{
		{"cluster.MaxAge beats < the record TTL's beats: a killed node stops counting as live before its record expires",
			time.Duration(cluster.MaxAge)*cluster.DefaultHeartbeatEvery < cluster.DefaultTTL},
		{"cluster.WarmupRead < cluster.DefaultHeartbeatEvery: a starting node reads the others between its beats",
			cluster.WarmupRead < cluster.DefaultHeartbeatEvery},
		{"cluster.MaxDelay < the default answer window: the last rank's claim is sent while the slot can be claimed",
			cluster.MaxDelay < ledger.AnswerWindow(skew, lockTTL, 0)},
		{"actors.AuditGrace >= actors.DefaultClaimTimeout: a claim sent at its answer window's end is decided before the audit may record the slot missed",
			actors.AuditGrace >= actors.DefaultClaimTimeout},
		{"actors.StartTimeout < the default shutdown_timeout: a start hung at shutdown is abandoned while the runs may still finish",
			actors.StartTimeout < shutdown},
		{"secondSignalWait >= actors.ReleaseTimeout: a second signal waits out a killed run's lease release",
			secondSignalWait >= actors.ReleaseTimeout},
		{"pingDownMax < pingUp: while the backend is not ready it is checked more often than while it is",
			pingDownMax < pingUp},
		{"ledger.RunStatusTTL > ledger.PendingWindow: a run request's status outlives the longest wait for it",
			ledger.RunStatusTTL > ledger.PendingWindow},
	} {
		if !r.holds {
			t.Errorf("timing relation broken: %s", r.relation)
		}
	}
}
