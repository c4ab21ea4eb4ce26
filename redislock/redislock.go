// Package redislock implements actors.Locker, the claim and lease adapter
// of the exactly-once protocol (docs/protocol.md): Redis (through rueidis)
// for clusters, and Memory for a single node. It depends on the protocol
// types in package actors, never the reverse.
//
// Both backends are synchronous: each call is one Redis round trip (or one
// mutex-guarded map access) and neither owns goroutines or timers.
// Renewing the lease every TTL/3 is the job of actors.Lease.
//
// Keys, with P the key prefix (default "cronlock:") and J the job name:
//
//	P+"job:"+J      string, PX ttl   the lease; value "nodeID:uuid" of the holder
//	P+"state:"+J    hash             fence, seq, runs, since, lost_at, audited_to, trimmed_to, last
//	P+"occ:"+J      hash             the ledger: occurrence id → record (JSON)
//	P+"occidx:"+J   sorted set       occurrence ids by slot
//	P+"paused:"+J   string           present ⇒ job paused cluster-wide
//	P+"node:"+ID    string, PX ttl   a daemon's heartbeat record (node.go, package registry)
//
// In Cluster mode with a prefix without a hash tag, J and ID are the keys'
// hash tag: P+"job:{"+J+"}" and so on (keys.go, docs/protocol.md "Redis
// keys").
package redislock

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cronlock/cronlock/ledger"
)

// DefaultKeyPrefix is the key prefix when Options.KeyPrefix is empty.
const DefaultKeyPrefix = "cronlock:"

// JobState is what `cronlock status` shows for one job.
type JobState struct {
	Slot   int64 // the last run's slot, 0 if none (or a manual run)
	Fence  int64 // last fencing token handed out, 0 if none
	Seq    int64 // ledger writes (docs/protocol.md, R5)
	Paused bool
	// Pause is who paused the job, when, why and until (Redis backend;
	// empty fields for a pause written without them); nil when not paused
	// or on the memory backend.
	Pause       *Pause
	LeaseHolder string        // "" when no lease is held
	LeaseTTL    time.Duration // remaining lease time, 0 when not held
	Runs        int64         // successful runs counted for max_runs (state.runs), 0 if none
	Pending     int64         // the pending slot (overlap queue, replace), 0 if none
	// Last is the last recorded run, nil if the job never ran. Its
	// OutputTail is empty: read it with History.
	Last *ledger.RunRecord
}

// validateLease checks Renew and Release arguments (ttl < 0 means "unused").
func validateLease(job, owner string, ttl time.Duration) error {
	switch {
	case job == "":
		return errors.New("empty job name")
	case owner == "":
		return errors.New("empty lease owner")
	case ttl >= 0 && ttl < time.Millisecond:
		return fmt.Errorf("lease ttl %v below 1ms", ttl)
	}
	return nil
}

// tail returns the last MaxOutputTail bytes of s, starting at a rune
// boundary.
func tail(s string) string {
	if len(s) <= ledger.MaxOutputTail {
		return s
	}
	s = s[len(s)-ledger.MaxOutputTail:]
	for i := 0; i < utf8.UTFMax && i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// Both backends implement the actors' Locker.
var (
	_ ledger.Locker = (*Redis)(nil)
	_ ledger.Locker = (*Memory)(nil)
)
