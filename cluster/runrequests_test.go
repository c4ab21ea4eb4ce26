package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

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
		if _, err := r.RequestRun(ctx, ledger.RunRequest{ID: job + "-1", Job: job, Requester: "ops@box", At: now}); err != nil {
			t.Fatal(err)
		}
	}
	tk := NewTaker(TakerOptions{Log: zap.NewNop(), Store: r, Node: "n1", Every: 20 * time.Millisecond,
		Held: func(job string) bool { return job == "mine" },
		Start: func(context.Context, string, bool, string) (func() RunOutcome, error) {
			return nil, errors.New("engine: job not configured on this node")
		}})
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	var st *ledger.RunStatus
	for st == nil || st.State != ledger.RunRefused {
		if time.Now().After(deadline) {
			t.Fatalf("status of mine-1: %+v, want refused within 5s", st)
		}
		time.Sleep(20 * time.Millisecond)
		st, _ = r.GetRunStatus(t.Context(), "mine", "mine-1")
	}
	if st.Node != "n1" || st.Skip != SkipNotHeld || st.Error == "" {
		t.Errorf("status %+v, want refused by n1 with the hand-over error", st)
	}
	if other, _ := r.GetRunStatus(t.Context(), "other", "other-1"); other == nil || other.State != ledger.RunPending {
		t.Errorf("request of a job not held: %+v, want still pending", other)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// newStore connects to Redis with o; the client is closed at the test's end.
func newStore(t *testing.T, o redislock.Options) *redislock.Redis {
	t.Helper()
	r, err := redislock.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// takeWithin starts a taker on r for job "mine" (Every and IdleEvery as
// given; the hand-over refuses, which is enough to see the request taken),
// makes request id after ready returns, and reports whether its status
// left pending within d. It stops the taker before it returns.
func takeWithin(t *testing.T, r *redislock.Redis, log *zap.Logger, every, idle time.Duration, ready func(), id string, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	tk := NewTaker(TakerOptions{Log: log, Store: r, Node: "n1", Every: every, IdleEvery: idle,
		Held: func(job string) bool { return job == "mine" },
		Start: func(context.Context, string, bool, string) (func() RunOutcome, error) {
			return nil, errors.New("refused by the test")
		}})
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	ready()
	if _, err := r.RequestRun(ctx, ledger.RunRequest{ID: id, Job: "mine", Requester: "ops@box", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, _ := r.GetRunStatus(t.Context(), "mine", id); st != nil && st.State != ledger.RunPending {
			return true
		}
	}
	return false
}

// A request is taken when it is announced, long before a poll is due
// (both poll intervals an hour: only the first read at start happens).
func TestTaker_AnnouncedRequestIsTakenAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	r := newStore(t, redislock.Options{Addresses: []string{srv.Addr()}})
	subscribed := func() {
		for deadline := time.Now().Add(5 * time.Second); srv.Do("PUBSUB", "NUMSUB", r.RunRequestChannel()) != r.RunRequestChannel()+"\n1"; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no subscriber to %s within 5s: %s", r.RunRequestChannel(), srv.Do("PUBSUB", "NUMSUB", r.RunRequestChannel()))
			}
		}
	}
	if !takeWithin(t, r, zap.NewNop(), time.Hour, time.Hour, subscribed, "announced-1", 2*time.Second) {
		t.Errorf("announced request not taken within 2s")
	}
}

// After a Redis restart the subscription comes back (rueidis re-subscribes,
// or the taker subscribes again): a request is taken without a poll.
func TestTaker_SubscriptionSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	r := newStore(t, redislock.Options{Addresses: []string{srv.Addr()}})
	subscribers := func() string { return srv.Do("PUBSUB", "NUMSUB", r.RunRequestChannel()) }
	resubscribed := func() {
		for deadline := time.Now().Add(5 * time.Second); subscribers() != r.RunRequestChannel()+"\n1"; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no subscriber within 5s: %s", subscribers())
			}
		}
		srv.Restart()
		for deadline := time.Now().Add(10 * time.Second); subscribers() != r.RunRequestChannel()+"\n1"; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no subscriber within 10s of the restart: %s", subscribers())
			}
		}
	}
	if !takeWithin(t, r, zap.NewNop(), time.Hour, time.Hour, resubscribed, "after-restart-1", 3*time.Second) {
		t.Errorf("request after the restart not taken within 3s")
	}
}

// A Redis user that may not subscribe (the channel is not in its ACL):
// the taker says so once, with the grant, and polls every Every, so the
// request is still taken (IdleEvery an hour would hide it otherwise).
func TestTaker_RefusedSubscriptionPollsEvery(t *testing.T) {
	srv := redistest.Start(t)
	srv.Do("ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "+@all")
	r := newStore(t, redislock.Options{Addresses: []string{srv.Addr()}, Username: "nochan", Password: "pw"})
	core, logs := observer.New(zap.DebugLevel)
	if !takeWithin(t, r, zap.New(core), 20*time.Millisecond, time.Hour, func() {}, "polled-1", 2*time.Second) {
		t.Errorf("request not taken within 2s by the poll every 20ms")
	}
	warns := logs.FilterMessageSnippet("run request announcements refused").All()
	if len(warns) != 1 || warns[0].Level != zap.WarnLevel || !strings.Contains(warns[0].Message, "+subscribe") {
		t.Errorf("got %d refusal lines (%v), want one warning naming the grant", len(warns), warns)
	}
}

func TestStatus(t *testing.T) {
	fin := status("id", "n1", RunOutcome{RunID: "run", Result: "failure", ExitCode: 2})
	if fin.State != ledger.RunFinished || fin.RunID != "run" || fin.ExitCode != 2 || fin.Result != "failure" {
		t.Errorf("finished: %+v", fin)
	}
	ref := status("id", "n1", RunOutcome{Skip: ledger.SkipOverlap})
	if ref.State != ledger.RunRefused || ref.Skip != "overlap" {
		t.Errorf("refused: %+v", ref)
	}
}
