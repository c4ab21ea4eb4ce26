package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/redis/rueidis"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/statedir"
)

func history(t *testing.T, r *redislock.Redis, job string) []ledger.RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := r.History(ctx, job, 10)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// A manual run passes its output through, exits with the command's
// status, and records its run; its fencing token is minted by rule R4
// (docs/protocol.md): max(fence + 1, Redis time in µs), here Redis
// time (the server runs on this host's clock) as the claim ran.
func TestRun_ExitCodeOutputAndHistory(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo hi; echo oops >&2; exit 3")
	before := time.Now()
	code, out, errs := runCLI(t, []string{"PATH=/usr/bin:/bin"}, "run", "-config", cfg, "backup")
	after := time.Now()
	if code != 3 {
		t.Fatalf("got exit %d, want 3; stderr %q", code, errs)
	}
	if out != "hi\n" || !strings.Contains(errs, "oops\n") || !strings.Contains(errs, "run finished") {
		t.Errorf("got stdout %q, stderr %q; want the command's lines passed through and a result line", out, errs)
	}
	recs := history(t, r, "backup")
	if len(recs) != 1 {
		t.Fatalf("got %d history records, want 1", len(recs))
	}
	rec := recs[0]
	if rec.Result != "failure" || rec.ExitCode != 3 || rec.Slot != 0 || rec.Node != "node-1" ||
		rec.Attempts != 1 || !strings.Contains(rec.OutputTail, "hi\n") {
		t.Errorf("got record %+v, want failure, exit 3, slot 0, node-1, 1 attempt, tail with hi", rec)
	}
	if lo, hi := before.UnixMicro(), after.UnixMicro(); rec.Fence < lo || rec.Fence > hi {
		t.Errorf("fence %d, want Redis time in µs during the run, in [%d, %d] (rule R4)", rec.Fence, lo, hi)
	}
	if leaseExists(t, addr, "backup") {
		t.Errorf("lease key cronlock:job:backup still exists after the run, want it released")
	}
}

// The run's environment names the job, the node, its fencing token (the
// one its record carries), the attempt, and no scheduled time (a manual
// run has no slot); a second run's token is greater.
func TestRun_SetsRunEnvironment(t *testing.T) {
	cfg, r, _ := opsRedis(t, `echo "$CRONLOCK_JOB $CRONLOCK_NODE_ID $CRONLOCK_FENCING_TOKEN $CRONLOCK_ATTEMPT [$CRONLOCK_SCHEDULED_TIME]"`)
	var tokens []int64
	for range 2 {
		code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
		var job, node, sched string
		var token int64
		var attempt int
		if n, err := fmt.Sscanf(out, "%s %s %d %d %s\n", &job, &node, &token, &attempt, &sched); code != 0 || err != nil || n != 5 ||
			job != "backup" || node != "node-1" || attempt != 1 || sched != "[]" || token <= 0 {
			t.Fatalf("got exit %d, out %q (%v), stderr %q; want 0 and \"backup node-1 <token> 1 []\"", code, out, err, errs)
		}
		tokens = append(tokens, token)
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("tokens of two runs in order: %v, want strictly increasing", tokens)
	}
	if recs := history(t, r, "backup"); len(recs) != 2 || recs[0].Fence != tokens[1] || recs[1].Fence != tokens[0] {
		t.Errorf("history %+v, want the two runs with fences %v (newest first)", recs, tokens)
	}
}

func TestRun_LeaseHeldElsewhere(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo should-not-run")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := r.Claim(ctx, ledger.ClaimRequest{Job: "backup", Trigger: ledger.TriggerManual, Node: "node-2", RunID: "abc",
		TTL: time.Minute, Lease: true})
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("claim: %v %v", c, err)
	}
	code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
	want := "job backup is running on node-2 (lease held); not started"
	if code != 1 || out != "" || !strings.Contains(errs, want) {
		t.Fatalf("got exit %d, out %q, stderr %q; want 1 and %q", code, out, errs, want)
	}
	if len(history(t, r, "backup")) != 0 {
		t.Errorf("got a history record, want none (nothing ran)")
	}
	st, err := r.State(ctx, "backup")
	if err != nil || st.LeaseHolder != "node-2:abc" || !leaseExists(t, addr, "backup") {
		t.Errorf("got lease holder %q (%v), want node-2:abc untouched", st.LeaseHolder, err)
	}
}

// A paused job is refused (exit 1, the message says it is paused and how
// to run it anyway); -force runs it.
func TestRun_RefusesPausedUnlessForced(t *testing.T) {
	cfg, r, _ := opsRedis(t, "echo ran")
	if code, _, errs := runCLI(t, nil, "pause", "-config", cfg, "backup"); code != 0 {
		t.Fatalf("pause: %d %s", code, errs)
	}
	code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
	if code != 1 || out != "" || !strings.Contains(errs, "job backup is paused") || !strings.Contains(errs, "-force") {
		t.Errorf("run while paused: got exit %d, out %q, stderr %q; want 1 and a message that it is paused", code, out, errs)
	}
	if len(history(t, r, "backup")) != 0 {
		t.Errorf("a refused run left a history record")
	}
	if code, out, errs := runCLI(t, nil, "run", "-config", cfg, "-force", "backup"); code != 0 || out != "ran\n" {
		t.Errorf("run -force while paused: got exit %d, out %q, stderr %q; want 0, ran", code, out, errs)
	}
}

// A disabled job is refused unless forced.
func TestRun_RefusesDisabledUnlessForced(t *testing.T) {
	cfg, _, _ := opsRedis(t, "echo ran")
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), "timeout: 30s", "timeout: 30s\n    enabled: false", 1))
	code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
	if code != 1 || out != "" || !strings.Contains(errs, "job backup is disabled") {
		t.Errorf("run while disabled: got exit %d, out %q, stderr %q; want 1 and a message that it is disabled", code, out, errs)
	}
	if code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup", "-force"); code != 0 || out != "ran\n" {
		t.Errorf("run -force while disabled: got exit %d, out %q, stderr %q; want 0, ran", code, out, errs)
	}
}

// A manual run is the job's run: retries apply, hooks run with
// CRONLOCK_TRIGGER=manual, the history record carries trigger manual, and
// the job's work_dir and env are used.
func TestRun_RetriesHooksTriggerAndJobSettings(t *testing.T) {
	dir := t.TempDir()
	cfg, r, _ := opsRedis(t, `echo "$PWD $MYVAR $CRONLOCK_TRIGGER attempt=$CRONLOCK_ATTEMPT"; test "$CRONLOCK_ATTEMPT" = 2`)
	hookOut := filepath.Join(dir, "hook")
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), "timeout: 30s", "timeout: 30s\n    retries: 1\n    retry_backoff: 100ms\n"+
		"    work_dir: "+dir+"\n    env: {MYVAR: hello}\n"+
		"    on_success: 'echo \"$CRONLOCK_TRIGGER $CRONLOCK_RESULT $CRONLOCK_ATTEMPT $MYVAR\" > "+hookOut+"'", 1))
	code, out, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
	// The run's output is redacted like a daemon's: the env value is used
	// (the hook below sees it) but not printed.
	want := dir + " [redacted env MYVAR] manual attempt=1\n" + dir + " [redacted env MYVAR] manual attempt=2\n"
	if code != 0 || out != want {
		t.Fatalf("got exit %d, out %q, stderr %q; want 0 and %q", code, out, errs, want)
	}
	if got := strings.TrimSpace(readFile(t, hookOut)); got != "manual success 2 hello" {
		t.Errorf("on_success saw %q, want %q", got, "manual success 2 hello")
	}
	recs := history(t, r, "backup")
	if len(recs) != 1 || recs[0].Trigger != ledger.TriggerManual || recs[0].Attempts != 2 || recs[0].Result != "success" {
		t.Errorf("got history %+v, want one successful manual run of 2 attempts", recs)
	}
	if code, out, _ := runCLI(t, nil, "history", "-config", cfg, "backup"); code != 0 || !strings.Contains(out, "manual") {
		t.Errorf("cronlock history: got exit %d, out %q; want the run shown with trigger manual", code, out)
	}
}

func TestRun_MemoryBackendRunsLocally(t *testing.T) {
	cfg := opsConfig(t, "", "echo local; exit 0")
	env := []string{"CRONLOCK_NODE_STATE_DIR=" + filepath.Join(t.TempDir(), "none")}
	code, out, errs := runCLI(t, env, "run", "-config", cfg, "backup")
	if code != 0 || out != "local\n" || !strings.Contains(errs, "memory backend") || !strings.Contains(errs, "not kept") {
		t.Errorf("got exit %d, out %q, stderr %q; want 0, local, a memory-backend warning", code, out, errs)
	}
}

// With no daemon holding the state directory, a manual run on the memory
// backend continues the daemon's fencing tokens (kept in its state file)
// and records its own: a token the daemon minted ahead of this clock
// (its fence is far in the future in µs) is followed by fence + 1, then
// fence + 2 (rule R4: max(fence + 1, time in µs)).
func TestRun_MemoryBackendContinuesTheDaemonsFence(t *testing.T) {
	cfg := opsConfig(t, "", "echo $CRONLOCK_FENCING_TOKEN")
	dir := t.TempDir()
	const fence = int64(1) << 60 // µs: year 38,000
	daemonState(t, dir, fence)
	env := []string{"CRONLOCK_NODE_STATE_DIR=" + dir}
	for i := int64(1); i <= 2; i++ {
		want := strconv.FormatInt(fence+i, 10) + "\n"
		code, out, errs := runCLI(t, env, "run", "-config", cfg, "backup")
		if code != 0 || out != want || strings.Contains(errs, "memory backend") {
			t.Errorf("got exit %d, out %q, stderr %q; want 0, %q, no warning", code, out, errs, want)
		}
	}
	if st := readState(t, dir); st.Fence != fence+2 {
		t.Errorf("state file after two manual runs: got fence %d, want %d", st.Fence, fence+2)
	}
}

// While a daemon holds the state directory, the manual run is local and
// says that its token may repeat one of the daemon's; its token is this
// clock in µs (rule R4 on a fresh backend), not the daemon's fence + 1.
func TestRun_MemoryBackendWhileTheDaemonRuns(t *testing.T) {
	cfg := opsConfig(t, "", "echo $CRONLOCK_FENCING_TOKEN")
	dir := t.TempDir()
	daemonState(t, dir, 41)
	held, err := statedir.Open(dir) // as the daemon does; flock conflicts within one process too
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before := time.Now().UnixMicro()
	code, out, errs := runCLI(t, []string{"CRONLOCK_NODE_STATE_DIR=" + dir}, "run", "-config", cfg, "backup")
	token, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || perr != nil || token < before || token > time.Now().UnixMicro() ||
		!strings.Contains(errs, "may repeat one of the daemon's") {
		t.Errorf("got exit %d, out %q, stderr %q; want 0, the time in µs, a warning that the token may repeat", code, out, errs)
	}
}

// A state file that cannot be used stops the manual run with the file's
// name, as it stops the daemon.
func TestRun_MemoryBackendCorruptStateFile(t *testing.T) {
	cfg := opsConfig(t, "", "echo ran")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, memory.MemoryStateFile), "{")
	code, out, errs := runCLI(t, []string{"CRONLOCK_NODE_STATE_DIR=" + dir}, "run", "-config", cfg, "backup")
	if code != 1 || out != "" || !strings.Contains(errs, filepath.Join(dir, memory.MemoryStateFile)) {
		t.Errorf("got exit %d, out %q, stderr %q; want 1, nothing run, an error naming the state file", code, out, errs)
	}
}

// daemonState writes the state file a daemon on the memory backend leaves
// in dir: job backup with its last fencing token fence and its highest
// claimed slot 1767225600.
func daemonState(t *testing.T, dir string, fence int64) {
	t.Helper()
	writeFile(t, filepath.Join(dir, memory.MemoryStateFile), fmt.Sprintf(
		`{"format":"cronlock memory backend state","version":1,"jobs":{"backup":{"slot":1767225600,"fence":%d}}}`, fence))
}

// readState opens the state directory dir as a daemon would and returns
// job backup's state.
func readState(t *testing.T, dir string) ledger.JobState {
	t.Helper()
	d, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := memory.OpenMemory(d)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.State(context.Background(), "backup")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRun_CommandCannotStart(t *testing.T) {
	cfg, r, addr := opsRedis(t, "true")
	cfgText := strings.Replace(readFile(t, cfg), "timeout: 30s", "timeout: 30s\n    work_dir: /nonexistent/dir", 1)
	writeFile(t, cfg, cfgText)
	code, _, errs := runCLI(t, nil, "run", "-config", cfg, "backup")
	if code != 1 || !strings.Contains(errs, "run could not start") {
		t.Errorf("got exit %d, stderr %q; want 1 and the start error", code, errs)
	}
	if recs := history(t, r, "backup"); len(recs) != 1 || recs[0].Result != "error" {
		t.Errorf("got history %+v, want one error record", recs)
	}
	if leaseExists(t, addr, "backup") {
		t.Errorf("lease still held after a failed start")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRun_InterruptTerminatesAndReleases(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo ready; sleep 30 & wait")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &onMarker{marker: "ready\n", do: cancel}
	var errb bytes.Buffer
	code := run(ctx, []string{"run", "-config", cfg, "backup"}, nil, out, &errb, nil)
	if code != 128+15 {
		t.Fatalf("got exit %d, want 143 (SIGTERM); stderr %q", code, errb.String())
	}
	if recs := history(t, r, "backup"); len(recs) != 1 || recs[0].Result != "failure" {
		t.Errorf("got history %+v, want one failure record", recs)
	}
	if leaseExists(t, addr, "backup") {
		t.Errorf("lease still held after an interrupted run")
	}
}

func TestRun_InterruptedBeforeStart(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo should-not-run")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"run", "-config", cfg, "backup"}, nil, &out, &errb, nil)
	if code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "interrupted before it started") {
		t.Errorf("got exit %d, out %q, stderr %q; want 1 and an interrupted message", code, out.String(), errb.String())
	}
	if len(history(t, r, "backup")) != 0 || leaseExists(t, addr, "backup") {
		t.Errorf("got a history record or a lease, want neither")
	}
}

// onMarker runs do once when a written line contains marker.
type onMarker struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	do     func()
}

func (w *onMarker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.do != nil && strings.Contains(w.buf.String(), w.marker) {
		w.do()
		w.do = nil
	}
	return len(p), nil
}

func TestRun_LeaseLostKillsTheRun(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo ready; sleep 30 & wait")
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), "timeout: 30s", "timeout: 30s\n    lock_ttl: 1s", 1))
	// Another owner takes the lease once the command runs: the next
	// renewal (every TTL/3) finds it held by another and the run is
	// killed. (A lease held by nobody would be taken again: Redis lost it,
	// docs/protocol.md R3.)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const other = "elsewhere:taker"
	out := &onMarker{marker: "ready\n", do: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Do(ctx, c.B().Set().Key("cronlock:job:backup").Value(other).PxMilliseconds(1500).Build()).Error(); err != nil {
			t.Errorf("take the lease: %v", err)
		}
	}}
	var errb bytes.Buffer
	code := run(context.Background(), []string{"run", "-config", cfg, "backup"}, nil, out, &errb, nil)
	if code != 128+15 || !strings.Contains(errb.String(), "lease lost") {
		t.Fatalf("got exit %d, want 143 and a lease-lost log; stderr %q", code, errb.String())
	}
	if recs := history(t, r, "backup"); len(recs) != 1 || recs[0].Result != "lock_lost" {
		t.Errorf("got history %+v, want one lock_lost record", recs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := c.Do(ctx, c.B().Get().Key("cronlock:job:backup").Build()).ToString(); err == nil && v != other {
		t.Errorf("lease after the run: %q, want the other owner's (or none): the killed run took nothing back", v)
	}
}

// The caller's systemd variables and CRONLOCK_* configuration reach neither
// the command nor its hook; ordinary variables do.
func TestRun_EnvironmentHygiene(t *testing.T) {
	dir := t.TempDir()
	hookOut := filepath.Join(dir, "hook-env")
	cfg, _, _ := opsRedis(t, "env")
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), "timeout: 30s", "timeout: 30s\n    on_success: 'env > "+hookOut+"'", 1))
	environ := []string{"PATH=/usr/bin:/bin", "KEEP_ME=1", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000",
		"WATCHDOG_PID=1", "LISTEN_FDS=3", "LISTEN_PID=1", "INVOCATION_ID=abc", "CRONLOCK_REDIS_PASSWORD=hunter2"}
	code, out, errs := runCLI(t, environ, "run", "-config", cfg, "backup")
	if code != 0 {
		t.Fatalf("got exit %d, stderr %q", code, errs)
	}
	for what, env := range map[string]string{"command": out, "hook": readFile(t, hookOut)} {
		for _, bad := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "LISTEN_FDS=", "LISTEN_PID=",
			"INVOCATION_ID=", "CRONLOCK_REDIS_PASSWORD=", "hunter2"} {
			if strings.Contains(env, bad) {
				t.Errorf("%s environment contains %q, want it dropped", what, bad)
			}
		}
		if !strings.Contains(env, "KEEP_ME=1") || !strings.Contains(env, "CRONLOCK_JOB=backup") {
			t.Errorf("%s environment lacks KEEP_ME=1 or CRONLOCK_JOB=backup:\n%s", what, env)
		}
	}
}
