package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
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
	waitFor(t, 3*time.Second, "k2 shown gone", func() bool { return readNodes(t, cfg).states()["k2"] == "gone" })
	gone := time.Since(killed)
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
