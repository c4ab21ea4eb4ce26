package redislock

import "strings"

// Topology modes (Options.Mode, config redis.mode).
const (
	ModeStandalone = "standalone"
	ModeSentinel   = "sentinel"
	ModeCluster    = "cluster"
)

// HasHashTag reports whether key contains a Redis Cluster hash tag by
// Redis's own rule (Redis docs, "Cluster specification", hash tags): the
// first "{", then the first "}" after it, with at least one byte between
// them. Only that substring is hashed, so every key that starts with a
// prefix holding a tag lands in one hash slot.
func HasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}

// key is the one place Redis keys are built: P + kind + ":" + id, with P
// the key prefix, kind "job", "state", "history", "paused", "pending",
// "backfill", "events", "runs", "runstatus", "node", "node-jobs", … and id
// a job name or node id. In Cluster mode, unless the prefix already holds a
// hash tag, the id is the key's hash tag — P + kind + ":{" + id + "}" — so
// that the keys of one job (or of one node: "node" and "node-jobs") share
// a cluster slot (a script's keys must) and different jobs spread over the
// shards (docs/protocol.md, "Redis keys").
func (r *Redis) key(kind, id string) string {
	if r.tagIDs {
		return r.prefix + kind + ":{" + id + "}"
	}
	return r.prefix + kind + ":" + id
}

// globalKey is the one place the keys of cluster-wide records are built:
// the node index ("nodes", "index") and the pending run set
// ("pending-runs", "all"). Standalone, Sentinel, or Cluster with a tagged
// prefix: P + kind + ":" + name, like key. In Cluster mode with keys
// spread, the tag is deliberate: P + kind + ":{" + kind + ":" + name + "}".
// It holds a ":", which no job name has, so no job's keys hash with it by
// construction (an id-only tag, "{index}" or "{all}", would share the
// slot of a job or node of that name). Each such key is used alone, by
// single-key commands: no script or multi-key command names a global key
// together with a job's or node's key (that would be CROSSSLOT); see
// docs/protocol.md, "Redis keys".
func (r *Redis) globalKey(kind, name string) string {
	if r.tagIDs {
		return r.prefix + kind + ":{" + kind + ":" + name + "}"
	}
	return r.prefix + kind + ":" + name
}

// Key returns the Redis key of kind ("job", "state", "history", "paused",
// "pending", "backfill", "events", "runs", "runstatus", "node",
// "node-jobs") for id (a job name or node id), as the client builds it;
// for "nodes" and "pending-runs" the cluster-wide key (globalKey, id
// "index" and "all"): the layout depends on the topology the client
// connected to (Mode) and on whether the key prefix holds a hash tag. For
// tests and tools that read cronlock's keys directly.
func (r *Redis) Key(kind, id string) string {
	if kind == "nodes" || kind == "pending-runs" {
		return r.globalKey(kind, id)
	}
	return r.key(kind, id)
}

// Mode is the topology the client connected to: ModeStandalone,
// ModeSentinel or ModeCluster.
func (r *Redis) Mode() string { return r.mode }

// SpreadsKeys reports whether jobs' keys are spread over the cluster's
// shards (Cluster mode, a key prefix without a hash tag). False in Cluster
// mode with a tagged prefix: every key is in one slot, on one shard.
func (r *Redis) SpreadsKeys() bool { return r.tagIDs }
