package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"go.uber.org/zap/zaptest"
)

// A hook's result is kept with its run's occurrence (KeepResults): a real
// on_failure hook that prints a job env value and exits 3 is kept as
// result exit, exit code 3, its output redacted; a successful hook as
// success.
func TestHookRunner_KeepsResultsWithTheOccurrence(t *testing.T) {
	store := memory.NewOutput()
	runner := NewHookRunner(zaptest.NewLogger(t), NewMetrics(nil), nil, nil, nil, nil)
	runner.KeepResults(store, ledger.Retention{Age: time.Hour}, nil)
	done := make(chan error, 1)
	go func() { done <- runner.Run(context.Background()) }()
	slot := time.Unix(1800000000, 0)
	job := config.Job{Name: "backup", Shell: "/bin/sh", KillGrace: time.Second, Env: map[string]string{"SECRET": "hunter22"},
		OnFailure: `echo "paging about $SECRET"; exit 3`, OnSuccess: "echo fine"}
	runner.Inbox() <- RunFinished{RunInfo: RunInfo{Job: "backup", RunID: "r1", Node: "n1", Slot: slot, Fence: 7,
		Trigger: ledger.TriggerSchedule}, Cfg: job, Result: ledger.ResultFailure, ExitCode: 1, Attempts: 1}
	runner.Inbox() <- RunFinished{RunInfo: RunInfo{Job: "backup", RunID: "r2", Node: "n1", Slot: slot.Add(time.Minute), Fence: 8,
		Trigger: ledger.TriggerSchedule}, Cfg: job, Result: ledger.ResultSuccess, Attempts: 1}
	runner.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]ledger.HookResult{
		ledger.OccurrenceID(slot.Unix(), 7):                  {Hook: "on_failure", Result: HookFailExit, ExitCode: 3, Output: "paging about [redacted env SECRET]\n"},
		ledger.OccurrenceID(slot.Add(time.Minute).Unix(), 8): {Hook: "on_success", Result: ledger.ResultSuccess, Output: "fine\n"},
	}
	for occ, w := range want {
		var got []ledger.HookResult
		for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got, _ = store.HookResults(context.Background(), "backup", occ) // kept after the hook's end
		}
		if len(got) != 1 || got[0].Hook != w.Hook || got[0].Result != w.Result || got[0].ExitCode != w.ExitCode ||
			got[0].Output != w.Output || got[0].Started.IsZero() || got[0].Finished.Before(got[0].Started) {
			t.Errorf("occurrence %s: got %+v, want one %+v with its start and end", occ, got, w)
		}
		if strings.Contains(got[0].Output, "hunter22") {
			t.Errorf("occurrence %s: the env value is in the kept output", occ)
		}
	}
}
