package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// Tests of the cluster control plane (issue 12): the node list, config
// drift, audited pauses, the HTTP API and runs on the cluster.

// cli runs `cronlock ARGS… -config cfgFile` as an operator would, with a
// state directory of its own, and returns stdout, stderr and the exit code.
func cli(t *testing.T, cfgFile string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "-config", cfgFile)...)
	cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("cronlock %s: %v", strings.Join(args, " "), err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// nodesView is `cronlock nodes -json`.
type nodesView struct {
	Nodes []struct {
		NodeID     string            `json:"node_id"`
		State      string            `json:"state"`
		AgeMs      int64             `json:"age_ms"`
		ConfigHash string            `json:"config_hash"`
		Jobs       map[string]string `json:"jobs"`
		Drift      []struct {
			Job  string `json:"job"`
			Kind string `json:"kind"`
		} `json:"drift"`
	} `json:"nodes"`
	Drift []struct {
		Job     string   `json:"job"`
		On      []string `json:"on"`
		Missing []string `json:"missing"`
	} `json:"drift"`
}

func readNodes(t *testing.T, cfgFile string) nodesView {
	t.Helper()
	out, errs, code := cli(t, cfgFile, "nodes", "-json")
	var v nodesView
	if code != 0 {
		t.Fatalf("cronlock nodes -json: exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("cronlock nodes -json: %v\n%s", err, out)
	}
	return v
}

// states maps node id → state in v.
func (v nodesView) states() map[string]string {
	out := map[string]string{}
	for _, n := range v.Nodes {
		out[n.NodeID] = n.State
	}
	return out
}

// controlConfig is a redis config whose nodes beat every 500ms (TTL 1.5s).
func controlConfig(addr string, jobs ...map[string]any) map[string]any {
	cfg := redisConfig(addr, jobs...)
	cfg["node"] = map[string]any{"shutdown_timeout": "10s", "heartbeat_interval": "500ms"}
	return cfg
}

// TestControl_KilledNodeGoneWithinTTL is issue 12, "What it must show" 5:
// three daemons are listed live; one is SIGKILLed; within its heartbeat
// TTL (1.5s, plus one beat of the reader's rounding) `cronlock nodes`
// shows it gone while the others stay live, and its record expires one
// TTL later.
func TestControl_KilledNodeGoneWithinTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "yearly", "schedule": "0 0 1 1 *", "command": "true"}))
	nodes, _ := startNodes(t, cfg, nodeSpec{id: "k1"}, nodeSpec{id: "k2"}, nodeSpec{id: "k3"})
	waitFor(t, 5*time.Second, "three live nodes", func() bool {
		s := readNodes(t, cfg).states()
		return s["k1"] == "live" && s["k2"] == "live" && s["k3"] == "live"
	})
	out, _, code := cli(t, cfg, "nodes")
	if code != 0 || !strings.Contains(out, "NODE") || strings.Count(out, " live ") != 3 {
		t.Errorf("cronlock nodes: exit %d, want a table of 3 live nodes:\n%s", code, out)
	}
	nodes[1].Kill()
	killed := time.Now()
	// gone is when the `cronlock nodes` call that first showed k2 gone
	// started: the call itself (a process started and connected) takes up
	// to half a second on a loaded machine, and is not the daemon's delay.
	var gone time.Duration
	waitFor(t, 3*time.Second, "k2 shown gone", func() bool {
		call := time.Now()
		if readNodes(t, cfg).states()["k2"] != "gone" {
			return false
		}
		gone = call.Sub(killed)
		return true
	})
	if s := readNodes(t, cfg).states(); s["k1"] != "live" || s["k3"] != "live" {
		t.Errorf("after k2 was killed: states %v, want k1 and k3 live", s)
	}
	if gone > 2*time.Second {
		t.Errorf("k2 shown gone %v after SIGKILL, want within its TTL 1.5s (+0.5s)", gone)
	}
	waitFor(t, 4*time.Second, "k2's record expired", func() bool { _, ok := readNodes(t, cfg).states()["k2"]; return !ok })
	t.Logf("k2 gone after %v, record expired after %v", gone.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	stopAll(t, 15*time.Second, nodes[0], nodes[2])
	if s := readNodes(t, cfg).states(); len(s) != 0 {
		t.Errorf("after a clean stop of k1 and k3: nodes %v, want none (a clean stop deletes the record)", s)
	}
}

// driftNamed reports whether e is a drift warning whose added, removed and
// changed jobs together are exactly jobs.
func driftNamed(e logEntry, jobs ...string) bool {
	if !strings.HasPrefix(e.Msg(), "config drift: this node's") || e.Str("level") != "warn" {
		return false
	}
	var named []string
	for _, k := range []string{"added", "removed", "changed"} {
		l, _ := e[k].([]any)
		for _, x := range l {
			s, _ := x.(string)
			named = append(named, s)
		}
	}
	if len(named) != len(jobs) {
		return false
	}
	for _, j := range jobs {
		if !strings.Contains(" "+strings.Join(named, " ")+" ", " "+j+" ") {
			return false
		}
	}
	return true
}

// metricLine reports whether the node's /metrics has exactly line.
func metricLine(t *testing.T, listen, line string) bool {
	_, body := httpGet(t, "http://"+listen+"/metrics")
	return strings.Contains(body, "\n"+line+"\n")
}

// TestControl_ConfigDrift is issue 12, "What it must show" 1: three
// daemons, d2 with an extra job and d3 with a changed schedule. `cronlock
// nodes` lists three live nodes and names both jobs; every node logs the
// drift naming the two jobs; cronlock_config_drift is 1 on all three;
// after a SIGHUP that aligns the configs it is 0 on all three and each
// logs that the drift is over.
func TestControl_ConfigDrift(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	base := []map[string]any{
		{"name": "backup", "schedule": "0 3 * * *", "command": "true"},
		{"name": "report", "schedule": "0 4 * * *", "command": "true"},
	}
	extra := append(append([]map[string]any{}, base...), map[string]any{"name": "extra", "schedule": "0 5 * * *", "command": "true"})
	changed := []map[string]any{base[0], {"name": "report", "schedule": "30 4 * * *", "command": "true"}}
	cfgs := []string{writeConfig(t, controlConfig(srv.Addr(), base...)), writeConfig(t, controlConfig(srv.Addr(), extra...)),
		writeConfig(t, controlConfig(srv.Addr(), changed...))}
	var nodes []*node
	var listen []string
	for i, cfg := range cfgs {
		l := freeAddr(t)
		n := startNode(t, cfg, withNodeID([]string{"d1", "d2", "d3"}[i]), withEnv("CRONLOCK_HTTP_LISTEN="+l))
		nodes, listen = append(nodes, n), append(listen, l)
	}
	for _, n := range nodes {
		waitEngineRunning(n)
	}
	waitFor(t, 5*time.Second, "three live nodes", func() bool { return len(readNodes(t, cfgs[0]).states()) == 3 })
	v := readNodes(t, cfgs[0])
	var drifting []string
	for _, j := range v.Drift {
		drifting = append(drifting, j.Job)
	}
	if s := v.states(); s["d1"] != "live" || s["d2"] != "live" || s["d3"] != "live" || strings.Join(drifting, ",") != "extra,report" {
		t.Errorf("cronlock nodes: states %v, drifting jobs %q; want d1..d3 live, extra and report", s, drifting)
	}
	out, _, _ := cli(t, cfgs[0], "status")
	if !strings.Contains(out, "2 configurations on d1, d2, d3") {
		t.Errorf("cronlock status does not show report's drift:\n%s", out)
	}
	for i, n := range nodes {
		n.WaitLog(5*time.Second, "the drift warning naming extra and report", func(e logEntry) bool { return driftNamed(e, "extra", "report") })
		waitFor(t, 2*time.Second, "cronlock_config_drift 1", func() bool { return metricLine(t, listen[i], "cronlock_config_drift 1") })
	}
	writeConfigAt(t, cfgs[1], controlConfig(srv.Addr(), base...))
	writeConfigAt(t, cfgs[2], controlConfig(srv.Addr(), base...))
	for _, n := range nodes[1:] {
		n.Signal(syscall.SIGHUP)
	}
	for i, n := range nodes {
		n.WaitLog(5*time.Second, "config drift over", func(e logEntry) bool { return strings.HasPrefix(e.Msg(), "config drift over") })
		if !metricLine(t, listen[i], "cronlock_config_drift 0") {
			t.Errorf("%s: /metrics has no line \"cronlock_config_drift 0\" after the aligning reload", n.name)
		}
	}
	v = readNodes(t, cfgs[0])
	if len(v.Drift) != 0 {
		t.Errorf("cronlock nodes after the reload: drift %+v, want none", v.Drift)
	}
	// d3's reload is in report's audit trail, with report's new hash.
	out, _, _ = cli(t, cfgs[0], "history", "report", "-events", "-json")
	var evs []struct {
		Type, Node string
		ConfigHash string `json:"config_hash"`
	}
	if err := json.Unmarshal([]byte(out), &evs); err != nil || len(evs) != 1 || evs[0].Type != "reload" || evs[0].Node != "d3" ||
		evs[0].ConfigHash != v.Nodes[0].Jobs["report"] {
		t.Errorf("history report -events: %v\n%s\nwant one reload by d3 with hash %s", err, out, v.Nodes[0].Jobs["report"])
	}
	stopAll(t, 15*time.Second, nodes...)
}

// TestControl_PauseForLiftsItself is issue 12, "What it must show" 3:
// `cronlock pause tick -for 3s -note "db migration"` on a three-node
// cluster running a per-second job. No node runs a slot of the pause
// (each is skipped as paused by the node whose claim came first, the
// others find it claimed); status shows the note and the end; the job
// runs again by itself after 3 s; `history -events` shows the pause (who,
// note, end) and the auto-resume at its end.
func TestControl_PauseForLiftsItself(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "tick", "schedule": "* * * * * *",
		"command": ledgerCommand(ledger, "")}))
	nodes, ready := startNodes(t, cfg, nodeSpec{id: "p1"}, nodeSpec{id: "p2"}, nodeSpec{id: "p3"})
	waitLedgerSlotAfter(t, ledger, "tick", ready)
	out, errs, code := cli(t, cfg, "pause", "tick", "-for", "3s", "-note", "db migration")
	paused := time.Now()
	if code != 0 || !strings.Contains(out, ": db migration") {
		t.Fatalf("pause: exit %d, %q %q", code, out, errs)
	}
	st, _, _ := cli(t, cfg, "status", "-json")
	var rows []struct {
		Paused bool `json:"paused"`
		Pause  *struct {
			By    string    `json:"by"`
			Note  string    `json:"note"`
			Until time.Time `json:"until"`
		} `json:"pause"`
	}
	if err := json.Unmarshal([]byte(st), &rows); err != nil || len(rows) != 1 || !rows[0].Paused || rows[0].Pause == nil ||
		rows[0].Pause.Note != "db migration" || rows[0].Pause.Until.Sub(paused) > 3*time.Second || !strings.Contains(rows[0].Pause.By, "@") {
		t.Errorf("status -json while paused: %v %s; want paused by user@host with the note and an end 3 s on", err, st)
	}
	// The first slot whose claim comes after the pause to the last one before its end.
	first, last := paused.Unix()+1, paused.Add(3*time.Second).Unix()-1
	waitLedgerSlotAfter(t, ledger, "tick", paused.Add(3*time.Second))
	for _, r := range readLedger(t, ledger) {
		if r.Slot >= first && r.Slot <= last {
			t.Errorf("slot %d ran on %s during the pause", r.Slot, r.Node)
		}
	}
	for s := first; s <= last; s++ {
		skipped := 0
		for _, n := range nodes {
			for _, e := range logsOf(n, "slot skipped", "tick") {
				if e.Slot() == s && e.Str("reason") == "paused" {
					skipped++
				}
			}
		}
		// The first claim records it skipped paused; every node after it
		// reports the ledger's reason (docs/protocol.md, R1).
		if skipped == 0 {
			t.Errorf("slot %d: skipped as paused by no node, want the ledger's paused", s)
		}
	}
	ev, _, code := cli(t, cfg, "history", "tick", "-events", "-json")
	var evs []struct {
		Type, By, Note string
		Until          time.Time
		Auto           bool
	}
	if err := json.Unmarshal([]byte(ev), &evs); code != 0 || err != nil || len(evs) != 2 || evs[0].Type != "auto_resume" || !evs[0].Auto ||
		evs[1].Type != "pause" || evs[1].Note != "db migration" || evs[1].Until.IsZero() {
		t.Errorf("history -events: exit %d, %v\n%s\nwant auto_resume, then the pause with its note and end", code, err, ev)
	}
	stopAll(t, 15*time.Second, nodes...)
}
