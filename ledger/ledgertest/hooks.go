package ledgertest

import (
	"strconv"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// RunHooks runs the conformance cases of ledger.HookStore against s:
// none before a store, results in order per occurrence, the cap of
// ledger.MaxHookResults (the newest kept), and expiry.
func RunHooks(t *testing.T, s ledger.HookStore) {
	ctx := Ctx(t)
	if got, err := s.HookResults(ctx, "hooks-job", "100"); err != nil || len(got) != 0 {
		t.Fatalf("before any: got %v, %v; want none", got, err)
	}
	at := time.Unix(1800000000, 0).UTC()
	first := ledger.HookResult{Hook: "on_failure", Result: "exit", ExitCode: 2, Started: at, Finished: at.Add(time.Second), Output: "paging\n"}
	if err := s.StoreHookResult(ctx, "hooks-job", "100", first, ledger.Retention{Age: time.Minute}); err != nil {
		t.Fatalf("store: %v", err)
	}
	got, err := s.HookResults(ctx, "hooks-job", "100")
	if err != nil || len(got) != 1 || got[0] != first {
		t.Fatalf("after one: got %+v, %v; want [%+v]", got, err, first)
	}
	if other, _ := s.HookResults(ctx, "hooks-job", "m7"); len(other) != 0 {
		t.Errorf("another occurrence: got %v, want none", other)
	}
	for i := range ledger.MaxHookResults {
		r := ledger.HookResult{Hook: "on_success", Result: "success", ExitCode: i}
		if err := s.StoreHookResult(ctx, "hooks-job", "100", r, ledger.Retention{Age: time.Minute}); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
	got, _ = s.HookResults(ctx, "hooks-job", "100")
	if len(got) != ledger.MaxHookResults || got[0].ExitCode != 0 || got[len(got)-1].ExitCode != ledger.MaxHookResults-1 {
		t.Errorf("after %d more: got %+v, want the newest %d in order", ledger.MaxHookResults, got, ledger.MaxHookResults)
	}
	if err := s.StoreHookResult(ctx, "hooks-job", "m7", first, ledger.Retention{Age: 50 * time.Millisecond}); err != nil {
		t.Fatalf("store: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, _ := s.HookResults(ctx, "hooks-job", "m7"); len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("results stored for 50ms still there after 5s")
		}
	}
}

// RunKeptBound runs the case of rule R9 for what is kept beside the
// ledger: with keep.Max 3, storing the output and a hook result of 6
// occurrences leaves those of the newest 3 only (output and hook results
// alike), as the ledger keeps its newest max records.
func RunKeptBound(t *testing.T, s interface {
	ledger.OutputStore
	ledger.HookStore
}) {
	ctx := Ctx(t)
	keep := ledger.Retention{Age: time.Hour, Max: 3}
	for i := range 6 {
		occ := strconv.Itoa(1000 + i)
		if err := s.StoreOutput(ctx, "kept-bound", occ, []byte("out "+occ), keep); err != nil {
			t.Fatalf("store output %s: %v", occ, err)
		}
		if err := s.StoreHookResult(ctx, "kept-bound", occ, ledger.HookResult{Hook: "on_success", Result: "success"}, keep); err != nil {
			t.Fatalf("store hook result %s: %v", occ, err)
		}
		time.Sleep(2 * time.Millisecond) // distinct times of first keeping
	}
	for i := range 6 {
		occ := strconv.Itoa(1000 + i)
		_, err := s.Output(ctx, "kept-bound", occ)
		hooks, herr := s.HookResults(ctx, "kept-bound", occ)
		if kept := i >= 3; kept != (err == nil) || kept != (len(hooks) == 1) || herr != nil {
			t.Errorf("occurrence %s (of 6, max 3): output err %v, %d hook results (%v); want kept %v", occ, err, len(hooks), herr, kept)
		}
	}
}
