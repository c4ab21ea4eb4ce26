package engine

import (
	"fmt"
	"testing"

	"github.com/cronlock/cronlock/internal/redistest"
	"go.uber.org/zap/zapcore"
)

// With redis.min_replicas_acked above the replicas connected to the
// server, every won claim is skipped not_replicated, so the node is not
// ready (a claim would not lead to a run), says why in its state and one
// error line; once a replica connects it is ready again at the next check.
func TestHealth_TooFewReplicasNotReady(t *testing.T) {
	srv := redistest.Start(t)
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q, min_replicas_acked: 1, replica_ack_timeout: 100ms}", srv.Addr()))
	hh.check(t, true)
	hh.check(t, false)
	hh.expect(t, "no replica, min_replicas_acked 1", false, "not replicated: 0 of the 1 replicas")
	if n := hh.count(zapcore.ErrorLevel, "redis.min_replicas_acked"); n != 1 {
		t.Errorf("error lines after 2 checks: got %d, want 1", n)
	}
	redistest.StartReplica(t, srv)
	hh.check(t, false)
	hh.expect(t, "with a replica", true, "up")
	if hh.backs != 1 {
		t.Errorf("onBack calls once ready again: got %d, want 1", hh.backs)
	}
}
