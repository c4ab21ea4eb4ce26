package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/cronlock/cronlock/internal/redistest"
)

// chromiumPath is where Debian's chromium package puts the browser
// (.ci/run installs it).
const chromiumPath = "/usr/bin/chromium"

// dashboardSecret is an env value of a job that prints it: no page may
// show it.
const dashboardSecret = "e2e-secret-value-42"

// TestDashboard is issue 35, "What it must show" 1 (the dashboard part):
// three daemons on a real Redis, a real headless Chromium driven by
// chromedp. Every page loads with no console error; the overview lists the
// failing job first; a job page shows occurrences with results and one
// skipped with its reason; a run page shows the output of a finished run
// and its hook's result (the job's env value redacted in both); pause and run-now work after signing in
// with the operator token and are refused without it. A screenshot of
// each page is written to $CRONLOCK_SCREENSHOTS, else under the test's
// temporary directory.
func TestDashboard(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	srv := redistest.Start(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("operator-token-e2e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := controlConfig(srv.Addr(),
		map[string]any{"name": "broken", "schedule": "*/2 * * * * *", "env": map[string]any{"API_KEY": dashboardSecret},
			"command":    `echo "calling the API with $API_KEY"; echo "error: cannot reach the API" >&2; exit 3`,
			"on_failure": `echo "paging the on-call, key $API_KEY"`},
		map[string]any{"name": "hello", "schedule": "* * * * * *", "command": `echo "hello from $CRONLOCK_NODE_ID"; sleep 1.5`},
		map[string]any{"name": "yearly", "schedule": "0 0 1 1 *", "command": `echo "run by hand"`, "timezone": "Europe/Paris"},
		// Runs about 6 s of every 10: a line every 200 ms, each with the
		// instant the job wrote it (Unix ns). 6 s: on a loaded machine
		// (make test's other packages) the browser takes seconds to load
		// the run page; overlap: allow, so that a run the load stretches
		// past 10 s does not make the watched slot's run a skip.
		map[string]any{"name": "stream", "schedule": "*/10 * * * * *", "overlap": "allow",
			"command": `for i in $(seq 1 30); do echo "line $i $(date +%s%N)"; sleep 0.2; done`})
	cfg["http"] = map[string]any{"token_file": tokenFile}
	cfgFile := writeConfig(t, cfg)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "w1", env: []string{"CRONLOCK_HTTP_LISTEN=" + addrs[0]}},
		nodeSpec{id: "w2", env: []string{"CRONLOCK_HTTP_LISTEN=" + addrs[1]}}, nodeSpec{id: "w3", env: []string{"CRONLOCK_HTTP_LISTEN=" + addrs[2]}})
	base := "http://" + addrs[0]
	waitFor(t, 15*time.Second, "a failed run of broken and a slot of hello skipped for overlap", func() bool {
		return occurrenceWith(t, base, "broken", "ran", `"result": "failure"`) && occurrenceWith(t, base, "hello", "skipped", `"reason": "overlap"`)
	})

	b := newBrowserSession(t, browser)
	dashboardReads(t, b, base)
	dashboardLive(t, b, base)
	dashboardWrites(t, b, base, "http://"+addrs[1])
	b.close()
	stopAll(t, 15*time.Second, nodes...)
}

// dashboardReads loads every page (a screenshot of each), then checks the
// overview, a job page and a run page.
func dashboardReads(t *testing.T, b *browserSession, base string) {
	t.Helper()
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/ui/", "#problem-list"}, {"jobs", "/ui/jobs", "#jobs"}, {"job", "/ui/jobs/hello", "#occurrences"},
		{"nodes", "/ui/nodes", "#live-nodes"}, {"login", "/ui/login", "#token"},
	} {
		b.open(base+p.path, p.wait)
		b.screenshot(p.name)
		if p.name == "nodes" {
			b.wantText("#live-nodes", "w1", "w2", "w3")
			b.wantText("#backend-state", "up", "redis backend")
		}
	}
	b.open(base+"/ui/", "#problem-list")
	b.wantText("#problem-list tbody tr:first-child", "broken", "failed", "failure (exit 3)")
	b.open(base+"/ui/jobs/hello", "#occurrences")
	b.wantText("#occurrences", "success", "ran on w", "not run: the previous run still held the lease (overlap: skip) [overlap]")
	b.open(base+"/ui/jobs/broken", "#occurrences")
	runURL := do(b, chromedp.AttributeValue(chromedp.CSS(`#occurrences tr[data-status="ran"] a`), "href")).Value
	b.open(base+runURL, "#output")
	b.wantText("#output", "calling the API with [redacted env API_KEY]", "error: cannot reach the API")
	b.wantText("#run-facts", "failure", "exit code", "3")
	// The hook's result is kept once the hook has ended: reload until then.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(
		do(b, chromedp.Evaluate[string](`(document.getElementById("hooks") || {}).textContent || ""`)), "[redacted env API_KEY]"); {
		if time.Now().After(deadline) {
			t.Fatalf("run page %s: no kept hook result after 10 s", runURL)
		}
		time.Sleep(200 * time.Millisecond)
		b.open(base+runURL, "#output")
	}
	b.wantText("#hooks", "paging the on-call, key [redacted env API_KEY]")
	b.wantText("#hooks", "on_failure", "success")
	b.screenshot("run")
	b.noConsoleErrors()
}

// dashboardLive opens the run page of a running run of stream and
// watches its output block: every line the job wrote after the page was
// opened must appear within 1 s of the job writing it (the job writes its
// own timestamp; the browser runs on the same machine), and at least 5
// must appear so. The lines written before come at once as the stream's
// backlog and are not timed.
func dashboardLive(t *testing.T, b *browserSession, base string) {
	t.Helper()
	// Open the page early in a run: most of its 6 s of lines are then
	// written while it is open. It is opened by its address (the slot's),
	// not through the job page: on a loaded machine each page load takes a
	// second or more.
	slot := time.Now().Truncate(10 * time.Second).Add(10 * time.Second)
	sleepUntil(slot.Add(300 * time.Millisecond))
	waitFor(t, 15*time.Second, "the watched slot's run of stream in progress", func() bool {
		return occurrenceWith(t, base, "stream", "claimed", fmt.Sprintf(`"slot": %d,`, slot.Unix()))
	})
	runURL := fmt.Sprintf("/ui/jobs/stream/runs/%d", slot.Unix())
	opened := time.Now()
	b.open(base+runURL, "#output")
	seen, live, worst := map[string]bool{}, 0, time.Duration(0)
	for _, l := range strings.Split(do(b, chromedp.Evaluate[string](`document.getElementById("output").textContent`)), "\n") {
		seen[l] = true // there when the page loaded: not timed
	}
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline) && live < 25; time.Sleep(50 * time.Millisecond) {
		text := do(b, chromedp.Evaluate[string](`document.getElementById("output").textContent`))
		now := time.Now()
		for _, l := range strings.Split(text, "\n") {
			var i int
			var ns int64
			if seen[l] || l == "" {
				continue
			}
			seen[l] = true
			if n, _ := fmt.Sscanf(l, "line %d %d", &i, &ns); n != 2 || time.Unix(0, ns).Before(opened) {
				continue
			}
			live++
			lag := now.Sub(time.Unix(0, ns))
			worst = max(worst, lag)
			if lag > time.Second {
				t.Errorf("run page of stream: %q appeared %v after the job wrote it, want within 1 s", l, lag.Round(time.Millisecond))
			}
		}
	}
	if live < 5 {
		t.Errorf("run page of stream: %d lines written while it was open appeared, want at least 5", live)
	}
	b.screenshot("run-live")
	t.Logf("live output: %d lines written while the run page was open appeared on it, the slowest %v after the job wrote it",
		live, worst.Round(time.Millisecond))
}

// dashboardWrites checks that pause and run now are refused without the
// token, and work after signing in on the node at other.
func dashboardWrites(t *testing.T, b *browserSession, base, other string) {
	t.Helper()

	// Without the token: the buttons are disabled and the server refuses
	// the POSTs (401), the job stays as it was.
	b.open(base+"/ui/jobs/yearly", "#pause")
	for _, sel := range []string{"#pause", "#run-now"} {
		if disabled := do(b, chromedp.JavascriptAttribute[bool](chromedp.CSS(sel), "disabled")); !disabled {
			t.Errorf("%s is enabled for a reader without the token", sel)
		}
	}
	for _, action := range []string{"pause", "run"} {
		code := do(b, chromedp.Evaluate[int](fmt.Sprintf(`fetch("/ui/jobs/yearly/%s", {method: "POST", body: new URLSearchParams({note: "x"})}).then(r => r.status)`, action),
			chromedp.EvalAwaitPromise))
		if code != 401 {
			t.Errorf("POST /ui/jobs/yearly/%s without the token from the page: %d, want 401", action, code)
		}
	}
	b.forgetConsoleErrors("status of 401") // the refused requests' own
	req, _ := http.NewRequest("POST", base+"/ui/jobs/yearly/pause", strings.NewReader("note=x"))
	req.Header.Set("Authorization", "Bearer operator-token-e2e")
	req.Header.Set("Origin", "http://elsewhere.test")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 403 {
		t.Errorf("POST pause with the token from another origin: %v %v, want 403", res, err)
	} else {
		res.Body.Close()
	}
	if _, out := apiDo(t, "GET", base+"/api/v1/jobs/yearly", "", ""); !strings.Contains(out, `"paused": false`) {
		t.Fatalf("yearly after the refused requests:\n%s\nwant not paused", out)
	}

	// Signed in on another node (the session is valid on every node with
	// the same token): pause with a note, resume, run now.
	b.open(other+"/ui/login?next=/ui/jobs/yearly", "#token")
	b.run(chromedp.SendKeys(chromedp.CSS("#token"), "operator-token-e2e"), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#pause-note")))
	b.run(chromedp.SendKeys(chromedp.CSS("#pause-note"), "paused by the e2e test"), chromedp.Click(chromedp.CSS("#pause")),
		chromedp.WaitVisible(chromedp.CSS("#did")))
	b.wantText("#paused", "paused by the e2e test", "ui(127.0.0.1)@w2")
	if _, out := apiDo(t, "GET", base+"/api/v1/jobs/yearly", "", ""); !strings.Contains(out, `"note": "paused by the e2e test"`) {
		t.Errorf("yearly after the pause from the dashboard:\n%s\nwant paused with the note", out)
	}
	b.run(chromedp.Click(chromedp.CSS("#resume")), chromedp.WaitVisible(chromedp.CSS("#pause-note")))
	b.run(chromedp.SendKeys(chromedp.CSS("#run-reason"), "e2e"), chromedp.Click(chromedp.CSS("#run-now")))
	b.waitText("#did", "Run requested")
	waitFor(t, 10*time.Second, "the manual run of yearly in the ledger", func() bool {
		return occurrenceWith(t, base, "yearly", "ran", `"trigger": "manual"`)
	})
	b.open(base+"/ui/jobs/yearly", "#occurrences")
	b.wantText("#occurrences", "manual", "success")
	b.noConsoleErrors()
}

// TestDashboard_MemoryBackend: a daemon without Redis serves every page
// of the dashboard over its own state (no browser needed for that).
func TestDashboard_MemoryBackend(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	cfg := memoryConfig(map[string]any{"name": "tick", "schedule": "* * * * * *", "command": "echo tick-output; exit 1"})
	cfg["http"] = map[string]any{"listen": addr}
	n := startNode(t, writeConfig(t, cfg))
	waitEngineRunning(n)
	base := "http://" + addr
	waitFor(t, 10*time.Second, "a run of tick", func() bool { return occurrenceWith(t, base, "tick", "ran", `"result": "failure"`) })
	_, out := apiDo(t, "GET", base+"/api/v1/jobs/tick/occurrences?status=ran&limit=1", "", "")
	var occ []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &occ); err != nil || len(occ) == 0 {
		t.Fatalf("occurrences of tick: %v %s", err, out)
	}
	for path, want := range map[string]string{"/ui/": "failure (exit 1)", "/ui/jobs?status=failing": "tick", "/ui/jobs/tick": "ran on",
		"/ui/jobs/tick/runs/" + occ[0].ID: "tick-output", "/ui/nodes": "memory backend"} {
		if code, body := apiDo(t, "GET", base+path, "", ""); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s on the memory backend: %d, want 200 showing %q:\n%s", path, code, want, body)
		}
	}
	if code, _ := apiDo(t, "POST", base+"/ui/jobs/tick/pause", "", ""); code != 403 {
		t.Errorf("POST pause on a memory-backend daemon without a token: %d, want 403", code)
	}
	stopAll(t, 10*time.Second, n)
}

// occurrenceWith reports whether job has a ledger record of status whose
// JSON holds want (the API of the daemon at base).
func occurrenceWith(t *testing.T, base, job, status, want string) bool {
	code, out := apiDo(t, "GET", base+"/api/v1/jobs/"+job+"/occurrences?status="+status+"&limit=50", "", "")
	var recs []json.RawMessage
	if code != 200 || json.Unmarshal([]byte(out), &recs) != nil {
		return false
	}
	for _, r := range recs {
		var buf strings.Builder
		var v any
		_ = json.Unmarshal(r, &v)
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		if strings.Contains(buf.String(), want) {
			return true
		}
	}
	return false
}

// chromium returns the browser's path. Without it the test is skipped,
// except in CI (CI=true), where it fails: the dashboard must be tested
// there.
func chromium(t *testing.T) string {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, err := exec.LookPath("chromium"); err == nil {
			return p
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not found at %s nor on PATH, and CI=true: install Debian's chromium package (.ci/run does)", chromiumPath)
		}
		t.Skipf("chromium not found at %s nor on PATH: the dashboard's browser test needs it (apt-get install chromium); "+
			"it is skipped outside CI only", chromiumPath)
	}
	return path
}

// browserSession is one headless Chromium (a fresh profile, no network
// but loopback) and one tab, with the console errors it logged.
type browserSession struct {
	t       *testing.T
	ctx     context.Context
	cancel  func()
	shots   string
	mu      sync.Mutex
	errs    []string
	current string
	started bool
}

// newBrowserSession starts Chromium with the flags a machine without
// internet needs; the cleanup ends it.
func newBrowserSession(t *testing.T, path string) *browserSession {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000)}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browserSession{t: t, ctx: ctx, cancel: func() { cancel(); acancel() }}
	t.Cleanup(b.close)
	b.shots = screenshotDir
	if b.shots == "" {
		b.shots = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b.run() // starts the browser and opens the tab, so that Listen misses nothing
	if err := chromedp.Listen(ctx, b.onEvent); err != nil {
		t.Fatal(err)
	}
	return b
}

// onEvent records console errors, uncaught exceptions and errors the
// browser logged (failed loads, CSP violations).
func (b *browserSession) onEvent(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value))
			}
			msg = "console.error: " + strings.Join(parts, " ")
		}
	case *runtime.EventExceptionThrown:
		msg = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
		}
	}
	if msg != "" {
		b.mu.Lock()
		b.errs = append(b.errs, b.current+": "+msg)
		b.mu.Unlock()
	}
}

// run runs actions with a 10 s bound (the first call, which starts the
// browser, without), failing the test on error.
func (b *browserSession) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	do(b, chromedp.Steps(actions...))
}

// do runs action with a 10 s bound (the first call, which starts the
// browser, without: its context's end would stop the browser), failing
// the test on error, and returns its value.
func do[T any](b *browserSession, action chromedp.Action[T]) T {
	b.t.Helper()
	ctx := b.ctx
	if b.started {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
	}
	b.started = true
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		b.t.Fatalf("browser on %s: %v\npage:\n%s", b.current, err, html)
	}
	return v
}

// open loads url and waits for the element sel.
func (b *browserSession) open(url, sel string) {
	b.t.Helper()
	b.current = url
	b.run(chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// wantText fails the test unless the text of sel holds every one of want.
func (b *browserSession) wantText(sel string, want ...string) {
	b.t.Helper()
	text := do(b, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	for _, w := range want {
		if !strings.Contains(text, w) {
			b.t.Errorf("%s, %s: %q lacks %q", b.current, sel, text, w)
		}
	}
	if strings.Contains(text, dashboardSecret) {
		b.t.Errorf("%s, %s shows the job's env value", b.current, sel)
	}
}

// screenshot writes the whole page as NAME.png, and checks the page's
// HTML holds no secret.
func (b *browserSession) screenshot(name string) {
	b.t.Helper()
	png := do(b, chromedp.FullScreenshot(100))
	html := do(b, chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(html, dashboardSecret) || strings.Contains(html, "operator-token-e2e") {
		b.t.Errorf("%s shows a secret (the job's env value or the token)", b.current)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot of %s: %s", b.current, filepath.Join(b.shots, name+".png"))
}

// waitText waits up to 10 s for the text of sel to hold want (the page a
// click leads to has loaded).
func (b *browserSession) waitText(sel, want string) {
	b.t.Helper()
	js := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)
	deadline := time.Now().Add(10 * time.Second)
	for {
		text := do(b, chromedp.Evaluate[string](js))
		if strings.Contains(text, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s, %s: %q after 10 s, want it to hold %q", b.current, sel, text, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// forgetConsoleErrors drops the console errors logged so far, each of
// which must hold want (errors the test caused on purpose).
func (b *browserSession) forgetConsoleErrors(want string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		if !strings.Contains(e, want) {
			b.t.Errorf("browser console error: %s", e)
		}
	}
	b.errs = nil
}

// noConsoleErrors fails the test for every console error logged so far.
func (b *browserSession) noConsoleErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser console error: %s", e)
	}
	b.errs = nil
}

// close ends the browser (once).
func (b *browserSession) close() {
	if b.cancel != nil {
		b.cancel()
		b.cancel = nil
	}
}
