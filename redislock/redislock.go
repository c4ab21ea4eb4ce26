// Package redislock is the Redis backend of the exactly-once protocol
// (docs/protocol.md): it implements ledger.Locker through rueidis, and
// holds the Redis half of the cluster's records (heartbeats, run
// requests, the audited pause and events). It imports the protocol's
// types from package ledger and nothing of the runtime.
//
// The daemon runs it as a Backend (Open, backend.go): the client, created
// at once for a standalone server and lazily for Sentinel and Cluster
// (Lazy, lazy.go), the policy guard in front of claims and audits
// (guard.go), and the readiness check (CheckReady, readiness.go: the
// probe, the TLS diagnosis, the server's settings, the clock skew).
//
// It is synchronous: each call of Redis is one round trip (CheckReady
// makes a few), and it owns no goroutines or timers.
// Renewing the lease every TTL/3 is the job of actors.Lease.
//
// Keys, with P the key prefix (default "cronlock:") and J the job name:
//
//	P+"job:"+J      string, PX ttl   the lease; value "nodeID:uuid" of the holder
//	P+"state:"+J    hash             fence, seq, runs, since, lost_at, audited_to, trimmed_to, last
//	P+"occ:"+J      hash             the ledger: occurrence id → record (JSON)
//	P+"occidx:"+J   sorted set       occurrence ids by slot
//	P+"paused:"+J   string           present ⇒ job paused cluster-wide
//	P+"node:"+ID    string, PX ttl   a daemon's heartbeat record (node.go, package cluster)
//
// In Cluster mode with a prefix without a hash tag, J and ID are the keys'
// hash tag: P+"job:{"+J+"}" and so on (keys.go, docs/protocol.md "Redis
// keys").
package redislock

import (
	"github.com/cronlock/cronlock/ledger"
)

// DefaultKeyPrefix is the key prefix when Options.KeyPrefix is empty.
const DefaultKeyPrefix = "cronlock:"

var _ ledger.Locker = (*Redis)(nil)
