package redislock

import (
	"testing"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger/ledgertest"
)

// TestOutput_Conformance runs the OutputStore cases against a real
// redis-server.
func TestOutput_Conformance(t *testing.T) {
	srv := redistest.Start(t)
	ledgertest.RunOutput(t, newRedis(t, srv.Addr(), Options{}))
}

// TestOutput_KeysShareTheJobsHashTag: in Cluster mode the output keys take
// the job's hash tag.
func TestOutput_KeysShareTheJobsHashTag(t *testing.T) {
	r := &Redis{prefix: "cl:", tagIDs: true}
	if got, want := r.outputKey("out", "backup", "1700000000"), "cl:out:{backup}:1700000000"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r.tagIDs = false
	if got, want := r.outputKey("live", "backup", "m3"), "cl:live:backup:m3"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestHooks_Conformance(t *testing.T) {
	srv := redistest.Start(t)
	ledgertest.RunHooks(t, newRedis(t, srv.Addr(), Options{}))
}

func TestKeptBound_Conformance(t *testing.T) {
	srv := redistest.Start(t)
	ledgertest.RunKeptBound(t, newRedis(t, srv.Addr(), Options{}))
}
