//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// node is one cronlock daemon started by the driver.
type node struct {
	id      string
	cmd     *exec.Cmd
	log     string
	started time.Time // just before exec
	done    chan struct{}
	err     error // the exit, once done is closed
}

// writeConfig writes cfg as JSON into a fresh directory and returns its path.
func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "cronlock.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("config: %v", err)
	}
	return path
}

// startNodes starts n daemons of the binary bin (node ids n1…nN, each with
// its own state directory and JSON log file) on the config file cfg and
// waits until every one has logged "engine running" (at most 30 s). A
// t.Cleanup kills those still running.
func startNodes(t *testing.T, bin, cfg string, n int) []*node {
	t.Helper()
	var nodes []*node
	for i := range n {
		nd := &node{id: fmt.Sprintf("n%d", i+1), log: filepath.Join(t.TempDir(), "daemon.log"), done: make(chan struct{})}
		f, err := os.Create(nd.log)
		if err != nil {
			t.Fatalf("log file: %v", err)
		}
		nd.cmd = exec.Command(bin, "-config", cfg, "-log-format", "json")
		nd.cmd.Env = append(daemonEnv(), "CRONLOCK_NODE_ID="+nd.id, "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
		if dir := os.Getenv("CRONLOCK_BENCH_PROFILE"); dir != "" {
			nd.cmd.Env = append(nd.cmd.Env, "BENCHPROFILE_DIR="+dir, "BENCHPROFILE_SECONDS="+os.Getenv("CRONLOCK_BENCH_PROFILE_SECONDS"))
		}
		nd.cmd.Stderr = f
		nd.started = time.Now()
		err = nd.cmd.Start()
		f.Close()
		if err != nil {
			t.Fatalf("start %s: %v", nd.id, err)
		}
		go func() { nd.err = nd.cmd.Wait(); close(nd.done) }()
		t.Cleanup(func() { _ = nd.cmd.Process.Kill(); <-nd.done })
		nodes = append(nodes, nd)
	}
	for _, nd := range nodes {
		nd.waitLog(t, `"engine running"`, 30*time.Second)
	}
	return nodes
}

// daemonEnv is the driver's environment without its own CRONLOCK_BENCH_*
// settings (which the daemon would warn about as unknown CRONLOCK_* keys).
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRONLOCK_BENCH_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitLog polls the node's log every 5 ms until it contains s.
func (nd *node) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !strings.Contains(nd.read(t), s); time.Sleep(5 * time.Millisecond) {
		select {
		case <-nd.done:
			t.Fatalf("%s exited (%v) before logging %s:\n%s", nd.id, nd.err, s, tail(nd.read(t)))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %s within %v:\n%s", nd.id, s, timeout, tail(nd.read(t)))
		}
	}
}

func (nd *node) read(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(nd.log)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return string(data)
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// stopNodes sends SIGTERM to every node and waits for all (60 s at most).
// A node that exits with an error fails the test.
func stopNodes(t *testing.T, nodes []*node) {
	t.Helper()
	for _, nd := range nodes {
		_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, nd := range nodes {
		select {
		case <-nd.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not stop within 60 s of SIGTERM", nd.id)
		}
		if nd.err != nil {
			t.Errorf("%s exited with %v:\n%s", nd.id, nd.err, tail(nd.read(t)))
		}
	}
}

// cpu reads the node's own CPU time so far (ProcessCPU: its threads'
// schedstat, to the ns; its children's is not included); CPUBetween of two
// readings is the CPU between them.
func (nd *node) cpu(t *testing.T) ProcCPU {
	t.Helper()
	c, err := ProcessCPU(nd.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("%s: %v", nd.id, err)
	}
	return c
}

// rssMiB is the node's resident set size (VmRSS of /proc/PID/status).
func (nd *node) rssMiB(t *testing.T) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", nd.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("%s: %v", nd.id, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				t.Fatalf("%s: VmRSS %q: %v", nd.id, v, err)
			}
			return kib / 1024
		}
	}
	t.Fatalf("%s: no VmRSS in /proc/PID/status", nd.id)
	return 0
}

// logLine is the part of a JSON log line the driver reads.
type logLine struct {
	Msg         string `json:"msg"`
	TS          string `json:"ts"`
	Slot        int64  `json:"slot"`
	FireDelayUs *int64 `json:"fire_delay_us"`
	ClaimedUs   *int64 `json:"claimed_us"` // slot → won claim answered; absent in builds before it
}

// zapTime is the layout of zapcore.ISO8601TimeEncoder, the daemon's "ts".
const zapTime = "2006-01-02T15:04:05.000Z0700"

// lines returns the node's log lines with message msg.
func (nd *node) lines(t *testing.T, msg string) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(nd.read(t)))
	sc.Buffer(nil, 1<<20)
	needle := `"msg":"` + msg + `"`
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(needle)) {
			continue
		}
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: log line %q: %v", nd.id, sc.Bytes(), err)
		}
		out = append(out, l)
	}
	return out
}

// startedMs returns one field of the nodes' "run started" lines (µs,
// given as ms) for slots in [from, to]: field picks it (nil when the line
// has none, e.g. from a build that does not log it).
func startedMs(t *testing.T, nodes []*node, from, to int64, field func(logLine) *int64) []float64 {
	var out []float64
	for _, nd := range nodes {
		for _, l := range nd.lines(t, "run started") {
			if v := field(l); v != nil && l.Slot >= from && l.Slot <= to {
				out = append(out, float64(*v)/1000)
			}
		}
	}
	return out
}

// fireDelaysMs returns the fire delays (ms) the nodes logged with "run
// started" for slots in [from, to].
func fireDelaysMs(t *testing.T, nodes []*node, from, to int64) []float64 {
	return startedMs(t, nodes, from, to, func(l logLine) *int64 { return l.FireDelayUs })
}

// claimedMs returns, for the won claims whose runs the nodes logged with
// "run started" for slot, how long after the slot each claim's answer
// came back (claimed_us, ms); none from a build that does not log it.
func claimedMs(t *testing.T, nodes []*node, slot int64) []float64 {
	return startedMs(t, nodes, slot, slot, func(l logLine) *int64 { return l.ClaimedUs })
}

// logProblems logs, for each node, how many warn and error lines it wrote,
// by message (with the first such line), so that a missed slot or a
// failed claim shows its cause in the test log.
func logProblems(t *testing.T, nodes []*node) {
	t.Helper()
	for _, nd := range nodes {
		count, first := map[string]int{}, map[string]string{}
		for _, l := range strings.Split(nd.read(t), "\n") {
			if !strings.Contains(l, `"level":"warn"`) && !strings.Contains(l, `"level":"error"`) {
				continue
			}
			var e struct{ Msg string }
			_ = json.Unmarshal([]byte(l), &e)
			if count[e.Msg]++; count[e.Msg] == 1 {
				first[e.Msg] = l
			}
		}
		for msg, n := range count {
			t.Logf("%s: %d × %q, first: %s", nd.id, n, msg, first[msg])
		}
	}
}
