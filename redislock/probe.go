package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
var probeScript = rueidis.NewLuaScriptRetryable(`return redis.call("EXISTS", KEYS[1])`)

// infoScript returns INFO memory, persistence and cluster of the server
// that owns KEYS[1] (a script is routed by its key; INFO itself has none).
// One section per call works on Redis 6 as well as 7. Retryable: it writes
// nothing.
//
//	KEYS: 1 a job's lease key; returns {memory, persistence, cluster}
var infoScript = rueidis.NewLuaScriptRetryable(`
return {redis.call("INFO", "memory"), redis.call("INFO", "persistence"), redis.call("INFO", "cluster")}
`)

// probeSet caches the probe keys of one job list.
type probeSet struct {
	jobs []string
	keys []string
}

// probeKeys returns the keys the probes run on: for a standalone or
// Sentinel server one key (the first job's lease key, or P+"probe" without
// jobs); in Cluster mode the lease key of one job per distinct cluster slot
// of the jobs' lease keys, so that every shard owning a job's keys is
// probed. Today key_prefix carries the hash tag and that is one key; with
// a tag per job name it is one per slot in use. The Cluster result is
// cached until the job list changes. Safe for concurrent use.
func (r *Redis) probeKeys(jobs []string) []string {
	if r.c.Mode() != rueidis.ClientModeCluster || len(jobs) == 0 {
		if len(jobs) == 0 {
			return []string{r.prefix + "probe"}
		}
		return []string{r.key("job", jobs[0])}
	}
	if c := r.probes.Load(); c != nil && slices.Equal(c.jobs, jobs) {
		return c.keys
	}
	seen := map[uint16]bool{}
	var keys []string
	for _, j := range jobs {
		k := r.key("job", j)
		cmd := r.c.B().Exists().Key(k).Build() // not sent: only its slot is read
		if s := cmd.Slot(); !seen[s] {
			seen[s] = true
			keys = append(keys, k)
		}
	}
	r.probes.Store(&probeSet{jobs: slices.Clone(jobs), keys: keys})
	return keys
}

// Probe checks that a claim of any of jobs could run now: it runs
// probeScript once per probe key (probeKeys: one round trip for a
// standalone, Sentinel or hash-tagged Cluster keyspace), one after the
// other, and returns the first error, wrapped as "probe KEY: …". A
// redirect (MOVED/ASK) on a client not in Cluster mode wraps ErrClusterNode.
// It blocks until answered or ctx's deadline (CallTimeout without one).
func (r *Redis) Probe(ctx context.Context, jobs []string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	for _, k := range r.probeKeys(jobs) {
		if err := probeScript.Exec(ctx, r.c, []string{k}, nil).Error(); err != nil {
			return fmt.Errorf("probe %s: %w", k, r.redirect(err))
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
	for _, k := range r.probeKeys(jobs) {
		secs, err := infoScript.Exec(ctx, r.c, []string{k}, nil).AsStrSlice()
		if err == nil && len(secs) != 3 {
			err = fmt.Errorf("script returned %d sections, want 3", len(secs))
		}
		if err != nil {
			return nil, fmt.Errorf("server info %s: %w", k, r.redirect(err))
		}
		f := ParseInfo(secs[0] + "\n" + secs[1] + "\n" + secs[2])
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
