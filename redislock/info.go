package redislock

import (
	"strconv"
	"strings"
)

// ServerInfo is what the engine's Redis policy guard reads from the server
// that owns a job's keys (docs/protocol.md, "Redis policy guard"): the
// fields of INFO memory, persistence and cluster that decide whether a
// claim is safe there, and whether the claimed-slot record survives a
// restart of that server.
type ServerInfo struct {
	// Key is the probe key whose owner answered (one per Cluster master
	// that serves job keys; one key in all for a standalone or Sentinel
	// server or a hash-tagged Cluster prefix).
	Key string
	// MaxMemory is maxmemory in bytes; 0 means no limit (Redis evicts
	// nothing, whatever the policy).
	MaxMemory int64
	// MaxMemoryPolicy is maxmemory_policy, e.g. "noeviction",
	// "allkeys-lru", "volatile-ttl" (Redis docs, "Key eviction").
	MaxMemoryPolicy string
	// AOF is aof_enabled:1 (appendonly yes).
	AOF bool
	// SnapshotSeen says that an RDB snapshot completed since the server
	// started (rdb_saves > 0, Redis ≥ 7.0, or rdb_last_bgsave_time_sec ≥ 0).
	// INFO does not show the configured save points (CONFIG GET save does),
	// so this is the only sign of RDB persistence where CONFIG is disabled.
	SnapshotSeen bool
	// ClusterEnabled is cluster_enabled:1: the server is a Redis Cluster
	// node.
	ClusterEnabled bool
	// Replicas is connected_slaves: the replicas connected to the server
	// (those a WAIT of redis.min_replicas_acked can count).
	Replicas int
}

// Evicts reports whether the server may evict keys under memory pressure:
// a memory limit is set and the policy is not noeviction. Any evicting
// policy can remove cronlock's keys: allkeys-* the state hash and the lease,
// volatile-* the lease (a key with a TTL).
func (i ServerInfo) Evicts() bool { return i.MaxMemory > 0 && i.MaxMemoryPolicy != "noeviction" }

// ParseInfo parses the text of an INFO reply: one "field:value" per line
// (CRLF or LF), "# Section" headers and blank lines skipped. A field seen
// twice keeps its last value.
func ParseInfo(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// serverInfo picks the guard's fields out of parsed INFO sections. A field
// that is missing or malformed keeps its zero value, except
// maxmemory_policy, which stays "" so that the guard can tell "not
// reported" from "noeviction".
func serverInfo(key string, f map[string]string) ServerInfo {
	num := func(k string, def int64) int64 {
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return def
		}
		return n
	}
	return ServerInfo{
		Key:             key,
		MaxMemory:       num("maxmemory", 0),
		MaxMemoryPolicy: f["maxmemory_policy"],
		AOF:             f["aof_enabled"] == "1",
		SnapshotSeen:    num("rdb_saves", 0) > 0 || num("rdb_last_bgsave_time_sec", -1) >= 0,
		ClusterEnabled:  f["cluster_enabled"] == "1",
		Replicas:        int(num("connected_slaves", 0)),
	}
}
