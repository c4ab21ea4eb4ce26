package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestControl_RunWaitTakerKilled: `cronlock run JOB -wait` whose request
// was taken by a daemon that is then SIGKILLed mid-run fails within a few
// seconds (the heartbeat TTL, 1.5 s, plus the 1 s check), saying the
// daemon is gone and the outcome unknown; before, it waited for the
// request's status to expire, an hour.
func TestControl_RunWaitTakerKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "job", "schedule": "0 0 1 1 *",
		"command": `echo "$CRONLOCK_RUN_ID" >> ` + shellQuote(ledger) + `; sleep 60`}))
	nodes, _ := startNodes(t, cfg, nodeSpec{id: "w1"})
	waitFor(t, 5*time.Second, "a live node", func() bool { return len(readNodes(t, cfg).states()) == 1 })

	cmd := exec.Command(binary, "run", "job", "-wait", "-config", cfg)
	cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	waitFor(t, 5*time.Second, "the run started", func() bool { return len(ledgerLines(t, ledger)) == 1 })
	nodes[0].Kill()
	killed := time.Now()
	select {
	case <-exited:
	case <-time.After(8 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("cronlock run -wait still waiting 8s after its taker was killed; stderr %q", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "w1 took request") ||
		!strings.Contains(stderr.String(), "not run again") {
		t.Errorf("cronlock run -wait: exit %d, stderr %q; want 1 saying w1 took it and is gone", code, stderr.String())
	}
	t.Logf("reported %v after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
}
