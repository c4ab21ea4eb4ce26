package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Helpers of the fault tests (faults_*_test.go, issue 4). They build on the
// node harness of harness_test.go and the ledger of ledgerCommand.

// nodeSpec is one daemon of a fault test: its node id and extra environment
// (CRONLOCK_REDIS_ADDRESS of a proxy, CRONLOCK_INTERNAL_CLOCK_OFFSET, …).
type nodeSpec struct {
	id  string
	env []string
}

// startNodes starts one daemon per spec on cfgFile, one after the other,
// each waited for until it logs "engine running". It returns the nodes and
// the instant the last of them logged it.
func startNodes(t *testing.T, cfgFile string, specs ...nodeSpec) ([]*node, time.Time) {
	t.Helper()
	var nodes []*node
	var lastReady time.Time
	for _, s := range specs {
		n := startNode(t, cfgFile, withNodeID(s.id), withEnv(s.env...))
		lastReady = waitEngineRunning(n).Time()
		nodes = append(nodes, n)
	}
	return nodes, lastReady
}

// waitEngineRunning waits up to 20 s for the node's "engine running". Its
// 10 s ran out once in CI (2026-12-06: TestBuildInfo_OnMetrics, a memory
// backend node, under -race while the heavy tests forked); WaitLog now
// says what the node logged meanwhile.
func waitEngineRunning(n *node) logEntry {
	n.t.Helper()
	return n.WaitLog(20*time.Second, `"engine running"`, func(e logEntry) bool { return e.Msg() == "engine running" })
}

// nextPhase is the first instant not before after that lies phase into its
// Unix second. The fault tests inject faults at a chosen point of the
// second, so that which slots fall inside a fault is known.
func nextPhase(after time.Time, phase time.Duration) time.Time {
	return nextPhaseOf(after, time.Second, phase)
}

// nextPhaseOf is nextPhase for slots every period (a whole number of
// seconds): the first instant at or after after that lies phase past a
// multiple of period.
func nextPhaseOf(after time.Time, period, phase time.Duration) time.Time {
	at := after.Truncate(period).Add(phase)
	if at.Before(after) {
		at = at.Add(period)
	}
	return at
}

// sleepUntil sleeps until at. The fault tests hold a fault for a fixed
// span: that span is the test, not a synchronisation.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// everySecondJobs returns n jobs named prefix00… firing every second, each
// appending to ledger, with the fields of extra added to every job.
func everySecondJobs(ledger, prefix string, n int, extra map[string]any) ([]map[string]any, []string) {
	var jobs []map[string]any
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s%02d", prefix, i)
		job := map[string]any{"name": name, "schedule": "* * * * * *", "command": ledgerCommand(ledger, ""), "timeout": "10s"}
		for k, v := range extra {
			job[k] = v
		}
		jobs, names = append(jobs, job), append(names, name)
	}
	return jobs, names
}

// checkNotExited fails the test for every node that has already exited:
// faults must never make a daemon exit.
func checkNotExited(t *testing.T, when string, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		if nodeExited(n) {
			t.Errorf("%s: daemon exited %s with code %d, want it running", n.name, when, n.exit)
		}
	}
}

// nodeExited reports whether n's daemon has exited.
func nodeExited(n *node) bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// logsOf returns the entries of n's log with message msg (and job, if job
// is not "").
func logsOf(n *node, msg, job string) []logEntry {
	var out []logEntry
	for _, e := range n.Logs() {
		if e.Msg() == msg && (job == "" || e.Str("job") == job) {
			out = append(out, e)
		}
	}
	return out
}

// writeFileAtomic replaces path with data through a rename, so that a
// daemon reloading on SIGHUP never reads a half-written file.
func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatalf("write %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("rename %s: %v", tmp, err)
	}
}

// writeConfigAt writes cfg as JSON to path (replacing it atomically).
func writeConfigAt(t *testing.T, path string, cfg map[string]any) {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	writeFileAtomic(t, path, data)
}

// intervalCommand is a job command for runs longer than a slot: it appends
// `start NODE SLOT NS` to ledger, sleeps for sleep, and appends
// `end NODE SLOT NS done`; on SIGTERM it appends `end NODE SLOT NS killed`
// and exits 143. SLOT is CRONLOCK_SCHEDULED_TIME (RFC 3339).
func intervalCommand(ledger string, sleep time.Duration) string {
	l := shellQuote(ledger)
	line := `"$CRONLOCK_NODE_ID $CRONLOCK_SCHEDULED_TIME $(date +%s%N)"`
	return fmt.Sprintf(`trap 'echo end %[1]s killed >> %[2]s; exit 143' TERM; echo start %[1]s >> %[2]s; `+
		`sleep %[3]g & wait $!; echo end %[1]s done >> %[2]s`, line, l, sleep.Seconds())
}

// interval is one run recorded by intervalCommand. End is zero while the
// run has not recorded its end.
type interval struct {
	Node       string
	Slot       int64
	Start, End time.Time
	How        string // "done" or "killed"; "" while running
}

// readIntervals parses an intervalCommand ledger; runs are keyed by node
// and slot and returned in start order.
func readIntervals(t *testing.T, path string) []interval {
	t.Helper()
	byRun := map[string]*interval{}
	var order []string
	for _, fs := range ledgerLines(t, path) {
		if len(fs) < 4 || (fs[0] == "end" && len(fs) != 5) {
			t.Fatalf("ledger line %q: malformed", fs)
		}
		slot, err1 := time.Parse(time.RFC3339, fs[2])
		ns, err2 := strconv.ParseInt(fs[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("ledger line %q: %v", fs, err)
		}
		key := fs[1] + " " + fs[2]
		iv := byRun[key]
		if iv == nil {
			iv = &interval{Node: fs[1], Slot: slot.Unix()}
			byRun[key] = iv
			order = append(order, key)
		}
		if fs[0] == "start" {
			iv.Start = time.Unix(0, ns)
		} else {
			iv.End, iv.How = time.Unix(0, ns), fs[4]
		}
	}
	out := make([]interval, 0, len(order))
	for _, k := range order {
		out = append(out, *byRun[k])
	}
	slices.SortFunc(out, func(a, b interval) int { return a.Start.Compare(b.Start) })
	return out
}

// newLedger returns the path of a fresh ledger file in t.TempDir().
func newLedger(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger") }

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a daemon's http.listen.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// httpGet returns the status code and body of GET url (5 s timeout: a
// bound on a hung daemon, with room for make test's load; the tests that
// time an answer time it themselves).
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
