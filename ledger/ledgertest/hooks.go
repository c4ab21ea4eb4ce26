package ledgertest

import (
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
	if err := s.StoreHookResult(ctx, "hooks-job", "100", first, time.Minute); err != nil {
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
		if err := s.StoreHookResult(ctx, "hooks-job", "100", r, time.Minute); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
	got, _ = s.HookResults(ctx, "hooks-job", "100")
	if len(got) != ledger.MaxHookResults || got[0].ExitCode != 0 || got[len(got)-1].ExitCode != ledger.MaxHookResults-1 {
		t.Errorf("after %d more: got %+v, want the newest %d in order", ledger.MaxHookResults, got, ledger.MaxHookResults)
	}
	if err := s.StoreHookResult(ctx, "hooks-job", "m7", first, 50*time.Millisecond); err != nil {
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
