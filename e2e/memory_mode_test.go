package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Memory mode as a first-class mode (issue 33): the cronlock command and
// the HTTP API read and change the state of a running daemon on the
// memory backend, which lives in the daemon process.

// memStatus is one row of `cronlock status -json` and GET /api/v1/jobs.
type memStatus struct {
	Job    string `json:"job"`
	Paused bool   `json:"paused"`
	Pause  *struct {
		By    string    `json:"by"`
		Note  string    `json:"note"`
		Until time.Time `json:"until"`
	} `json:"pause"`
	Last *struct {
		RunID  string `json:"run_id"`
		Node   string `json:"node"`
		Result string `json:"result"`
	} `json:"last"`
	Fence int64 `json:"fence"`
}

// memRun is one row of `cronlock history -json`.
type memRun struct {
	RunID      string    `json:"run_id"`
	Start      time.Time `json:"start"`
	Node       string    `json:"node"`
	Result     string    `json:"result"`
	Fence      int64     `json:"fence"`
	OutputTail string    `json:"output_tail"`
}

// cliJSON runs the command with -json and decodes its stdout into v.
func cliJSON(t *testing.T, cfgFile string, v any, args ...string) {
	t.Helper()
	out, errs, code := cli(t, cfgFile, append(args, "-json")...)
	if code != 0 {
		t.Fatalf("cronlock %s -json: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("cronlock %s -json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// statusOf returns job's row of `cronlock status -json JOB`.
func statusOf(t *testing.T, cfgFile, job string) memStatus {
	t.Helper()
	var rows []memStatus
	cliJSON(t, cfgFile, &rows, "status", job)
	if len(rows) != 1 || rows[0].Job != job {
		t.Fatalf("cronlock status -json %s: %+v, want one row", job, rows)
	}
	return rows[0]
}

// TestMemoryMode_CLIAndAPI is issue 33, "What it must show" 5: with a
// daemon running on the memory backend, `cronlock status`, `history JOB`,
// `pause JOB -for 10s`, `resume JOB`, `nodes` and `run JOB`, and GET
// /api/v1/jobs, report and change that daemon's state: history lists the
// runs it made, the paused job is reported paused (and the daemon skips
// its slots), the resumed one runs again, a run is made by the daemon
// (refused while paused without -force), the tables name the daemon they
// read. A pause
// survives a restart of the daemon; once it is stopped the command says no
// daemon runs with the file. The command runs with a state directory of
// its own (cli): it finds the daemon by the config file alone.
func TestMemoryMode_CLIAndAPI(t *testing.T) {
	t.Parallel()
	listen := freeAddr(t)
	cfg := memoryConfig(
		map[string]any{"name": "tick", "schedule": "* * * * * *", "command": `echo "tick $CRONLOCK_FENCING_TOKEN"`},
		map[string]any{"name": "yearly", "schedule": "0 0 1 1 *", "command": "true"},
		map[string]any{"name": "hello", "schedule": "0 0 1 1 *", "command": `echo "hello, $CRONLOCK_TRIGGER"`})
	cfg["http"] = map[string]any{"listen": listen}
	cfgFile := writeConfig(t, cfg)
	n := startNode(t, cfgFile)
	waitEngineRunning(n)
	header := "memory backend: daemon solo (pid " + strconv.Itoa(n.Pid()) + " on "

	// history lists the daemon's runs, with their output.
	var runs []memRun
	waitFor(t, 10*time.Second, "two runs of tick in cronlock history", func() bool {
		cliJSON(t, cfgFile, &runs, "history", "-runs", "tick")
		return len(runs) >= 2
	})
	if r := runs[0]; r.Node != "solo" || r.Result != "success" || r.Fence <= runs[1].Fence ||
		r.OutputTail != "tick "+strconv.FormatInt(r.Fence, 10)+"\n" {
		t.Errorf("history -json: newest run %+v (then %+v); want solo, success, fence above the older one's, its output", r, runs[1])
	}
	out, errs, code := cli(t, cfgFile, "history", "-runs", "tick", "-n", "2")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], header) ||
		!strings.HasPrefix(lines[1], "START") || !strings.Contains(lines[2], " solo ") || !strings.Contains(lines[2], " success ") {
		t.Errorf("cronlock history tick -n 2: exit %d %s\n%s\nwant the daemon named, then 2 runs of solo", code, errs, out)
	}

	// status: the last run, and the job that never ran.
	if st := statusOf(t, cfgFile, "tick"); st.Last == nil || st.Last.Node != "solo" || st.Paused || st.Fence < 2 {
		t.Errorf("status tick: %+v; want a last run on solo, not paused", st)
	}
	if st := statusOf(t, cfgFile, "yearly"); st.Last != nil || st.Paused {
		t.Errorf("status yearly: %+v; want never run, not paused", st)
	}
	out, _, code = cli(t, cfgFile, "status")
	if code != 0 || !strings.HasPrefix(out, header) || !strings.Contains(out, "\ntick ") || !strings.Contains(out, "\nyearly ") {
		t.Errorf("cronlock status: exit %d\n%s\nwant the daemon named and both jobs", code, out)
	}

	// pause -for 10s: reported paused, by the CLI and the API, and the
	// daemon skips the job's slots.
	pausedAt := time.Now()
	out, errs, code = cli(t, cfgFile, "pause", "tick", "-for", "10s", "-note", "e2e test")
	if code != 0 || !strings.HasPrefix(out, "paused tick by ") || !strings.HasSuffix(out, ": e2e test\n") {
		t.Fatalf("cronlock pause tick -for 10s: exit %d %q %s", code, out, errs)
	}
	st := statusOf(t, cfgFile, "tick")
	if !st.Paused || st.Pause == nil || st.Pause.Note != "e2e test" || !strings.Contains(st.Pause.By, "@") ||
		st.Pause.Until.Sub(pausedAt) < 9*time.Second || st.Pause.Until.Sub(pausedAt) > 12*time.Second {
		t.Errorf("status tick after the pause: %+v; want paused by user@host, note e2e test, until about 10s on", st)
	}
	n.WaitLog(5*time.Second, "a slot of tick skipped paused", func(e logEntry) bool {
		return e.Msg() == "slot skipped" && e.Str("job") == "tick" && e.Str("reason") == "paused"
	})
	code, body := httpGet(t, "http://"+listen+"/api/v1/jobs")
	var rows []memStatus
	if err := json.Unmarshal([]byte(body), &rows); code != 200 || err != nil || len(rows) != 3 {
		t.Fatalf("GET /api/v1/jobs: %d %v\n%s", code, err, body)
	}
	for _, r := range rows {
		if r.Job == "tick" && (!r.Paused || r.Pause == nil || r.Pause.Note != "e2e test") || r.Job == "yearly" && r.Paused {
			t.Errorf("GET /api/v1/jobs: %+v; want tick paused (e2e test), yearly not", r)
		}
	}
	if code, body := httpGet(t, "http://"+listen+"/no/such/path"); code != 404 || !strings.Contains(body, `"error"`) || !strings.Contains(body, `"hint"`) {
		t.Errorf("GET /no/such/path: %d %s; want 404 with a JSON error and hint", code, body)
	}
	out, _, _ = cli(t, cfgFile, "status", "tick")
	if !strings.Contains(out, " yes, until ") {
		t.Errorf("cronlock status tick while paused:\n%s\nwant PAUSED yes, until …", out)
	}

	// resume: lifted, recorded, and the job runs again.
	out, errs, code = cli(t, cfgFile, "resume", "tick")
	if code != 0 || !strings.HasPrefix(out, "resumed tick (paused by ") || !strings.Contains(out, ": e2e test)") {
		t.Errorf("cronlock resume tick: exit %d %q %s; want the pause it lifted", code, out, errs)
	}
	resumed := time.Now()
	if st := statusOf(t, cfgFile, "tick"); st.Paused {
		t.Errorf("status tick after resume: %+v; want not paused", st)
	}
	waitFor(t, 5*time.Second, "a run of tick after the resume", func() bool {
		cliJSON(t, cfgFile, &runs, "history", "-runs", "tick")
		return len(runs) > 0 && runs[0].Start.After(resumed)
	})
	out, _, _ = cli(t, cfgFile, "history", "-events", "tick")
	if !strings.Contains(out, " resume ") || !strings.Contains(out, " pause ") || !strings.Contains(out, "e2e test") {
		t.Errorf("cronlock history -events tick:\n%s\nwant the pause and the resume", out)
	}
	out, _, code = cli(t, cfgFile, "nodes")
	if code != 0 || !strings.HasPrefix(out, header) || !strings.Contains(out, "\nsolo ") || !strings.Contains(out, " live ") {
		t.Errorf("cronlock nodes: exit %d\n%s\nwant this daemon, live", code, out)
	}

	// run: the daemon runs the job (its output and exit code come back),
	// and refuses a paused one unless -force.
	out, errs, code = cli(t, cfgFile, "run", "hello", "-wait", "-reason", "e2e")
	if code != 0 || out != "hello, manual\n" || !strings.Contains(errs, "hello on solo: success, exit code 0") {
		t.Errorf("cronlock run hello: exit %d %q %q; want the daemon's run, its output and exit code 0", code, out, errs)
	}
	cliJSON(t, cfgFile, &runs, "history", "hello")
	if len(runs) != 1 || runs[0].Node != "solo" {
		t.Errorf("history hello after cronlock run: %+v; want the daemon's run", runs)
	}
	out, _, _ = cli(t, cfgFile, "history", "-events", "hello")
	if !strings.Contains(out, " run_request ") || !strings.Contains(out, "e2e") {
		t.Errorf("history -events hello:\n%s\nwant the run request and its reason", out)
	}
	if _, errs, code := cli(t, cfgFile, "pause", "hello"); code != 0 {
		t.Fatalf("pause hello: exit %d %s", code, errs)
	}
	if _, errs, code := cli(t, cfgFile, "run", "hello", "-wait"); code != 1 || !strings.Contains(errs, "job hello is paused") {
		t.Errorf("cronlock run of a paused job: exit %d %q; want 1, refused paused", code, errs)
	}
	if out, errs, code := cli(t, cfgFile, "run", "hello", "-wait", "-force"); code != 0 || out != "hello, manual\n" {
		t.Errorf("cronlock run -force of a paused job: exit %d %q %q; want it run", code, out, errs)
	}

	// backfill cannot work from outside while the daemon holds the state.
	if _, errs, code := cli(t, cfgFile, "backfill", "yearly", "-from", "2024-12-30T00:00:00Z", "-to", "2025-01-03T00:00:00Z"); code != 1 ||
		!strings.Contains(errs, "backfill on the memory backend needs the daemon stopped") {
		t.Errorf("cronlock backfill with the daemon running: exit %d %q; want 1, saying to stop the daemon", code, errs)
	}

	// A pause without end survives a restart, with its record.
	if _, errs, code := cli(t, cfgFile, "pause", "yearly", "-note", "kept"); code != 0 {
		t.Fatalf("cronlock pause yearly: exit %d %s", code, errs)
	}
	stopAll(t, 15*time.Second, n)
	if _, errs, code := cli(t, cfgFile, "status"); code != 1 || !strings.Contains(errs, "no cronlock daemon is running with") {
		t.Errorf("cronlock status with the daemon stopped: exit %d %q; want 1, no daemon running with the file", code, errs)
	}
	n = startNode(t, cfgFile)
	waitEngineRunning(n)
	if st := statusOf(t, cfgFile, "yearly"); !st.Paused || st.Pause == nil || st.Pause.Note != "kept" {
		t.Errorf("status yearly after a restart: %+v; want still paused, note kept", st)
	}
	stopAll(t, 15*time.Second, n)
}
