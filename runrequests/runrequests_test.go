package runrequests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// On a real Redis: the taker leaves the requests of jobs it does not hold,
// and a request whose hand-over to the job actor fails (the job went away
// in a reload) is reported refused with the error, not left "taken"
// forever. (The run path itself: engine/runreq_test.go and e2e.)
func TestTaker_HeldJobsOnlyAndFailedHandOverReported(t *testing.T) {
	srv := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(t.Context())
	now := time.Now()
	for _, job := range []string{"mine", "other"} {
		if _, err := r.RequestRun(ctx, redislock.RunRequest{ID: job + "-1", Job: job, Requester: "ops@box", At: now}); err != nil {
			t.Fatal(err)
		}
	}
	tk := New(Options{Log: zap.NewNop(), Store: r, Node: "n1", Every: 20 * time.Millisecond,
		Held: func(job string) bool { return job == "mine" },
		Start: func(context.Context, string, actors.RunNow) error {
			return errors.New("engine: job not configured on this node")
		}})
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	var st *redislock.RunStatus
	for st == nil || st.State != redislock.RunRefused {
		if time.Now().After(deadline) {
			t.Fatalf("status of mine-1: %+v, want refused within 5s", st)
		}
		time.Sleep(20 * time.Millisecond)
		st, _ = r.GetRunStatus(t.Context(), "mine", "mine-1")
	}
	if st.Node != "n1" || st.Skip != SkipNotHeld || st.Error == "" {
		t.Errorf("status %+v, want refused by n1 with the hand-over error", st)
	}
	if other, _ := r.GetRunStatus(t.Context(), "other", "other-1"); other == nil || other.State != redislock.RunPending {
		t.Errorf("request of a job not held: %+v, want still pending", other)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestStatus(t *testing.T) {
	fin := status("id", "n1", actors.Ran{Finished: actors.RunFinished{RunInfo: actors.RunInfo{RunID: "run"}, Result: "failure", ExitCode: 2}})
	if fin.State != redislock.RunFinished || fin.RunID != "run" || fin.ExitCode != 2 || fin.Result != "failure" {
		t.Errorf("finished: %+v", fin)
	}
	ref := status("id", "n1", actors.Ran{Skip: actors.SkipOverlap})
	if ref.State != redislock.RunRefused || ref.Skip != "overlap" {
		t.Errorf("refused: %+v", ref)
	}
}
