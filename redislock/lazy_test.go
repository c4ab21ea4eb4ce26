package redislock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
)

// A Cluster-mode client cannot be created while no node answers: the lazy
// backend fails fast with ErrNotConnected instead of stopping the daemon,
// and backs off between attempts.
func TestLazyRedis_UnreachableFailsFastAndBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	l := &Lazy{opts: Options{Addresses: []string{dead, dead}, DialTimeout: time.Second}}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Ping(ctx); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("first Ping: got %v, want ErrNotConnected", err)
	}
	start := time.Now()
	if _, err := l.Claim(ctx, ledger.ClaimRequest{Job: "j", Slot: 1}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Claim during backoff: got %v, want ErrNotConnected", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Claim during backoff took %v, want immediate", d)
	}
}

// Once a node answers, the lazy backend creates the client and works.
func TestLazyRedis_ConnectsWhenReachable(t *testing.T) {
	srv := redistest.Start(t)
	l := &Lazy{opts: Options{Addresses: []string{srv.Addr()}}}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	c, err := l.Claim(ctx, ledger.ClaimRequest{Job: "j", Trigger: ledger.TriggerManual, Node: "n", RunID: "1", TTL: time.Second, Lease: true})
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("Claim: got %+v, %v; want claimed", c, err)
	}
}
