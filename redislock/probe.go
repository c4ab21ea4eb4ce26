package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ErrClusterNode means that a client made for a standalone server (one
// address, no sentinel_master) talks to a node of a Redis Cluster: the node
// redirects keys it does not own (MOVED), so claims of those jobs fail, and
// the ones it owns would stop working at the next resharding or failover.
// The fix is to list the cluster's nodes in redis.addresses.
var ErrClusterNode = errors.New("redislock: the server is a Redis Cluster node, but the client treats it as a standalone server")

// probeScript is the readiness probe: a read-only script on a job key, run
// like every claim (EVALSHA, EVAL on NOSCRIPT) on the server that owns the
// key. It fails where a claim would: scripting disabled or renamed, the
// owning shard down, a Cluster node that redirects the key. Unlike the
// claim it is retryable (it writes nothing): like PING, a call that meets
// a connection just closed reconnects and retries within its deadline, so
// Redis coming back is seen at once rather than at the next check.
//
//	KEYS: 1 a job's lease key; returns 0 or 1
var probeScript = newScript(`return redis.call("EXISTS", KEYS[1])`, true)

// infoScript returns INFO memory, persistence, cluster and replication of
// the server that owns KEYS[1] (a script is routed by its key; INFO itself
// has none). One section per call works on Redis 6 as well as 7. Retryable:
// it writes nothing.
//
//	KEYS: 1 a job's lease key; returns {memory, persistence, cluster, replication}
var infoScript = newScript(`
return {redis.call("INFO", "memory"), redis.call("INFO", "persistence"), redis.call("INFO", "cluster"),
  redis.call("INFO", "replication")}
`, true)

// probeSet caches the probe keys of one job list and one slot map.
type probeSet struct {
	jobs  []string
	slots *slotMap // nil: keys are one per cluster slot in use
	keys  []string
	// shard and jobsOn, by probe key: the master it is on ("" when no
	// slot map is known) and how many of jobs have their keys there.
	shard  map[string]string
	jobsOn map[string]int
}

// ShardError is a probe that failed on one shard of a Cluster whose jobs'
// keys spread over several: a claim of the Jobs jobs whose keys Master
// serves (of Total) would fail, while the other shards' jobs may still
// run. Err is the probe's error.
type ShardError struct {
	Master      string // "host:port" as CLUSTER SLOTS last named it; "" if unknown
	Jobs, Total int
	Err         error
}

func (e *ShardError) Error() string {
	return fmt.Sprintf("shard %s (%d of %d jobs): %v", e.Master, e.Jobs, e.Total, e.Err)
}
func (e *ShardError) Unwrap() error { return e.Err }

// slotMapTTL is how long a Cluster's slot map (CLUSTER SLOTS) is used
// before it is read again; a failed probe reads it again at once.
const slotMapTTL = 30 * time.Second

// slotMap is a Cluster's hash slots by master, as CLUSTER SLOTS told.
type slotMap struct {
	read   time.Time
	ranges []slotRange
}

type slotRange struct {
	lo, hi uint16
	master string // "host:port" of the master serving lo..hi
}

// masterOf returns the master serving slot, "" when no master serves it.
func (m *slotMap) masterOf(slot uint16) string {
	for _, r := range m.ranges {
		if slot >= r.lo && slot <= r.hi {
			return r.master
		}
	}
	return ""
}

// probeKeys returns the keys the probes run on: for a standalone or
// Sentinel server one key (the first job's lease key, or P+"probe" without
// jobs); in Cluster mode the lease key of one job per master that serves a
// job's keys (jobs whose slot no master serves get a key each, so that the
// probe sees the CLUSTERDOWN), so every shard that owns a job's keys is
// probed once. With a hash-tagged key prefix that is one key. The slot map
// is read with CLUSTER SLOTS (one round trip) at most every slotMapTTL and
// after a failed probe; when it cannot be read, the last one read is used,
// and without any, one key per cluster slot in use. The result is cached
// until the job list or the slot map changes. Safe for concurrent use.
func (r *Redis) probeKeys(ctx context.Context, jobs []string) []string {
	if r.c.Mode() != rueidis.ClientModeCluster || len(jobs) == 0 {
		if len(jobs) == 0 {
			return []string{r.prefix + "probe"}
		}
		return []string{r.key("job", jobs[0])}
	}
	var sm *slotMap
	if r.tagIDs {
		sm = r.clusterSlots(ctx)
	}
	if c := r.probes.Load(); c != nil && c.slots == sm && slices.Equal(c.jobs, jobs) {
		return c.keys
	}
	ps := &probeSet{jobs: slices.Clone(jobs), slots: sm, shard: map[string]string{}, jobsOn: map[string]int{}}
	keyOf := map[string]string{} // group → its probe key
	for _, j := range jobs {
		k := r.key("job", j)
		cmd := r.c.B().Exists().Key(k).Build() // not sent: only its slot is read
		s := cmd.Slot()
		group, master := strconv.Itoa(int(s)), ""
		if sm != nil {
			if m := sm.masterOf(s); m != "" {
				group, master = m, m
			}
		}
		pk, ok := keyOf[group]
		if !ok {
			pk, keyOf[group] = k, k
			ps.keys = append(ps.keys, k)
			ps.shard[k] = master
		}
		ps.jobsOn[pk]++
	}
	r.probes.Store(ps)
	return ps.keys
}

// shardError wraps err, a failed probe on key, as a *ShardError when the
// jobs' keys are on several shards; else it returns err.
func (r *Redis) shardError(key string, err error) error {
	ps := r.probes.Load()
	if ps == nil || len(ps.keys) < 2 || ps.jobsOn[key] == 0 {
		return err
	}
	return &ShardError{Master: ps.shard[key], Jobs: ps.jobsOn[key], Total: len(ps.jobs), Err: err}
}

// clusterSlots returns the slot map, read again when it is older than
// slotMapTTL or was dropped by a failed probe; the last one read when
// CLUSTER SLOTS fails (nil if none was ever read).
func (r *Redis) clusterSlots(ctx context.Context) *slotMap {
	old := r.slots.Load()
	if old != nil && time.Since(old.read) < slotMapTTL {
		return old
	}
	m, err := r.readClusterSlots(ctx)
	if err != nil {
		if old != nil {
			// Keep the old map, and try again at the next probe.
			r.slots.Store(&slotMap{read: old.read.Add(-slotMapTTL), ranges: old.ranges})
			return r.slots.Load()
		}
		return nil
	}
	r.slots.Store(m)
	return m
}

// readClusterSlots runs CLUSTER SLOTS: an array of [start, end, [host,
// port, id, …] of the master, replicas …].
func (r *Redis) readClusterSlots(ctx context.Context) (*slotMap, error) {
	entries, err := r.c.Do(ctx, r.c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("cluster slots: %w", err)
	}
	m := &slotMap{read: time.Now()}
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("cluster slots: malformed entry")
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err := errors.Join(err1, err2, err3); err != nil || len(node) < 2 {
			return nil, fmt.Errorf("cluster slots: malformed entry: %v", err)
		}
		host, err1 := node[0].ToString()
		port, err2 := node[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cluster slots: malformed node: %w", err)
		}
		m.ranges = append(m.ranges, slotRange{lo: uint16(lo), hi: uint16(hi),
			master: net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	return m, nil
}

// dropSlots makes the next probe read the slot map again (after a failed
// probe: the shard may have failed over, or the slots moved).
func (r *Redis) dropSlots() {
	if old := r.slots.Load(); old != nil {
		r.slots.Store(&slotMap{read: time.Time{}, ranges: old.ranges})
	}
}

// Probe checks that a claim of any of jobs could run now: it runs
// probeScript once per probe key (probeKeys: one round trip for a
// standalone or Sentinel server or a hash-tagged Cluster keyspace, one per
// master otherwise, plus CLUSTER SLOTS every slotMapTTL), one after the
// other, and returns the first error, wrapped as "probe KEY: …" (and, on
// a Cluster whose jobs spread over several shards, as a *ShardError naming
// the shard). A
// redirect (MOVED/ASK) on a client not in Cluster mode wraps ErrClusterNode.
// It blocks until answered or ctx's deadline (CallTimeout without one).
func (r *Redis) Probe(ctx context.Context, jobs []string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	for _, k := range r.probeKeys(ctx, jobs) {
		if err := probeScript.Exec(ctx, r.c, []string{k}, nil).Error(); err != nil {
			r.dropSlots()
			if merr := r.sentinelAsServer(ctx, err); merr != nil {
				return fmt.Errorf("probe %s: %w", k, merr)
			}
			return fmt.Errorf("probe %s: %w", k, r.shardError(k, r.redirect(explainScript(err))))
		}
	}
	return nil
}

// ServerInfo reads INFO memory, persistence and cluster from the server that
// owns each probe key (see Probe), one round trip per key. A server that
// reports cluster_enabled:1 to a client not in Cluster mode, or redirects
// the key, gives an error wrapping ErrClusterNode. Where INFO is refused
// (renamed, or denied by an ACL) the error is the server's (a
// *rueidis.RedisError, see rueidis.IsRedisErr). Blocks like Probe.
func (r *Redis) ServerInfo(ctx context.Context, jobs []string) ([]ServerInfo, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	var out []ServerInfo
	for _, k := range r.probeKeys(ctx, jobs) {
		secs, err := infoScript.Exec(ctx, r.c, []string{k}, nil).AsStrSlice()
		if err == nil && len(secs) != 4 {
			err = fmt.Errorf("script returned %d sections, want 4", len(secs))
		}
		if err != nil {
			return nil, fmt.Errorf("server info %s: %w", k, r.redirect(explainScript(err)))
		}
		f := ParseInfo(strings.Join(secs, "\n"))
		info := serverInfo(k, f)
		if info.ClusterEnabled && r.c.Mode() != rueidis.ClientModeCluster {
			return nil, fmt.Errorf("server info %s: %w (cluster_enabled:1)", k, ErrClusterNode)
		}
		out = append(out, info)
	}
	return out, nil
}

// SavePoints returns the RDB save points (CONFIG GET save, e.g. "3600 1
// 300 100"; "" means RDB snapshots are off). Managed Redis often disables
// CONFIG: the error is then the server's (*rueidis.RedisError). In Cluster
// mode the node that answers is any one of them. One round trip; blocks
// like Probe.
func (r *Redis) SavePoints(ctx context.Context) (string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	m, err := r.c.Do(ctx, r.c.B().ConfigGet().Parameter("save").Build()).AsStrMap()
	if err != nil {
		return "", fmt.Errorf("config get save: %w", err)
	}
	v, ok := m["save"]
	if !ok {
		return "", errors.New("config get save: no value for save")
	}
	return v, nil
}

// sentinelAsServer returns an error wrapping ErrModeMismatch when a
// standalone client's server refused a script (err, a server reply) and
// INFO server says redis_mode:sentinel: a sentinel's address given without
// sentinel_master. nil otherwise. One round trip; called only after a
// failed probe.
func (r *Redis) sentinelAsServer(ctx context.Context, err error) error {
	if _, ok := rueidis.IsRedisErr(err); !ok || r.mode != ModeStandalone {
		return nil
	}
	text, ierr := r.c.Do(ctx, r.c.B().Info().Section("server").Build()).ToString()
	if ierr != nil || ParseInfo(text)["redis_mode"] != "sentinel" {
		return nil
	}
	return fmt.Errorf("%w: the server is a Redis Sentinel, used as a standalone server (%w); set "+
		"redis.sentinel_master to the master set's name and list the sentinels in redis.addresses", ErrModeMismatch, err)
}

// redirect wraps a MOVED or ASK reply on a client not in Cluster mode
// with ErrClusterNode; other errors are returned as they are.
func (r *Redis) redirect(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && r.c.Mode() != rueidis.ClientModeCluster {
		_, moved := re.IsMoved()
		_, ask := re.IsAsk()
		if moved || ask {
			return fmt.Errorf("%w (%w)", ErrClusterNode, err)
		}
	}
	return err
}
