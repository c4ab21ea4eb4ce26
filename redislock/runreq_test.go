package redislock

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/internal/redistest"
)

// 50 requests, 4 concurrent takers: every request is taken exactly once,
// and marked taken by its taker; a taken request cannot be withdrawn, an
// untaken one can (and is then cancelled and never taken).
func TestRedis_RunRequestsTakenOnce(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	ctx := ledgertest.Ctx(t)
	now := time.Now()
	values := map[string]string{}
	for i := range 50 {
		id := fmt.Sprintf("req-%02d", i)
		v, err := r.RequestRun(ctx, ledger.RunRequest{ID: id, Job: "backup", Requester: "ops@box", At: now})
		if err != nil {
			t.Fatal(err)
		}
		values[id] = v
	}
	if jobs, err := r.PendingRunJobs(ctx, now.Add(-time.Minute)); err != nil || len(jobs) != 1 || jobs[0] != "backup" {
		t.Fatalf("PendingRunJobs: %q, %v; want [backup]", jobs, err)
	}
	var mu sync.Mutex
	taken := map[string]string{}
	var wg sync.WaitGroup
	for n := range 4 {
		node := fmt.Sprintf("n%d", n)
		wg.Go(func() {
			for {
				req, err := r.TakeRun(ctx, "backup", node, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if req == nil {
					return
				}
				mu.Lock()
				if prev, ok := taken[req.ID]; ok {
					t.Errorf("%s taken by %s and %s", req.ID, prev, node)
				}
				taken[req.ID] = node
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(taken) != 50 {
		t.Fatalf("%d requests taken, want 50", len(taken))
	}
	st, err := r.GetRunStatus(ctx, "backup", "req-07")
	if err != nil || st == nil || st.State != ledger.RunTaken || st.Node != taken["req-07"] {
		t.Errorf("status of req-07: %+v, %v; want taken by %s", st, err, taken["req-07"])
	}
	if ok, err := r.CancelRun(ctx, "backup", "req-07", values["req-07"], now); err != nil || ok {
		t.Errorf("withdrawing a taken request: %v, %v; want false", ok, err)
	}
	v, err := r.RequestRun(ctx, ledger.RunRequest{ID: "late", Job: "backup", Requester: "ops@box", At: now})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.CancelRun(ctx, "backup", "late", v, now); err != nil || !ok {
		t.Errorf("withdrawing an untaken request: %v, %v; want true", ok, err)
	}
	if req, err := r.TakeRun(ctx, "backup", "n0", now); err != nil || req != nil {
		t.Errorf("after the withdrawal: took %+v, %v; want nothing", req, err)
	}
	if st, _ := r.GetRunStatus(ctx, "backup", "late"); st == nil || st.State != ledger.RunCancelled {
		t.Errorf("status of the withdrawn request: %+v, want cancelled", st)
	}
}
