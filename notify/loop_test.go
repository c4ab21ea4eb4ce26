package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The tests of this file check the notifier's timing inside synctest
// bubbles: the backend is a fake (a slow Redis is a RecordOutcome that
// waits for its deadline) and the receiver an in-memory http.RoundTripper.

// sink is a receiver that records the events posted to it ("kind run_id")
// and answers 200 at once.
type sink struct {
	mu  sync.Mutex
	got []string
}

func (s *sink) RoundTrip(req *http.Request) (*http.Response, error) {
	var m map[string]any
	b, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(b, &m)
	s.mu.Lock()
	id, _ := m["run_id"].(string) // none for missed
	s.got = append(s.got, m["event"].(string)+" "+id)
	s.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func (s *sink) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// stuckBackend is a backend that does not answer: RecordOutcome returns
// when its deadline (outcomeTimeout) passes.
type stuckBackend struct{}

func (stuckBackend) RecordOutcome(ctx context.Context, _ string, _ int64, _ string, _ bool) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// newBubbled returns a notifier on rec whose every alert goes to a sink,
// and its logs. It does not run it.
func newBubbled(rec Outcomes) (*Notifier, *sink, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	s := &sink{}
	n := New(Options{Log: zap.New(core), Outcomes: rec, Registry: prometheus.NewRegistry(), Policy: fastPolicy,
		Webhooks: []config.Webhook{hook("http://127.0.0.1:9/hook")}, Client: &http.Client{Transport: s}})
	return n, s, logs
}

// run runs n until the bubble's test ends.
func run(t *testing.T, n *Notifier) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func slowJob(name string, warn time.Duration) (*config.Job, actors.RunInfo) {
	return &config.Job{Name: name, WarnAfter: warn}, actors.RunInfo{Job: name, RunID: name + "-1", Node: "n1", Slot: time.Unix(100, 0)}
}

func TestNotifier_SlowOutcomeDelaysNoRunningLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, s, _ := newBubbled(stuckBackend{})
		run(t, n)
		n.RunFinished(finished("a", 100, ledger.ResultFailure)) // its RecordOutcome hangs for outcomeTimeout
		long, info := slowJob("b", time.Second)
		n.RunStarted(info, long, time.Now())
		short, sinfo := slowJob("c", time.Second)
		n.RunStarted(sinfo, short, time.Now())
		time.Sleep(time.Second / 2)
		n.RunFinished(actors.RunFinished{RunInfo: sinfo, Cfg: *short, Result: ledger.ResultSuccess})
		time.Sleep(time.Second/2 + time.Millisecond)
		synctest.Wait()
		if got := s.events(); len(got) != 1 || got[0] != "running_long b-1" {
			t.Errorf("at warn_after, with RecordOutcome hanging: got %q, want [running_long b-1] at once", got)
		}
		time.Sleep(outcomeTimeout)
		synctest.Wait()
		if got := promtest.Value(t, n.failures, "cronlock_notify_failures_total", "event", "outcome"); got != 1 {
			t.Errorf("after the outcome's timeout: got %v outcome failures, want 1", got)
		}
		if got := s.events(); len(got) != 1 {
			t.Errorf("got %q, want the one running_long (none for c, which finished)", got)
		}
	})
}

// A finish the full inbox does not take is counted and logged, and its
// run, whose start was still in the inbox, gets no running_long.
func TestNotifier_LostFinishSendsNoRunningLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, s, logs := newBubbled(stuckBackend{})
		job, info := slowJob("b", time.Minute)
		n.RunStarted(info, job, time.Now())
		for len(n.inbox) < inboxSize { // the loop does not run yet: the inbox fills
			n.Missed(&config.Job{Name: "m"}, "n1", []int64{100}, "not_claimed")
		}
		n.Missed(&config.Job{Name: "m"}, "n1", []int64{100}, "not_claimed")
		n.RunFinished(actors.RunFinished{RunInfo: info, Cfg: *job, Result: ledger.ResultSuccess})
		for _, event := range []string{"outcome", config.EventMissed} {
			if got := promtest.Value(t, n.failures, "cronlock_notify_failures_total", "event", event); got != 1 {
				t.Errorf("%s facts dropped: got %v counted, want 1", event, got)
			}
		}
		if got := logs.FilterMessageSnippet("dropped").Len(); got != 2 {
			t.Errorf("got %d warnings of a dropped fact, want 2", got)
		}
		run(t, n)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		for _, e := range s.events() {
			if strings.HasPrefix(e, config.EventRunningLong) {
				t.Errorf("got %q for a run that finished, want none", e)
			}
		}
		if len(n.gone) != 0 {
			t.Errorf("the loop still remembers %d lost finishes after the inbox emptied, want 0", len(n.gone))
		}
	})
}

// A finish lost after its start was handled cancels the pending
// running_long as well.
func TestNotifier_LostFinishAfterStartSendsNoRunningLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, s, _ := newBubbled(stuckBackend{})
		job, info := slowJob("b", time.Minute)
		n.RunStarted(info, job, time.Now())
		run(t, n)
		synctest.Wait()        // the start is handled: its timer is set
		n.lost.add(info.RunID) // as RunFinished does when the inbox is full
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := s.events(); len(got) != 0 {
			t.Errorf("got %q for a run that finished, want nothing", got)
		}
	})
}
