package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastPolicy retries quickly: the tests wait for real receivers.
var fastPolicy = Policy{Attempts: 3, Timeout: 2 * time.Second, Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Total: 5 * time.Second}

// post is one request a receiver got.
type post struct {
	header http.Header
	body   []byte
}

// receiver is an httptest server that answers each POST with the next of
// codes (the last one repeated) and hands every request to got.
type receiver struct {
	srv  *httptest.Server
	got  chan post
	hits atomic.Int32
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	r := &receiver{got: make(chan post, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		n := int(r.hits.Add(1))
		r.got <- post{req.Header.Clone(), body}
		w.WriteHeader(codes[min(n, len(codes))-1])
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// next returns the next request, failing the test if none comes.
func (r *receiver) next(t *testing.T) post {
	t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the receiver")
		return post{}
	}
}

func secretFile(t *testing.T, secret string) string {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

var sample = Event{Kind: config.EventFailing, Job: "backup", Slot: time.Unix(1_800_000_000, 0), Node: "n1", RunID: "r1",
	Result: ledger.ResultFailure, ExitCode: 2, Reason: "run failed", At: time.Unix(1_800_000_005, 0)}

func TestDeliver_SignedJSON(t *testing.T) {
	rcv := newReceiver(t, 200)
	r, err := NewReceiver(config.Webhook{URL: rcv.srv.URL + "/hook", Events: config.NotifyEvents, Format: config.FormatJSON,
		SecretFile: secretFile(t, "s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Deliver(t.Context(), http.DefaultClient, sample, fastPolicy); n != 1 || err != nil {
		t.Fatalf("Deliver: got %d attempts, %v, want 1, nil", n, err)
	}
	p := rcv.next(t)
	ts, sig := p.header.Get(HeaderTimestamp), p.header.Get(HeaderSignature)
	if !Verify([]byte("s3cret"), ts, p.body, sig) || !strings.HasPrefix(sig, "sha256=") {
		t.Errorf("signature %q over timestamp %q does not verify with the secret", sig, ts)
	}
	var got map[string]any
	if err := json.Unmarshal(p.body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"event": "failing", "job": "backup", "slot": float64(1_800_000_000), "slot_time": "2027-01-15T08:00:00Z",
		"node": "n1", "run_id": "r1", "result": "failure", "exit_code": float64(2), "reason": "run failed"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("body %s: got %v, want %v", k, got[k], v)
		}
	}
	if strings.Contains(string(p.body), "s3cret") {
		t.Errorf("the body holds the secret: %s", p.body)
	}
}

func TestDeliver_Slack(t *testing.T) {
	rcv := newReceiver(t, 200)
	r := Receiver{URL: rcv.srv.URL, Events: config.NotifyEvents, Format: config.FormatSlack}
	if _, err := r.Deliver(t.Context(), http.DefaultClient, sample, fastPolicy); err != nil {
		t.Fatal(err)
	}
	p := rcv.next(t)
	var got map[string]string
	if err := json.Unmarshal(p.body, &got); err != nil || len(got) != 1 || !strings.Contains(got["text"], `job "backup" is failing`) {
		t.Errorf("slack body: got %s (%v), want {\"text\": …job \"backup\" is failing…}", p.body, err)
	}
	if p.header.Get(HeaderSignature) != "" {
		t.Errorf("unsigned receiver got a signature header")
	}
}

func TestDeliver_RetriesOn500ThenSucceeds(t *testing.T) {
	rcv := newReceiver(t, 500, 503, 200)
	r := Receiver{URL: rcv.srv.URL, Events: config.NotifyEvents, Format: config.FormatJSON}
	if n, err := r.Deliver(t.Context(), http.DefaultClient, sample, fastPolicy); n != 3 || err != nil {
		t.Fatalf("Deliver: got %d attempts, %v, want 3, nil", n, err)
	}
}

func TestDeliver_GivesUpAfterTheBound(t *testing.T) {
	rcv := newReceiver(t, 503)
	r := Receiver{URL: rcv.srv.URL, Events: config.NotifyEvents, Format: config.FormatJSON}
	n, err := r.Deliver(t.Context(), http.DefaultClient, sample, fastPolicy)
	if n != fastPolicy.Attempts || err == nil || rcv.hits.Load() != int32(fastPolicy.Attempts) {
		t.Fatalf("Deliver: got %d attempts (%d hits), %v, want %d and an error", n, rcv.hits.Load(), err, fastPolicy.Attempts)
	}
}

func TestDeliver_NoRetryOnRefusal(t *testing.T) {
	for _, code := range []int{404, 302} {
		rcv := newReceiver(t, code)
		r := Receiver{URL: rcv.srv.URL, Events: config.NotifyEvents, Format: config.FormatJSON}
		if n, err := r.Deliver(t.Context(), NewClient(), sample, fastPolicy); n != 1 || err == nil {
			t.Errorf("answer %d: got %d attempts, %v, want 1 and an error", code, n, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@h:8443/hook?token=x#f": "https://h:8443/hook",
		"http://h/a/b":                          "http://h/a/b",
		"http://h:x/%zz":                        "(unparsable url)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (Receiver{URL: "https://h/services/T0/B0/tok", Format: config.FormatSlack}).Name(); got != "https://h" {
		t.Errorf("slack Name: got %q, want the host only", got)
	}
}

// startNotifier runs a notifier on the memory backend until the test
// ends; it returns it and its registry.
func startNotifier(t *testing.T, hooks ...config.Webhook) *Notifier {
	reg := prometheus.NewRegistry()
	n := New(Options{Log: zaptest.NewLogger(t), Outcomes: memory.NewMemory(), Registry: reg, Webhooks: hooks, Policy: fastPolicy})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return n
}

func hook(url string, events ...string) config.Webhook {
	if len(events) == 0 {
		events = config.NotifyEvents
	}
	return config.Webhook{URL: url, Events: events, Format: config.FormatJSON}
}

func finished(job string, slot int64, result string) actors.RunFinished {
	return actors.RunFinished{RunInfo: actors.RunInfo{Job: job, RunID: job + "-" + time.Unix(slot, 0).Format("150405"), Node: "n1",
		Slot: time.Unix(slot, 0)}, Cfg: config.Job{Name: job}, Result: result, Attempts: 1}
}

func kindOf(t *testing.T, p post) string {
	var m map[string]any
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatal(err)
	}
	return m["event"].(string) + " " + m["job"].(string)
}

// TestNotifier_Transitions: fail, fail, fail, succeed sends one failing
// and one recovered, in order.
func TestNotifier_Transitions(t *testing.T) {
	rcv := newReceiver(t, 200)
	n := startNotifier(t, hook(rcv.srv.URL))
	for i, res := range []string{"failure", "timeout", "failure", "success", "success"} {
		n.RunFinished(finished("j", int64(100+i), res))
	}
	for _, want := range []string{"failing j", "recovered j"} {
		if got := kindOf(t, rcv.next(t)); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	waitMetric(t, n.sent, "cronlock_notify_sent_total", "recovered", 1)
	if rcv.hits.Load() != 2 {
		t.Errorf("receiver got %d requests, want 2", rcv.hits.Load())
	}
}

// TestNotifier_DownReceiverDelaysNothing: a receiver that answers 503
// (slowly) gets its retries and gives up, while the notifier's methods
// return at once and another receiver gets every event.
func TestNotifier_DownReceiverDelaysNothing(t *testing.T) {
	release := make(chan struct{})
	var downHits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		downHits.Add(1)
		<-release
		w.WriteHeader(503)
	}))
	t.Cleanup(down.Close)
	t.Cleanup(func() { close(release) })
	up := newReceiver(t, 200)
	n := startNotifier(t, hook(down.URL), hook(up.srv.URL))
	start := time.Now()
	for i := range 5 {
		n.RunFinished(finished("job"+string(rune('a'+i)), 100, "failure"))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("RunFinished took %s for 5 runs, want no wait", d)
	}
	for range 5 {
		if got := kindOf(t, up.next(t)); !strings.HasPrefix(got, "failing ") {
			t.Errorf("up receiver: got %q, want failing", got)
		}
	}
	if downHits.Load() != 1 {
		t.Errorf("down receiver: %d requests while its first hangs, want 1", downHits.Load())
	}
}

func TestNotifier_DownReceiverGivesUp(t *testing.T) {
	rcv := newReceiver(t, 503)
	n := startNotifier(t, hook(rcv.srv.URL))
	n.RunFinished(finished("j", 100, "failure"))
	waitMetric(t, n.failures, "cronlock_notify_failures_total", "failing", 1)
	if got := rcv.hits.Load(); got != int32(fastPolicy.Attempts) {
		t.Errorf("receiver got %d requests, want %d (the attempts bound)", got, fastPolicy.Attempts)
	}
}

func TestNotifier_EventsFilterAndMissed(t *testing.T) {
	onlyMissed := newReceiver(t, 200)
	n := startNotifier(t, hook(onlyMissed.srv.URL, config.EventMissed))
	n.RunFinished(finished("j", 100, "failure"))
	n.Missed(&config.Job{Name: "j"}, "n2", []int64{200, 210}, "not_claimed")
	p := onlyMissed.next(t)
	var m map[string]any
	_ = json.Unmarshal(p.body, &m)
	if m["event"] != "missed" || m["slot"] != float64(200) || m["node"] != "n2" || m["missed_count"] != float64(2) {
		t.Errorf("got %s, want missed of slot 200 by n2, count 2", p.body)
	}
}

func TestNotifier_RunningLongOncePerRun(t *testing.T) {
	rcv := newReceiver(t, 200)
	n := startNotifier(t)
	job := &config.Job{Name: "slow", WarnAfter: 20 * time.Millisecond, Notify: config.Notify{Webhooks: []config.Webhook{hook(rcv.srv.URL)}}}
	fast := actors.RunInfo{Job: "slow", RunID: "fast", Node: "n1", Slot: time.Unix(100, 0)}
	n.RunStarted(fast, job, time.Now())
	n.RunFinished(actors.RunFinished{RunInfo: fast, Cfg: *job, Result: ledger.ResultSuccess})
	slow := actors.RunInfo{Job: "slow", RunID: "slow", Node: "n1", Slot: time.Unix(110, 0)}
	n.RunStarted(slow, job, time.Now())
	p := rcv.next(t)
	var m map[string]any
	_ = json.Unmarshal(p.body, &m)
	if m["event"] != "running_long" || m["run_id"] != "slow" {
		t.Errorf("got %s, want running_long of run slow", p.body)
	}
	waitMetric(t, n.sent, "cronlock_notify_sent_total", "running_long", 1)
	n.RunFinished(actors.RunFinished{RunInfo: slow, Cfg: *job, Result: ledger.ResultSuccess})
	waitMetric(t, n.sent, "cronlock_notify_sent_total", "running_long", 1)
	if rcv.hits.Load() != 1 {
		t.Errorf("receiver got %d requests, want 1 running_long", rcv.hits.Load())
	}
}

// waitMetric waits until c{event} has value want.
func waitMetric(t *testing.T, c *prometheus.CounterVec, name, event string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := promtest.Value(t, c, name, "event", event)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %v, want %v", event, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
