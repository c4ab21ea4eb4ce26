package redislock

import (
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
)

// The Redis memory of one job's ledger at the default retention
// (ledger.DefaultRetentionMax records, and up to 9 more before a claim
// trims: R9's slack), measured with MEMORY USAGE and documented in
// docs/protocol.md (R9) at its largest: runs with a short output tail,
// and runs with the longest tail kept (ledger.MaxOutputTail).
func TestRedis_LedgerMemoryAtDefaultRetention(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	c := raw(t, srv.Addr())
	for _, tc := range []struct {
		name   string
		output string
		limit  int64 // bytes per job; a check that the retention holds
	}{
		{"short output", "done\n", 64 << 10},
		{"4 KiB output", strings.Repeat("x", ledger.MaxOutputTail), 600 << 10},
	} {
		job := "mem-" + strings.ReplaceAll(tc.name, " ", "-")
		base := time.Now().Add(-time.Hour).Unix()
		for i := range int64(ledger.DefaultRetentionMax + 19) { // the last claim leaves max + slack
			req := ledgertest.Sched(job, base+i, "node-1") // past slots (by backfill): old enough to be trimmed
			req.Trigger, req.Lease, req.IgnorePause = ledger.TriggerBackfill, false, true
			cl := ledgertest.MustClaim(t, r, req, ledger.Claimed)
			now := time.Now()
			if _, err := r.Finish(ledgertest.Ctx(t), ledger.FinishRequest{Job: job, Record: ledger.RunRecord{RunID: req.RunID,
				Slot: req.Slot, Trigger: ledger.TriggerSchedule, Node: "node-1", Fence: cl.Token, Start: now, End: now,
				Attempts: 1, Result: ledger.ResultSuccess, OutputTail: tc.output, Claimed: cl.Now}}); err != nil {
				t.Fatal(err)
			}
		}
		var total int64
		for _, kind := range []string{"state", "occ", "occidx"} {
			n, err := c.Do(ledgertest.Ctx(t), c.B().MemoryUsage().Key(r.key(kind, job)).Build()).AsInt64()
			if err != nil {
				t.Fatalf("MEMORY USAGE %s: %v", kind, err)
			}
			total += n
		}
		n, _ := c.Do(ledgertest.Ctx(t), c.B().Hlen().Key(r.key("occ", job)).Build()).AsInt64()
		t.Logf("%s: %d records, %d bytes per job (%d per record)", tc.name, n, total, total/max(n, 1))
		if most := int64(ledger.DefaultRetentionMax + ledger.Retention{}.TrimSlack()); n > most || total > tc.limit {
			t.Errorf("%s: %d records, %d bytes; want at most %d records and %d bytes", tc.name, n, total, most, tc.limit)
		}
	}
}
