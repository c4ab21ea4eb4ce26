package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// With redis.min_replicas_acked: 1 on a master with one replica, the job
// runs while the replica acknowledges its claims. Once the replica is
// killed, every won claim is skipped not_replicated: logged, counted in
// cronlock_skips_total, nothing run, and the lease released (the next slot
// is not an overlap); once a replica is back, the job runs again.
func TestReplicas_NotReplicatedWhileTheReplicaIsDown(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	ledger := newLedger(t)
	jobs, _ := everySecondJobs(ledger, "job", 1, nil)
	cfg := redisConfig("", jobs...)
	cfg["redis"] = map[string]any{"address": master.Addr(), "min_replicas_acked": 1, "replica_ack_timeout": "200ms"}
	listen := freeAddr(t)
	cfg["http"] = map[string]any{"listen": listen}
	nodes, ready := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"})
	waitLedgerSlotAfter(t, ledger, "job00", ready)

	replica.Kill()
	killedAt := time.Now()
	const skips = `cronlock_skips_total{job="job00",reason="not_replicated"}`
	waitFor(t, 5*time.Second, "two not_replicated skips", func() bool { return scrapeSeries(t, listen, skips) >= 2 })
	for _, r := range readLedger(t, ledger) {
		if r.Start.After(killedAt.Add(300 * time.Millisecond)) {
			t.Errorf("slot %d ran %v after the replica was killed, want no run without an acknowledging replica", r.Slot, r.Start.Sub(killedAt))
		}
	}
	if n := scrapeSeries(t, listen, `cronlock_skips_total{job="job00",reason="overlap"}`); n != 0 {
		t.Errorf("overlap skips: got %v, want 0 (the lease of a claim not run is released)", n)
	}
	warned := nodes[0].WaitLog(time.Second, "claim not replicated", func(e logEntry) bool {
		_, acked := e["replicas_acked"]
		return e.Str("level") == "warn" && strings.HasPrefix(e.Msg(), "claim not replicated; not run") &&
			e.Str("job") == "job00" && acked && e.Int("replicas_acked") == 0
	})

	replica.Restart()
	replica.WaitReplicaLinkUp(10 * time.Second)
	counted := scrapeSeries(t, listen, skips)
	waitLedgerSlotAfter(t, ledger, "job00", time.Now())
	stopAll(t, 10*time.Second, nodes...)
	t.Logf("first not-replicated warning %v after the kill; %v not_replicated skips counted while the replica was down",
		warned.Time().Sub(killedAt).Round(time.Millisecond), counted)
}
