package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// node is one cronlock daemon process started by startNode.
type node struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	logPath string // the daemon's stderr (JSON logs); "" when discarded
	wrapped bool   // started through a wrapper (withWrapper): logged pids are not the host's
	done    chan struct{}
	exit    int // valid once done is closed
}

// nodeOption adjusts how startNode runs the daemon.
type nodeOption func(*nodeOptions)

type nodeOptions struct {
	env           []string
	discardStderr bool
	wrapper       []string
}

// withWrapper runs the daemon as the last argument of a wrapper command,
// e.g. `unshare -fp --mount-proc`. The wrapper must kill the daemon when it
// is killed itself (unshare --kill-child): the cleanup kills the wrapper.
func withWrapper(argv ...string) nodeOption {
	return func(o *nodeOptions) { o.wrapper = argv }
}

// withEnv adds KEY=VALUE entries to the daemon's environment.
func withEnv(kv ...string) nodeOption {
	return func(o *nodeOptions) { o.env = append(o.env, kv...) }
}

// withStderrDiscarded sends the daemon's stderr to /dev/null, for tests
// whose jobs produce more output than is sensible to keep in a log file.
func withStderrDiscarded() nodeOption {
	return func(o *nodeOptions) { o.discardStderr = true }
}

// withNodeID sets CRONLOCK_NODE_ID (the node.id override) to id.
func withNodeID(id string) nodeOption { return withEnv("CRONLOCK_NODE_ID=" + id) }

// startNode runs the cronlock binary with `-config cfgFile -log-format json`,
// stderr written to a file in t.TempDir(). A cleanup kills the daemon if
// the test has not waited for it, and then kills the process groups of the
// runs it started (jobs run in their own groups, so killing the daemon alone
// would leave them behind).
func startNode(t *testing.T, cfgFile string, opts ...nodeOption) *node {
	t.Helper()
	var o nodeOptions
	for _, f := range opts {
		f(&o)
	}
	n := &node{t: t, name: nodeName(o.env), done: make(chan struct{}), wrapped: len(o.wrapper) > 0}
	n.cmd = exec.Command(binary, "-config", cfgFile, "-log-format", "json")
	if n.wrapped {
		n.cmd = exec.Command(o.wrapper[0], append(o.wrapper[1:], n.cmd.Args...)...)
	}
	n.cmd.Env = append(os.Environ(), o.env...)
	if !hasEnv(o.env, "CRONLOCK_NODE_STATE_DIR") {
		n.cmd.Env = append(n.cmd.Env, "CRONLOCK_NODE_STATE_DIR="+stateDir(t, n.name))
	}
	if o.discardStderr {
		n.cmd.Stderr = nil // os/exec connects nil to /dev/null
	} else {
		f, err := os.CreateTemp(t.TempDir(), "daemon-*.log")
		if err != nil {
			t.Fatalf("log file: %v", err)
		}
		defer f.Close() // the child keeps its own descriptor
		n.logPath = f.Name()
		n.cmd.Stderr = f
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start cronlock: %v", err)
	}
	go func() {
		_ = n.cmd.Wait() // the exit code says all the tests need
		n.exit = n.cmd.ProcessState.ExitCode()
		close(n.done)
	}()
	t.Cleanup(n.cleanup)
	return n
}

// stateDirs holds each test's root of node state directories (package
// statedir): one per node name, so that a node restarted under the same
// name finds what its previous incarnation left.
var stateDirs sync.Map // *testing.T → string

// stateDir returns the state directory of the test's node called name.
func stateDir(t *testing.T, name string) string {
	root, ok := stateDirs.Load(t)
	if !ok {
		root, _ = stateDirs.LoadOrStore(t, t.TempDir())
		t.Cleanup(func() { stateDirs.Delete(t) })
	}
	return filepath.Join(root.(string), name)
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func nodeName(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CRONLOCK_NODE_ID="); ok {
			return v
		}
	}
	return "node"
}

func (n *node) cleanup() {
	select {
	case <-n.done:
	default:
		n.Kill()
	}
	if n.logPath == "" || n.wrapped {
		return
	}
	if n.exit != 0 || n.t.Failed() {
		for _, pid := range n.runPIDs() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// Pid is the daemon's process id.
func (n *node) Pid() int { return n.cmd.Process.Pid }

// Signal sends sig to the daemon.
func (n *node) Signal(sig syscall.Signal) {
	n.t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.t.Fatalf("%s: signal %v: %v", n.name, sig, err)
	}
}

// Wait blocks until the daemon exits or timeout passes (then the test fails
// and the daemon is killed). It returns the exit code, -1 for a signal.
func (n *node) Wait(timeout time.Duration) int {
	n.t.Helper()
	select {
	case <-n.done:
		return n.exit
	case <-time.After(timeout):
		n.Kill()
		n.t.Fatalf("%s: daemon still running %v after the wait began; killed it", n.name, timeout)
		return -1
	}
}

// Kill sends SIGKILL and waits for the daemon to exit.
func (n *node) Kill() {
	_ = n.cmd.Process.Kill()
	<-n.done
}

// Logs returns the daemon's log entries so far. A skipped slot appears
// once per reason: the summariser (actors/repeats.go) writes a left-out
// `slot skipped` at debug level and may write it again, with its count,
// when the repeated condition ends; the second line is dropped here.
func (n *node) Logs() []logEntry {
	n.t.Helper()
	all := parseLogs(n.t, n.logPath)
	out := all[:0]
	seen := map[string]bool{}
	for _, e := range all {
		if e.Msg() == "slot skipped" {
			k := fmt.Sprintf("%s/%d/%s", e.Str("job"), e.Slot(), e.Str("reason"))
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, e)
	}
	return out
}

// WaitLog polls the daemon's log every 20 ms until an entry satisfies
// match, and returns it. After timeout the test fails with what the node
// did instead: whether it exited (and its exit code) and its last log
// lines (tail).
func (n *node) WaitLog(timeout time.Duration, what string, match func(logEntry) bool) logEntry {
	n.t.Helper()
	var found logEntry
	waitForExplained(n.t, timeout, n.name+": log "+what, func() bool {
		for _, e := range n.Logs() {
			if match(e) {
				found = e
				return true
			}
		}
		return false
	}, func() string { return n.tail(20) })
	return found
}

// tail says whether the daemon has exited (with its exit code) and quotes
// its last lines of log (at most lines; none when its log is discarded).
func (n *node) tail(lines int) string {
	state := "still running"
	select {
	case <-n.done:
		state = fmt.Sprintf("exited with code %d", n.exit)
	default:
	}
	if n.logPath == "" {
		return state + "; its log is discarded"
	}
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return state + "; log: " + err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return fmt.Sprintf("%s; last %d of %d log lines:\n%s", state, min(lines, len(all)), len(all),
		strings.Join(all[max(0, len(all)-lines):], "\n"))
}

// runPIDs are the pids (= process group ids) of the runs the daemon logged.
func (n *node) runPIDs() []int {
	var pids []int
	for _, e := range parseLogs(n.t, n.logPath) {
		if e.Msg() == "run started" && e.Int("pid") > 0 {
			pids = append(pids, int(e.Int("pid")))
		}
	}
	return pids
}

// logEntry is one JSON log line of the daemon.
type logEntry map[string]any

// Msg is the entry's "msg" field.
func (e logEntry) Msg() string { return e.Str("msg") }

// Str returns a string field, "" when absent.
func (e logEntry) Str(k string) string { s, _ := e[k].(string); return s }

// Int returns a numeric field, 0 when absent.
func (e logEntry) Int(k string) int64 { f, _ := e[k].(float64); return int64(f) }

// Slot returns the entry's slot as Unix seconds. "run started/finished"
// log it as a number; "slot skipped" logs it as an RFC 3339 time.
func (e logEntry) Slot() int64 {
	switch v := e["slot"].(type) {
	case float64:
		return int64(v)
	case string:
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err == nil {
			return ts.Unix()
		}
	}
	return 0
}

// Time is the entry's "ts" field.
func (e logEntry) Time() time.Time {
	ts, _ := time.Parse(time.RFC3339Nano, e.Str("ts"))
	return ts
}

func (e logEntry) is(msg, job string) bool { return e.Msg() == msg && e.Str("job") == job }

// parseLogs reads a JSON-lines log file. A last line without its newline
// (the daemon is still writing it) is ignored; any other line that is not
// JSON fails the test.
func parseLogs(t *testing.T, path string) []logEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	var out []logEntry
	lines := strings.SplitAfter(string(data), "\n")
	for _, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			break
		}
		var e logEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// waitFor polls cond every 20 ms until it holds; the test fails after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitForExplained(t, timeout, what, cond, nil)
}

// waitForExplained is waitFor whose failure message ends with explain()
// (evaluated once, at the timeout; nil: nothing more).
func waitForExplained(t *testing.T, timeout time.Duration, what string, cond func() bool, explain func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if explain != nil {
				t.Fatalf("timed out after %v waiting for %s; %s", timeout, what, explain())
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeConfig writes cfg as JSON (one of the formats the daemon loads) to
// a new file in t.TempDir() and returns its path. JSON spares the tests
// YAML quoting of shell commands.
func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "cronlock.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return path
}

// ledgerCommand wraps work (a shell snippet, may be "") so that the run
// appends one line `JOB SLOT NODE START_NS END_NS` to ledger when work has
// finished. SLOT is CRONLOCK_SCHEDULED_TIME (RFC 3339). One short `>>` write
// is atomic on a local file, so concurrent runs never interleave lines.
func ledgerCommand(ledger, work string) string {
	if work != "" {
		work += "; "
	}
	return fmt.Sprintf(`s=$(date +%%s%%N); %secho "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME $CRONLOCK_NODE_ID $s $(date +%%s%%N)" >> %s`,
		work, shellQuote(ledger))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ledgerRun is one line of the run ledger.
type ledgerRun struct {
	Job        string
	Slot       int64 // Unix seconds
	Node       string
	Start, End time.Time
}

// ledgerLines returns the whitespace-separated fields of each line of a
// ledger file; a missing file is an empty ledger.
func ledgerLines(t testing.TB, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l != "" {
			out = append(out, strings.Fields(l))
		}
	}
	return out
}

// readLedger parses the ledger file; a missing file is an empty ledger.
func readLedger(t *testing.T, path string) []ledgerRun {
	t.Helper()
	var runs []ledgerRun
	for _, fs := range ledgerLines(t, path) {
		if len(fs) != 5 {
			t.Fatalf("ledger line %q: got %d fields, want 5", fs, len(fs))
		}
		slot, err1 := time.Parse(time.RFC3339, fs[1])
		start, err2 := strconv.ParseInt(fs[3], 10, 64)
		end, err3 := strconv.ParseInt(fs[4], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("ledger line %q: %v", fs, err)
		}
		runs = append(runs, ledgerRun{Job: fs[0], Slot: slot.Unix(), Node: fs[2],
			Start: time.Unix(0, start), End: time.Unix(0, end)})
	}
	return runs
}

// processGone reports whether pid no longer runs: it does not exist, or it
// is a zombie. Orphaned grandchildren are reparented to PID 1, which in some
// containers never reaps them; a zombie executes nothing and holds nothing
// but its process-table entry, so it counts as gone.
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, ok := procState(pid)
	return !ok || st == "Z"
}

// procState returns the state letter and whether /proc/PID/stat was read.
func procState(pid int) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// pid (comm) S ppid pgrp ... ; comm may contain spaces and parentheses.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	fs := strings.Fields(rest)
	if len(fs) < 1 {
		return "", false
	}
	return fs[0], true
}

// procInfo is one process of the host's /proc (from /proc/PID/stat,
// proc(5)).
type procInfo struct {
	pid, ppid, pgid int
	comm            string // "(name)", as /proc shows it
	state           string
	start           string // start time in ticks: with pid, names one process
}

// procStats reads every process of /proc; processes that exit meanwhile
// are left out.
func procStats(t *testing.T) []procInfo {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []procInfo
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) S ppid pgrp ...; comm may contain spaces and parentheses.
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		f := strings.Fields(s[end+1:])
		if open < 0 || len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		out = append(out, procInfo{pid: pid, ppid: ppid, pgid: pgid, comm: s[open : end+1], state: f[0], start: f[19]})
	}
	return out
}

// liveGroupMembers lists the non-zombie processes whose process group is
// pgid, as "pid (comm) state".
func liveGroupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	var live []string
	for _, p := range procStats(t) {
		if p.pgid == pgid && p.state != "Z" {
			live = append(live, fmt.Sprintf("%d %s %s", p.pid, p.comm, p.state))
		}
	}
	return live
}

// stopAll sends SIGTERM to every node and checks that each exits 0 within
// timeout.
func stopAll(t *testing.T, timeout time.Duration, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		n.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		if code := n.Wait(timeout); code != 0 {
			t.Errorf("%s: exit code after SIGTERM: got %d, want 0", n.name, code)
		}
	}
}

// nextSecondWithin returns the Unix second of the first whole second at
// least lead from now, and its 6-field cron schedule (second S of every
// minute), which fires once in the test's lifetime. lead must cover the
// daemon's start-up, or the slot passes before the daemon schedules it.
func nextSecondWithin(lead time.Duration) (int64, string) {
	at := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	return at.Unix(), fmt.Sprintf("%d * * * * *", at.Second())
}
