package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHooks_OnFailureResultAndExitCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Each hook writes "RESULT EXIT_CODE" to DIR/JOB.HOOK. $CRONLOCK_JOB is
	// bare, so the shell (not the config loader) expands it.
	hook := func(name string) string {
		return fmt.Sprintf(`echo "$CRONLOCK_RESULT $CRONLOCK_EXIT_CODE" > %s/"$CRONLOCK_JOB".%s`, shellQuote(dir), name)
	}
	_, sched := nextSecondWithin(2 * time.Second)
	job := func(name, command string) map[string]any {
		return map[string]any{"name": name, "schedule": sched, "command": command, "timeout": "1s", "kill_grace": "1s",
			"on_success": hook("on_success"), "on_failure": hook("on_failure")}
	}
	n := startNode(t, writeConfig(t, memoryConfig(
		job("exits3", "exit 3"),
		job("times-out", "sleep 100"),
		job("succeeds", "true"),
	)))

	tests := []struct {
		job, hook, want, absent string
	}{
		{job: "exits3", hook: "on_failure", want: "failure 3", absent: "on_success"},
		{job: "times-out", hook: "on_failure", want: "timeout -1", absent: "on_success"},
		{job: "succeeds", hook: "on_success", want: "success 0", absent: "on_failure"},
	}
	for _, tc := range tests {
		n.WaitLog(10*time.Second, tc.job+" hook", func(e logEntry) bool {
			return e.Str("job") == tc.job && strings.HasPrefix(e.Msg(), "hook ")
		})
	}
	stopAll(t, 10*time.Second, n) // hooks are drained before exit
	for _, tc := range tests {
		got, err := os.ReadFile(filepath.Join(dir, tc.job+"."+tc.hook))
		if err != nil {
			t.Errorf("%s %s: got %v, want it to have run", tc.job, tc.hook, err)
		} else if strings.TrimSpace(string(got)) != tc.want {
			t.Errorf("%s %s: got CRONLOCK_RESULT CRONLOCK_EXIT_CODE %q, want %q", tc.job, tc.hook, strings.TrimSpace(string(got)), tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, tc.job+"."+tc.absent)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s %s: got it run (stat: %v), want not run", tc.job, tc.absent, err)
		}
	}
	for _, e := range n.Logs() {
		if e.Msg() == "hook failed" {
			t.Errorf("got log %q for job %s (%v), want every hook to succeed", e.Msg(), e.Str("job"), e)
		}
	}
}
