package redistest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of real redis-server processes on loopback.
// StartCluster makes masters only, so a killed master's slots stay
// unserved (the cluster answers CLUSTERDOWN for them once the others have
// marked it failed); StartClusterReplicas adds replicas that take over. Masters[i] owns the i-th of len(Masters) equal ranges of the
// 16384 hash slots.
type Cluster struct {
	t       testing.TB
	Masters []*Server
	// Replicas[i] replicate Masters[i] (StartClusterReplicas); a replica
	// takes over its master's slots about 2 s after the master dies.
	Replicas [][]*Server
	ranges   [][2]int // Masters[i] owns ranges[i][0]..ranges[i][1] (as started)
}

// StartCluster starts masters (≥ 1) redis-server processes with
// `--cluster-enabled yes` (node timeout 1 s; args are added to each, as for
// StartWith), gives each its range of slots (CLUSTER ADDSLOTSRANGE), joins
// them (CLUSTER MEET, naming each bus port) and waits until every node reports cluster_state:ok
// with all masters known. It fails the test when that takes over 20 s.
// Cleanups kill the processes.
func StartCluster(t testing.TB, masters int, args ...string) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: StartCluster: %d masters, want at least 1", masters)
	}
	c := &Cluster{t: t}
	base := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000"}
	for i := range masters {
		c.Masters = append(c.Masters, start(t, true, append(base, args...)))
		lo, hi := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		c.ranges = append(c.ranges, [2]int{lo, hi})
	}
	for i, m := range c.Masters {
		m.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(c.ranges[i][0]), strconv.Itoa(c.ranges[i][1]))
	}
	for _, m := range c.Masters[1:] {
		c.Masters[0].Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(m.port), strconv.Itoa(m.bus))
	}
	c.waitOK(20*time.Second, len(c.Masters))
	return c
}

// StartClusterReplicas is StartCluster with perMaster replicas of each
// master (Replicas[i]), joined with CLUSTER MEET and CLUSTER REPLICATE; it
// waits until every node reports cluster_state:ok and knows every node,
// and every master streams to its replicas (a write acknowledged by all of
// them: WAIT counts a replica only from then on, see waitReplicaStream).
func StartClusterReplicas(t testing.TB, masters, perMaster int, args ...string) *Cluster {
	t.Helper()
	c := StartCluster(t, masters, args...)
	base := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000"}
	for i, m := range c.Masters {
		m.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0")
		id := m.Do("CLUSTER", "MYID")
		var reps []*Server
		for range perMaster {
			r := start(t, true, append(base, args...))
			r.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(m.port), strconv.Itoa(m.bus))
			reps = append(reps, r)
		}
		c.Replicas = append(c.Replicas, reps)
		for _, r := range reps {
			c.replicate(r, id, i)
		}
	}
	c.waitOK(20*time.Second, len(c.Masters)*(1+perMaster))
	for i, reps := range c.Replicas {
		for _, r := range reps {
			r.WaitReplicaLinkUp(10 * time.Second)
			c.Masters[i].waitReplicaOnline(r, 10*time.Second)
		}
		if len(reps) > 0 {
			c.Masters[i].waitReplicaStream(c.ownKey(i), len(reps), 10*time.Second)
		}
	}
	return c
}

// ownKey is a key of a slot that Masters[i] owns as started.
func (c *Cluster) ownKey(i int) string {
	c.t.Helper()
	for n := 0; ; n++ {
		if k := "redistest:replica-stream:" + strconv.Itoa(n); c.owner(k) == i {
			return k
		}
	}
}

// replicate makes r a replica of the master with node id, retrying while
// r does not know that node yet (the MEET spreads by gossip).
func (c *Cluster) replicate(r *Server, id string, i int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := Do(r.Addr(), time.Second, "CLUSTER", "REPLICATE", id)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: CLUSTER REPLICATE %s (master %d) on %s: %v", id, i, r.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

// Shard returns the index of the master that owns key's slot as started
// (Masters[i], Replicas[i]).
func (c *Cluster) Shard(key string) int {
	c.t.Helper()
	return c.owner(key)
}

// WaitPromoted waits until a replica of shard i reports role:master (its
// master died and it took over the slots) and every node says
// cluster_state:ok, failing the test after timeout; it returns that
// replica.
func (c *Cluster) WaitPromoted(i int, timeout time.Duration) *Server {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range c.Replicas[i] {
			info, err := Do(r.Addr(), time.Second, "INFO", "replication")
			state, err2 := Do(r.Addr(), time.Second, "CLUSTER", "INFO")
			if err == nil && err2 == nil && strings.Contains(info, "role:master") && strings.Contains(state, "cluster_state:ok") {
				return r
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: no replica of shard %d promoted within %v", i, timeout)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

// Addrs returns the masters' addresses, for a client's seed list.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		out[i] = m.Addr()
	}
	return out
}

// Slot returns the hash slot of key (CLUSTER KEYSLOT, asked of a live
// master, so the hash-tag rule is Redis's own).
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	for _, m := range c.Masters {
		if v, err := Do(m.Addr(), 5*time.Second, "CLUSTER", "KEYSLOT", key); err == nil {
			n, err := strconv.Atoi(v)
			if err != nil {
				c.t.Fatalf("redistest: CLUSTER KEYSLOT %q: %q: %v", key, v, err)
			}
			return n
		}
	}
	c.t.Fatalf("redistest: CLUSTER KEYSLOT %q: no master answers", key)
	return -1
}

// Owner returns the master that owns key's slot (as StartCluster assigned
// the slots).
func (c *Cluster) Owner(key string) *Server {
	c.t.Helper()
	return c.Masters[c.owner(key)]
}

// NotOwner returns a master that does not own key's slot (nil with a single
// master).
func (c *Cluster) NotOwner(key string) *Server {
	c.t.Helper()
	if len(c.Masters) < 2 {
		return nil
	}
	return c.Masters[(c.owner(key)+1)%len(c.Masters)]
}

func (c *Cluster) owner(key string) int {
	slot := c.Slot(key)
	for i, r := range c.ranges {
		if slot >= r[0] && slot <= r[1] {
			return i
		}
	}
	c.t.Fatalf("redistest: slot %d of %q is in no range", slot, key)
	return -1
}

// waitOK polls CLUSTER INFO on every node until each says
// cluster_state:ok and knows nodes nodes.
func (c *Cluster) waitOK(timeout time.Duration, nodes int) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	want := fmt.Sprintf("cluster_known_nodes:%d", nodes)
	all := slices.Clone(c.Masters)
	for _, reps := range c.Replicas {
		all = append(all, reps...)
	}
	for {
		var notOK []string
		for _, m := range all {
			info, err := Do(m.Addr(), time.Second, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
				notOK = append(notOK, m.Addr())
			}
		}
		if len(notOK) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: cluster not ok after %v: %v", timeout, notOK)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}
