package ledger

import (
	"context"
	"time"
)

// Readiness is a backend's answer to "would a claim succeed now?"
// (/readyz, cronlock_redis_up, systemd STATUS=).
type Readiness struct {
	Ready bool
	// State says why in a few words: "up", "connecting", "unreachable",
	// "failing: <the server's error>", "unsafe: <why>", "not replicated: …",
	// "not verified", "tls: …", "up, slow: …", "up, stalled: …".
	State string
	// Skew is the local wall clock minus the backend's clock, when this
	// check measured it (SkewMeasured).
	Skew         time.Duration
	SkewMeasured bool
}

// ReadinessChecker is a backend that can tell whether a claim would
// succeed now. CheckReady may make round trips to the backend (bounded by
// its own timeouts and ctx) and is called by one goroutine at a time; jobs
// are the configured jobs' names, sorted.
type ReadinessChecker interface {
	CheckReady(ctx context.Context, jobs []string) Readiness
}
