package redislock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

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

// A server that answers reads but refuses writes (min-replicas-to-write
// unmet: NOREPLICAS; the same for READONLY, OOM, MISCONF) passes the
// read-only probe, but claims fail: once a claim has been refused so, the
// node is not ready and its state names the server's answer; the next
// claim that succeeds makes it ready again.
func TestHealth_WriteRefusedNotReady(t *testing.T) {
	srv := redistest.StartWith(t, "--min-replicas-to-write", "1")
	hh := newHealthHarness(t, fmt.Sprintf("{address: %q}", srv.Addr()))
	hh.check(t, true)
	hh.expect(t, "before any claim", true, "up")
	if got := hh.claimReason(t); !strings.Contains(got, "NOREPLICAS") {
		t.Fatalf("claim: got %s, want the NOREPLICAS error", got)
	}
	hh.check(t, false)
	hh.expect(t, "after a claim refused NOREPLICAS", false, "failing: NOREPLICAS")
	srv.Do("CONFIG", "SET", "min-replicas-to-write", "0")
	if got := hh.claimReason(t); got != "claimed" {
		t.Fatalf("claim after CONFIG SET min-replicas-to-write 0: got %s, want claimed", got)
	}
	hh.check(t, false)
	hh.expect(t, "after a claim succeeded", true, "up")

	// The same through the audit, which a node whose slots are all claimed
	// elsewhere still writes with every second.
	srv.Do("CONFIG", "SET", "min-replicas-to-write", "1")
	if got := hh.claimReason(t); !strings.Contains(got, "NOREPLICAS") {
		t.Fatalf("claim: got %s, want the NOREPLICAS error", got)
	}
	hh.check(t, false)
	hh.expect(t, "after a second claim refused NOREPLICAS", false, "failing: NOREPLICAS")
	srv.Do("CONFIG", "SET", "min-replicas-to-write", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	read, err := hh.b.Audit(ctx, ledger.AuditRequest{Job: "backup"})
	if err != nil {
		t.Fatal(err)
	}
	hh.check(t, false)
	hh.expect(t, "after an audit that wrote nothing", false, "failing: NOREPLICAS")
	if a, err := hh.b.Audit(ctx, ledger.AuditRequest{Job: "backup", From: read.From, Slots: []int64{read.From + 1},
		Node: "n", Reason: "not_claimed: test"}); err != nil || a.Stale {
		t.Fatalf("audit with a slot: %+v, %v; want it written", a, err)
	}
	hh.check(t, false)
	hh.expect(t, "after an audit that wrote", true, "up")
}
