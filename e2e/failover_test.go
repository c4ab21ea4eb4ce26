package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// These failover tests kill a Redis master under running daemons. They take
// 20–30 s each and run with `make test-topologies` (redistest.TopologiesEnv),
// which .ci/run runs after `make test`.

// longestGap returns the longest span between consecutive run starts in
// [from, to] (the edges count as starts), and where it began.
func longestGap(runs []ledgerRun, from, to time.Time) (time.Duration, time.Time) {
	starts := []time.Time{from, to}
	for _, r := range runs {
		if r.Start.After(from) && r.Start.Before(to) {
			starts = append(starts, r.Start)
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	var at time.Time
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d > gap {
			gap, at = d, starts[i-1]
		}
	}
	return gap, at
}

// Sentinel: a master with two replicas and three sentinels, 3 daemons,
// 5 per-second jobs, redis.min_replicas_acked: 1. The master is SIGKILLed
// mid-run: the sentinels promote a replica, the daemons follow it and the
// jobs resume there, with no slot run twice (every run's claim was on a
// replica before it ran) and no slot missed silently (checkExplained).
// The gap without runs is measured (README.md, "Redis topologies").
//
// On a loaded machine the sentinels can judge the freshly promoted master
// down too (down-after-milliseconds 1000) and fail over again, to the other
// replica, which may lack the last second's claims: the daemons then repair
// the state and skip (not_replicated) until the new master has a replica
// again. The test follows each failover (redistest.MasterWatch) and asks
// for every slot only once the master has held for the whole run of slots
// it checks.
func TestFailover_SentinelMasterKilled(t *testing.T) {
	redistest.RequireTopologies(t)
	t.Parallel()
	s := redistest.StartSentinelReplicas(t, 2)
	ledger := newLedger(t)
	jobs, names := everySecondJobs(ledger, "job", 5, nil)
	cfg := redisConfig("", jobs...)
	cfg["redis"] = map[string]any{"addresses": s.Addrs(), "sentinel_master": redistest.SentinelMaster,
		"min_replicas_acked": 1}
	cfg["log"] = map[string]any{"level": "debug"} // summarised skip lines too: each missed slot is explained
	nodes, _ := startCluster(t, writeConfig(t, cfg), 0, "n1", "n2", "n3")
	watch := s.WatchMaster()
	time.Sleep(3 * time.Second) // runs on the first master: that is the test
	old := s.Master.Addr()
	s.Master.Kill()
	killedAt := time.Now()
	promoted := s.WaitFailover(old, 20*time.Second)
	failedOver := time.Now()
	var resumed time.Time
	waitFor(t, 2*time.Second, "the watch to see the failover", func() bool { return len(watch.Switches()) > 0 })
	since := failedOver // the last switch the checked run of slots comes after
	if last := watch.Last(); last.After(since) {
		since = last
	}
	for round := 0; ; round++ {
		// After a second failover the new master has no replica until the
		// sentinels turn the one before into one (10–15 s here).
		wait := 15 * time.Second
		if round > 0 {
			wait = 30 * time.Second
		}
		for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
			ran := map[string]bool{}
			for _, r := range readLedger(t, ledger) {
				if r.Start.After(since) {
					ran[r.Job] = true
				}
			}
			if len(ran) == len(names) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for every job to run on the promoted master (ran: %v); master switches seen: %v%s",
					wait, ran, describeSwitches(watch.Switches(), killedAt), describeSince(nodes, since.Add(-time.Second)))
			}
		}
		resumed = time.Now()
		time.Sleep(3 * time.Second) // runs on the promoted master
		last := watch.Last()
		if !last.After(since) {
			break
		}
		if n := len(watch.Switches()); n > 3 {
			t.Fatalf("the sentinels switched the master %d times after the kill: %v", n, watch.Switches())
		}
		since = last // another failover: the checked run of slots starts after it
	}
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readLedger(t, ledger)
	byJob := slotsByJob(runs)
	// A promotion begins about a second before the sentinels name the new
	// master (the daemons skip not_replicated from then on): a switch
	// named during the last wait or the stop exempts the slots from 2 s
	// before it.
	time.Sleep(time.Until(stopAt.Add(2 * time.Second)))
	lastOK := stopAt.Unix() - 1
	if last := watch.Last(); last.After(since) {
		lastOK = min(lastOK, last.Add(-2*time.Second).Unix()-1)
		t.Logf("a switch was named at the end (%v after the kill): slots asked for up to %d only",
			last.Sub(killedAt).Round(10*time.Millisecond), lastOK)
	}
	after := slotsBetween(ceilSecond(resumed)+1, lastOK, 1)
	all := slotsBetween(killedAt.Unix()-1, stopAt.Unix()-1, 1)
	for _, job := range names {
		checkOncePerSlot(t, nodes, job, byJob[job], after)
		checkExplained(t, nodes, job, byJob[job], all)
	}
	gap, at := longestGap(runs, killedAt.Add(-2*time.Second), stopAt)
	notReplicated := 0
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if e.Msg() == "slot skipped" && e.Str("reason") == "not_replicated" {
				notReplicated++
			}
		}
	}
	t.Logf("sentinel failover %s → %s took %v; longest gap without runs %v (from %v after the kill); "+
		"every job ran again %v after the kill; %d runs, %d not_replicated skip lines; master switches seen: %v",
		old, promoted, failedOver.Sub(killedAt).Round(10*time.Millisecond), gap.Round(10*time.Millisecond),
		at.Sub(killedAt).Round(10*time.Millisecond), resumed.Sub(killedAt).Round(10*time.Millisecond), len(runs),
		notReplicated, describeSwitches(watch.Switches(), killedAt))
}

// checkExplained fails the test for every slot in want of job that no
// node ran unless every node accounts for it — a "slot skipped" line of
// any reason, the ticker's "older slots passed over" covering it, or a
// dropped fire — and at least one says why with a reason other than
// claimed_elsewhere (that node lost the claim to another, which then had
// to give the reason). A node that won a slot and dropped it without a
// word is caught here.
func checkExplained(t *testing.T, nodes []*node, job string, ran map[int64][]string, want []int64) {
	t.Helper()
	accounted := map[string]map[int64]bool{} // node → slots it logged
	why := map[int64]bool{}                  // a reason other than claimed_elsewhere
	for _, n := range nodes {
		accounted[n.name] = map[int64]bool{}
		for _, e := range n.Logs() {
			switch {
			case e.is("slot skipped", job):
				accounted[n.name][e.Slot()] = true
				if e.Str("reason") != "claimed_elsewhere" {
					why[e.Slot()] = true
				}
			case e.is("ticker woke late; older slots passed over", job): // per-second slots before it
				for s := e.Slot() - e.Int("missed"); s < e.Slot(); s++ {
					accounted[n.name][s], why[s] = true, true
				}
			case e.is("job actor inbox full; fire dropped", job):
				accounted[n.name][e.Slot()], why[e.Slot()] = true, true
			}
		}
	}
	for _, slot := range want {
		if len(ran[slot]) > 0 {
			continue
		}
		var silent []string
		for _, n := range nodes {
			if !accounted[n.name][slot] {
				silent = append(silent, n.name)
			}
		}
		if len(silent) > 0 || !why[slot] {
			t.Errorf("job %s slot %d: no run, and nodes %v logged nothing of it or none gave a reason but claimed_elsewhere "+
				"(a silently missed slot)%s", job, slot, silent, describeSlot(nodes, job, slot))
		}
	}
}

// describeSince lists each node's log lines from t0 on but the runs and
// lost claims (claimed_elsewhere), for a failure's message.
func describeSince(nodes []*node, t0 time.Time) string {
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "\n    %s:", n.name)
		for _, e := range n.Logs() {
			if e.Time().Before(t0) || e.Str("reason") == "claimed_elsewhere" || strings.HasPrefix(e.Msg(), "run ") ||
				e.Str("level") == "debug" && e.Msg() != "slot skipped" {
				continue
			}
			fmt.Fprintf(&b, "\n      %s %s %s %s%s", e.Time().Format("15:04:05.000"), e.Msg(), e.Str("job"), e.Str("reason"), e.Str("error"))
		}
	}
	return b.String()
}

// describeSwitches lists master switches with their times after t0.
func describeSwitches(sw []redistest.MasterSwitch, t0 time.Time) string {
	var b strings.Builder
	for _, x := range sw {
		fmt.Fprintf(&b, " [%v %s names %s, epoch %d]", x.At.Sub(t0).Round(10*time.Millisecond), x.Sentinel, x.Addr, x.Epoch)
	}
	return b.String()
}

// Cluster: 3 masters with a replica each (cluster-require-full-coverage
// no), 2 daemons, 30 per-second jobs spread over the shards. One master is
// SIGKILLed: only the jobs whose
// keys live on that shard stop, the others run every slot; /readyz says
// not ready (a claim of some job would fail) until the replica has taken
// over, then ready, and that shard's jobs run again. No slot runs twice.
func TestFailover_ClusterShardKilled(t *testing.T) {
	redistest.RequireTopologies(t)
	t.Parallel()
	// With Redis's default cluster-require-full-coverage yes, every shard
	// answers CLUSTERDOWN once one master has failed, until the failover
	// (README.md, "Redis topologies"): only "no" keeps the others serving.
	c := redistest.StartClusterReplicas(t, 3, 1, "--cluster-require-full-coverage", "no")
	ledger := newLedger(t)
	jobs, names := everySecondJobs(ledger, "job", 30, nil)
	shardOf := map[string]int{}
	for _, j := range names {
		shardOf[j] = c.Shard("cronlock:job:{" + j + "}")
	}
	killed := shardOf["job00"]
	cfg := redisConfig("", jobs...)
	cfg["redis"] = map[string]any{"addresses": c.Addrs()}
	cfg["log"] = map[string]any{"level": "info"}
	listen := freeAddr(t)
	var nodes []*node
	cfgFile := writeConfig(t, cfg)
	nodes = append(nodes, startNode(t, cfgFile, withNodeID("n1"), withEnv("CRONLOCK_HTTP_LISTEN="+listen)),
		startNode(t, cfgFile, withNodeID("n2")))
	first := waitEngineRunning(nodes[0]).Time()
	waitEngineRunning(nodes[1])
	waitReadiness(t, "n1, every shard up", listen, true, "ready")
	time.Sleep(2 * time.Second) // runs on every shard: that is the test

	c.Masters[killed].Kill()
	killedAt := time.Now()
	down := waitReadiness(t, "n1, a shard's master killed", listen, false, "shard "+c.Masters[killed].Addr())
	c.WaitPromoted(killed, 20*time.Second)
	promotedAt := time.Now()
	waitReadiness(t, "n1, the replica took over", listen, true, "ready")
	readyAt := time.Now()
	waitFor(t, 10*time.Second, "every job of the killed shard to run again", func() bool {
		ran := map[string]bool{}
		for _, r := range readLedger(t, ledger) {
			if shardOf[r.Job] == killed && r.Start.After(readyAt) {
				ran[r.Job] = true
			}
		}
		for _, j := range names {
			if shardOf[j] == killed && !ran[j] {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	runs := readLedger(t, ledger)
	byJob := slotsByJob(runs)
	all := slotsBetween(ceilSecond(first)+2, stopAt.Unix()-1, 1)
	stopped, others := 0, 0
	for _, job := range names {
		if shardOf[job] != killed {
			others++
			checkOncePerSlot(t, nodes, job, byJob[job], all) // the other shards never stop
			continue
		}
		stopped++
		checkOncePerSlot(t, nodes, job, byJob[job], nil)
		for _, r := range runs {
			if r.Job == job && r.Start.After(killedAt.Add(500*time.Millisecond)) && r.Start.Before(promotedAt) {
				t.Errorf("%s (killed shard) ran slot %d %v after the kill, before the failover", job, r.Slot, r.Start.Sub(killedAt))
			}
		}
	}
	if stopped == 0 || others == 0 {
		t.Fatalf("jobs on the killed shard: %d, on the others: %d; want some of each", stopped, others)
	}
	var state []string
	state = append(state, fmt.Sprintf("%d %q", down.code, down.body))
	t.Logf("shard %d killed: %d of %d jobs stopped, %d ran every slot; /readyz while down: %s; replica took over %v after the kill, "+
		"ready again %v after; %d runs", killed, stopped, len(names), others, strings.Join(state, ""),
		promotedAt.Sub(killedAt).Round(10*time.Millisecond), readyAt.Sub(killedAt).Round(10*time.Millisecond), len(runs))
}
