package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReload_NestedTOMLKeepsRunning is issue 9, "What it must show" 7: a
// 2 MB deeply nested TOML written over the config of a running daemon,
// then SIGHUP. It used to crash the daemon with a Go stack overflow. Now
// the daemon logs one error line naming the nesting limit, keeps the old
// config, and its job runs every slot exactly once throughout.
func TestReload_NestedTOMLKeepsRunning(t *testing.T) {
	t.Parallel()
	ledger := newLedger(t)
	cfgPath := filepath.Join(t.TempDir(), "cronlock.toml")
	good := fmt.Sprintf("[node]\nshutdown_timeout = \"10s\"\n\n[log]\nlevel = \"debug\"\n\n"+
		"[[jobs]]\nname = \"tick\"\nschedule = \"* * * * * *\"\ncommand = %s\n", strconv.Quote(ledgerCommand(ledger, "")))
	writeFileAtomic(t, cfgPath, []byte(good))
	nodes, ready := startNodes(t, cfgPath, nodeSpec{id: "solo"})
	n := nodes[0]
	waitLedgerSlotAfter(t, ledger, "tick", time.Now().Add(time.Second))

	const levels = 1 << 20 // 2 MB
	writeFileAtomic(t, cfgPath, []byte("a = "+strings.Repeat("[", levels)+strings.Repeat("]", levels)+"\n"))
	mark := len(n.Logs())
	problems := rejectedReload(t, n, 1)
	want := "nesting deeper than 64 levels at line 1"
	if len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
		t.Errorf("problems of the rejected reload: got %q, want one starting %q", problems, want)
	}
	waitLedgerSlotAfter(t, ledger, "tick", time.Now().Add(2*time.Second))
	stopAt := time.Now()
	var errs []string
	for _, e := range n.Logs()[mark:] {
		if e.Str("level") == "error" {
			errs = append(errs, e.Msg())
		}
	}
	if len(errs) != 1 {
		t.Errorf("error lines after the SIGHUP: got %q, want exactly the one rejection", errs)
	}
	stopAll(t, 10*time.Second, n)

	byJob := slotsByJob(readLedger(t, ledger))
	checkOncePerSlot(t, nodes, "tick", byJob["tick"], slotsBetween(ceilSecond(ready)+1, stopAt.Unix()-1, 1))
}
