package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/notify"
)

// alert is one POST a loopback receiver got.
type alert struct {
	event    string
	job      string
	slot     int64
	node     string
	verified bool // its signature verified with the receiver's secret
	at       time.Time
}

// alertReceiver is a webhook receiver in the test process: it keeps every
// POST, verifies its signature when it has a secret, and answers code
// after delay.
type alertReceiver struct {
	srv    *httptest.Server
	secret []byte
	mu     sync.Mutex
	got    []alert
}

func newAlertReceiver(t *testing.T, secret string, code int, delay time.Duration) *alertReceiver {
	r := &alertReceiver{secret: []byte(secret)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p struct {
			Event string `json:"event"`
			Job   string `json:"job"`
			Slot  int64  `json:"slot"`
			Node  string `json:"node"`
		}
		_ = json.Unmarshal(body, &p)
		ok := secret != "" && notify.Verify(r.secret, req.Header.Get(notify.HeaderTimestamp), body, req.Header.Get(notify.HeaderSignature))
		r.mu.Lock()
		r.got = append(r.got, alert{p.Event, p.Job, p.Slot, p.Node, ok, time.Now()})
		r.mu.Unlock()
		time.Sleep(delay)
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// alerts returns the POSTs of event received so far.
func (r *alertReceiver) alerts(event string) []alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []alert
	for _, a := range r.got {
		if a.event == event {
			out = append(out, a)
		}
	}
	return out
}

func writeSecret(t *testing.T, secret string) string {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestNotify_FailingAndRecoveredOnceInTheCluster is issue 35, "What it
// must show" 4: 3 nodes on one Redis run a job every second that fails 3
// times, then succeeds. The receiver gets exactly one signed "failing"
// and one signed "recovered" POST; a receiver that is down (it answers
// 503 after 1.5 s) gets retries, and every run still starts within a
// second of its slot.
func TestNotify_FailingAndRecoveredOnceInTheCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newAlertReceiver(t, "e2e-s3cret", 200, 0)
	down := newAlertReceiver(t, "", 503, 1500*time.Millisecond)
	dir := t.TempDir()
	counter, starts := filepath.Join(dir, "counter"), filepath.Join(dir, "starts")
	command := "n=$(($(cat " + shellQuote(counter) + " 2>/dev/null || echo 0)+1)); echo $n > " + shellQuote(counter) +
		`; echo "$CRONLOCK_SCHEDULED_TIME $(date +%s.%N) $n" >> ` + shellQuote(starts) + "; [ $n -gt 3 ]"
	job := map[string]any{"name": "flaky", "schedule": "* * * * * *", "command": command, "timeout": "5s",
		"notify": map[string]any{"webhooks": []any{map[string]any{"url": down.srv.URL + "/down", "events": []string{"failing", "recovered"}}}}}
	cfg := redisConfig(srv.Addr(), job)
	cfg["notify"] = map[string]any{"webhooks": []any{map[string]any{"url": up.srv.URL + "/hook", "secret_file": writeSecret(t, "e2e-s3cret")}}}
	nodes, _ := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"}, nodeSpec{id: "n2"}, nodeSpec{id: "n3"})

	waitFor(t, 15*time.Second, "a failing and a recovered alert, and a retried one to the down receiver", func() bool {
		return len(up.alerts("recovered")) > 0 && len(down.alerts("failing")) >= 2
	})
	time.Sleep(time.Second) // any duplicate would come now
	stopAll(t, 10*time.Second, nodes...)

	for _, ev := range []string{"failing", "recovered"} {
		got := up.alerts(ev)
		if len(got) != 1 || !got[0].verified || got[0].job != "flaky" {
			t.Errorf("%s: got %+v, want exactly one POST for job flaky with a valid signature", ev, got)
		}
	}
	if f, r := up.alerts("failing"), up.alerts("recovered"); len(f) == 1 && len(r) == 1 && r[0].slot <= f[0].slot {
		t.Errorf("recovered slot %d is not after failing slot %d", r[0].slot, f[0].slot)
	}
	if n := len(down.alerts("failing")); n < 2 {
		t.Errorf("down receiver: got %d POSTs of failing, want retries (at least 2)", n)
	}
	data, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 4 {
		t.Fatalf("got %d runs, want at least 4:\n%s", len(lines), data)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		slot, err1 := time.Parse(time.RFC3339, f[0])
		start, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("run line %q: %v %v", l, err1, err2)
		}
		if d := time.Duration((start - float64(slot.Unix())) * float64(time.Second)); d > time.Second {
			t.Errorf("run %s of slot %s started %s after it, want within 1s (the down receiver must delay nothing)", f[2], f[0], d)
		}
	}
}

// TestNotify_MissedOnce: both nodes of a cluster are stopped across a slot
// of a `*/5 * * * * *` job and started again; the audit that records the
// slot missed (once in the cluster) sends exactly one "missed" POST for
// it.
func TestNotify_MissedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newAlertReceiver(t, "m1ss", 200, 0)
	job := map[string]any{"name": "five", "schedule": "*/5 * * * * *", "command": "true"}
	cfg := redisConfig(srv.Addr(), job)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "max_clock_skew": "1s"}
	cfg["notify"] = map[string]any{"webhooks": []any{map[string]any{"url": up.srv.URL, "secret_file": writeSecret(t, "m1ss"),
		"events": []string{"missed"}}}}
	cfgFile := writeConfig(t, cfg)
	specs := []nodeSpec{{id: "n1"}, {id: "n2"}}
	nodes, ready := startNodes(t, cfgFile, specs...)
	s0 := ceilSecond(ready) + 1
	s0 += (5 - s0%5) % 5
	waitFor(t, time.Until(time.Unix(s0+3, 0)), "a run of slot "+strconv.FormatInt(s0, 10), func() bool {
		for _, n := range nodes {
			for _, e := range n.Logs() {
				if e.is("run started", "five") && e.Slot() == s0 {
					return true
				}
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // `true` has ended and its finish is recorded
	stopAll(t, 10*time.Second, nodes...)
	if now := time.Now(); now.Unix() >= s0+5 {
		t.Fatalf("the nodes stopped at %s, after slot %d: the test overslept", now.Format("15:04:05.000"), s0+5)
	}
	// Back after slot s0+5's answer window (1 s) and the audit's grace
	// (2 s), before slot s0+10.
	sleepUntil(time.Unix(s0+8, 300_000_000))
	restarted, _ := startNodes(t, cfgFile, specs...)
	waitFor(t, 6*time.Second, "a missed alert", func() bool { return len(up.alerts("missed")) > 0 })
	time.Sleep(1500 * time.Millisecond) // the other node's audits: any duplicate would come now
	stopAll(t, 10*time.Second, restarted...)
	got := up.alerts("missed")
	if len(got) != 1 || got[0].slot != s0+5 || !got[0].verified || got[0].job != "five" {
		t.Errorf("missed: got %+v, want exactly one signed POST for slot %d of job five", got, s0+5)
	}
}
