package api

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
)

// takenRequest returns a Redis on a fresh server with one run request of
// job "long" taken by node n2 at taken.
func takenRequest(t *testing.T, taken time.Time) (*redislock.Redis, ledger.RunRequest) {
	t.Helper()
	r, req, _ := takenRequestOn(t, taken)
	return r, req
}

// takenRequestOn is takenRequest that also returns the server.
func takenRequestOn(t *testing.T, taken time.Time) (*redislock.Redis, ledger.RunRequest, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	req := NewRunRequest("long", "ops@h", "", false, taken)
	if _, err := r.RequestRun(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got, err := r.TakeRun(t.Context(), "long", "n2", taken); err != nil || got == nil || got.ID != req.ID {
		t.Fatalf("TakeRun: got %v, %v, want request %s", got, err, req.ID)
	}
	return r, req, srv
}

// writeRecord writes n2's heartbeat record, started and last written at
// the given instants.
func writeRecord(t *testing.T, r *redislock.Redis, started, heartbeat time.Time) {
	t.Helper()
	rec, _ := json.Marshal(cluster.Record{NodeID: "n2", Instance: "i-" + started.String(), Hostname: "h", PID: 1, Started: started,
		Heartbeat: heartbeat, EveryMs: 1000, TTLMs: 3000})
	if _, _, err := r.SwapNode(t.Context(), "n2", rec, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.IndexNode(t.Context(), "n2", heartbeat); err != nil {
		t.Fatal(err)
	}
}

// A requester waiting for a run whose daemon died (SIGKILL: no outcome will
// ever be written) is told so within a few seconds, instead of waiting for
// the status to expire after an hour; one whose daemon lives keeps waiting.
func TestWaitRun_TakerGone(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name              string
		started, lastBeat time.Time
		record            bool
	}{
		{"no record", time.Time{}, time.Time{}, false},
		{"heartbeat stopped", now.Add(-time.Minute), now.Add(-10 * time.Second), true},
		{"restarted after taking it", now.Add(time.Second), now.Add(time.Second), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, req := takenRequest(t, now)
			if c.record {
				writeRecord(t, r, c.started, c.lastBeat)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			st, err := WaitRun(ctx, r, "long", req.ID)
			if !errors.Is(err, ErrTakerGone) {
				t.Fatalf("got %+v, %v, want ErrTakerGone", st, err)
			}
		})
	}
	t.Run("taker live", func(t *testing.T) {
		r, req := takenRequest(t, now)
		writeRecord(t, r, now.Add(-time.Minute), time.Now().Add(10*time.Second)) // live through the wait
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		if st, err := WaitRun(ctx, r, "long", req.ID); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %+v, %v, want to wait until the deadline", st, err)
		}
	})
}

// A status that Redis lost (FLUSHALL, a restart without persistence) while
// the requester waits is reported as lost, with the outcome unknown.
func TestWaitRun_StatusLost(t *testing.T) {
	r, req, srv := takenRequestOn(t, time.Now())
	srv.Do("FLUSHALL")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := WaitRun(ctx, r, "long", req.ID); !errors.Is(err, ErrStatusLost) {
		t.Fatalf("got %v, want ErrStatusLost", err)
	}
}
