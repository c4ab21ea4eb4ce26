package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// Tests of the control plane's HTTP API and of runs on the cluster
// (issue 12); helpers in control_test.go.

// apiDo sends an API request and returns the status and body.
func apiDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestControl_API is issue 12, "What it must show" 4, against two real
// daemons: GET /api/v1/jobs is what `cronlock status -json` prints; POST
// …/pause without the token and with a wrong one is 401, with it 200 and
// the job is paused cluster-wide (status shows it, a manual run elsewhere
// is refused); on the daemon without http.token_file it is 403. (The
// handlers' answers are checked against the OpenAPI document in
// api/api_test.go.)
func TestControl_API(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs := []map[string]any{{"name": "yearly", "schedule": "0 0 1 1 *", "command": "true"},
		{"name": "monthly", "schedule": "0 0 1 * *", "command": "true", "timezone": "Europe/Paris"}}
	withToken := controlConfig(srv.Addr(), jobs...)
	withToken["http"] = map[string]any{"token_file": tokenFile}
	cfg1, cfg2 := writeConfig(t, withToken), writeConfig(t, controlConfig(srv.Addr(), jobs...))
	l1, l2 := freeAddr(t), freeAddr(t)
	n1 := startNode(t, cfg1, withNodeID("a1"), withEnv("CRONLOCK_HTTP_LISTEN="+l1))
	n2 := startNode(t, cfg2, withNodeID("a2"), withEnv("CRONLOCK_HTTP_LISTEN="+l2))
	waitEngineRunning(n1)
	waitEngineRunning(n2)
	waitFor(t, 5*time.Second, "two live nodes", func() bool { return len(readNodes(t, cfg1).states()) == 2 })

	code, apiJobs := apiDo(t, "GET", "http://"+l1+"/api/v1/jobs", "", "")
	status, _, _ := cli(t, cfg1, "status", "-json")
	var a, s any
	if err := errors.Join(json.Unmarshal([]byte(apiJobs), &a), json.Unmarshal([]byte(status), &s)); code != 200 || err != nil ||
		!reflect.DeepEqual(a, s) {
		t.Errorf("GET /api/v1/jobs (%d, %v):\n%s\nwant what cronlock status -json prints:\n%s", code, err, apiJobs, status)
	}
	pause := "http://" + l1 + "/api/v1/jobs/yearly/pause"
	body := `{"for": "1h", "note": "db migration"}`
	for tok, want := range map[string]int{"": 401, "wrong": 401} {
		if code, resp := apiDo(t, "POST", pause, tok, body); code != want || !strings.Contains(resp, `"error"`) {
			t.Errorf("POST pause with token %q: %d %s, want %d with a JSON error", tok, code, resp, want)
		}
	}
	if code, resp := apiDo(t, "POST", "http://"+l2+"/api/v1/jobs/yearly/pause", "s3cret-token", body); code != 403 ||
		!strings.Contains(resp, "http.token_file") {
		t.Errorf("POST pause on the daemon without a token: %d %s, want 403 naming http.token_file", code, resp)
	}
	if out, _, _ := cli(t, cfg1, "status", "yearly", "-json"); strings.Contains(out, `"paused": true`) {
		t.Fatalf("refused pauses paused the job:\n%s", out)
	}
	if code, resp := apiDo(t, "POST", pause, "s3cret-token", body); code != 200 || !strings.Contains(resp, `"paused": true`) {
		t.Fatalf("POST pause with the token: %d %s, want 200", code, resp)
	}
	out, _, _ := cli(t, cfg2, "status", "yearly", "-json")
	if !strings.Contains(out, `"paused": true`) || !strings.Contains(out, `"note": "db migration"`) || !strings.Contains(out, `"by": "api(127.0.0.1)@a1"`) {
		t.Errorf("status (with the other node's config) after the API pause:\n%s\nwant paused by api(127.0.0.1)@a1 with the note", out)
	}
	if code, resp := apiDo(t, "POST", "http://"+l1+"/api/v1/jobs/yearly/run", "s3cret-token", `{"wait": true}`); code != 200 ||
		!strings.Contains(resp, `"state": "refused"`) || !strings.Contains(resp, `"skip": "paused"`) {
		t.Errorf("POST run (wait) of the paused job: %d %s; want 200, refused by a daemon as paused", code, resp)
	}
	if _, errs, code := cli(t, cfg2, "run", "yearly", "-local"); code != 1 || !strings.Contains(errs, "paused") {
		t.Errorf("cronlock run yearly after the API pause: exit %d, %s; want refused as paused", code, errs)
	}
	stopAll(t, 15*time.Second, n1, n2)
}

// TestControl_RunOnTheCluster is issue 12, "What it must show" 2: three
// daemons; `cronlock run JOB -wait` from a machine with no daemon (this
// test's own state directory and config) runs the job once, on one node,
// whose hook runs there; the command exits with the job's exit code (3);
// history shows trigger manual and the requester. Then 20 concurrent
// `run -wait` requests: each is run once or refused by the overlap
// policy (the lease is held), and the ledger holds exactly as many runs
// as requests that ran: no request ran twice.
func TestControl_RunOnTheCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger, hooks := newLedger(t), newLedger(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "job", "schedule": "0 0 1 1 *",
		"command":    `echo "$CRONLOCK_RUN_ID $CRONLOCK_NODE_ID $CRONLOCK_TRIGGER" >> ` + shellQuote(ledger) + `; exit 3`,
		"on_failure": `echo "$CRONLOCK_RUN_ID $CRONLOCK_NODE_ID" >> ` + shellQuote(hooks)}))
	nodes, _ := startNodes(t, cfg, nodeSpec{id: "r1"}, nodeSpec{id: "r2"}, nodeSpec{id: "r3"})
	waitFor(t, 5*time.Second, "three live nodes", func() bool { return len(readNodes(t, cfg).states()) == 3 })

	cmd := exec.Command(binary, "run", "job", "-wait", "-reason", "e2e", "-config", cfg)
	cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir(), "USER=tester")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stderr.String(), "taken by r") {
		t.Fatalf("cronlock run job -wait: exit %d, stderr %q; want 3 (the job's) and who took it", code, stderr.String())
	}
	runs := ledgerLines(t, ledger)
	if len(runs) != 1 || runs[0][2] != "manual" {
		t.Fatalf("ledger %q: want one manual run", runs)
	}
	waitFor(t, 5*time.Second, "the on_failure hook", func() bool { return len(ledgerLines(t, hooks)) == 1 })
	if h := ledgerLines(t, hooks)[0]; h[0] != runs[0][0] || h[1] != runs[0][1] {
		t.Errorf("hook ran as %q, want on the run's node with its run id %q", h, runs[0][:2])
	}
	out, _, _ := cli(t, cfg, "history", "job", "-json")
	host, _ := os.Hostname()
	if !strings.Contains(out, `"trigger": "manual"`) || !strings.Contains(out, `"requester": "tester@`+host+`"`) {
		t.Errorf("history -json: want trigger manual and requester tester@%s:\n%s", host, out)
	}

	const n = 20
	codes := make([]int, n)
	errs := make([]string, n)
	done := make(chan int, n)
	for i := range n {
		go func() {
			c := exec.Command(binary, "run", "job", "-wait", "-timeout", "15s", "-config", cfg)
			c.Env = append(c.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
			var e bytes.Buffer
			c.Stderr = &e
			_ = c.Run()
			codes[i], errs[i] = c.ProcessState.ExitCode(), e.String()
			done <- i
		}()
	}
	for range n {
		<-done
	}
	ran, refused := 0, 0
	for i := range n {
		switch {
		case codes[i] == 3:
			ran++
		case codes[i] == 1 && strings.Contains(errs[i], "lease held"):
			refused++
		default:
			t.Errorf("request %d: exit %d, %q; want 3 (ran) or 1 refused by the overlap policy", i, codes[i], errs[i])
		}
	}
	if got := len(ledgerLines(t, ledger)) - 1; got != ran {
		t.Errorf("%d requests ran, but the ledger has %d runs: a request ran twice (or a run went unreported)", ran, got)
	}
	if ran == 0 {
		t.Errorf("none of %d requests ran", n)
	}
	t.Logf("20 concurrent requests: %d ran, %d refused (overlap)", ran, refused)
	stopAll(t, 15*time.Second, nodes...)
}

// TestControl_RunNotTakenFailsClearly: a request for a job that the live
// daemon has disabled is taken by nobody; with -timeout 1s the command
// fails, says so, and the request never runs afterwards.
func TestControl_RunNotTakenFailsClearly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "job", "schedule": "0 0 1 1 *", "enabled": false,
		"command": ledgerCommand(ledger, "")}))
	nodes, _ := startNodes(t, cfg, nodeSpec{id: "t1"})
	waitFor(t, 5*time.Second, "a live node", func() bool { return len(readNodes(t, cfg).states()) == 1 })
	start := time.Now()
	_, errs, code := cli(t, cfg, "run", "job", "-timeout", "1s")
	if code != 1 || !strings.Contains(errs, "no daemon took the run request of job within 1s; it was withdrawn") ||
		time.Since(start) > 5*time.Second {
		t.Errorf("run -timeout 1s: exit %d, %q after %v; want 1 naming the timeout", code, errs, time.Since(start))
	}
	time.Sleep(time.Second) // a late taker would have run it by now
	if l := ledgerLines(t, ledger); len(l) != 0 {
		t.Errorf("the withdrawn request ran: %q", l)
	}
	stopAll(t, 15*time.Second, nodes...)
}
