package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/schedule"
)

// Bad backfill flags get an error naming the flag and the fix.
func TestBackfillRange_Errors(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		from, to, overlap, want string
	}{
		{"", "2026-12-01T00:00:00Z", "queue", "-from and -to are required"},
		{"yesterday", "2026-12-01T00:00:00Z", "queue", `-from "yesterday": not an RFC 3339 time`},
		{"2026-11-30T00:00:00Z", "2026-12-01", "queue", `-to "2026-12-01": not an RFC 3339 time`},
		{"2026-12-01T00:00:00Z", "2026-11-30T00:00:00Z", "queue", "is before -from"},
		{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "queue", "is in the future"},
		{"2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "skip", `-overlap "skip": want queue or allow`},
	}
	for _, tc := range tests {
		_, _, err := backfillRange(tc.from, tc.to, tc.overlap, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("backfillRange(%q, %q, %q): got %v, want an error containing %q", tc.from, tc.to, tc.overlap, err, tc.want)
		}
	}
	from, to, err := backfillRange("2026-11-30T00:00:00Z", "2026-12-01T02:00:00+01:00", "allow", now)
	if err != nil || !from.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) || !to.Equal(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)) {
		t.Errorf("valid range: got %v, %v, %v", from, to, err)
	}
}

// The command exits 2 with the flag's error before it reads a config.
func TestBackfill_BadFlagExits2(t *testing.T) {
	code, _, errs := runCLI(t, nil, "backfill", "job", "-from", "2026-11-30", "-to", "2026-12-01T00:00:00Z")
	if code != 2 || !strings.Contains(errs, `-from "2026-11-30": not an RFC 3339 time`) {
		t.Errorf("got exit %d, stderr %q; want 2 naming -from", code, errs)
	}
}

// A backfill over slots the schedule already decided (docs/protocol.md,
// R1: one record per slot): -dry-run lists a slot that ran as already run
// and one skipped without running (lock_lost) as would run; the backfill
// then runs only the slots that ran nothing, and a second backfill of the
// range runs none.
func TestBackfill_SkipsSlotsTheScheduleRan(t *testing.T) {
	cfg, r, addr := opsRedis(t, "echo ran $CRONLOCK_SCHEDULED_TIME")
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := schedule.Parse("0 2 * * *", paris) // the job backup's
	if err != nil {
		t.Fatal(err)
	}
	var slots []time.Time
	for s := sched.Next(time.Now().Add(-4 * 24 * time.Hour)); len(slots) < 3; s = sched.Next(s) {
		slots = append(slots, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ran := ledger.RunRecord{RunID: "sched-1", Slot: slots[0].Unix(), Trigger: ledger.TriggerSchedule, Node: "node-2",
		Start: slots[0], End: slots[0].Add(time.Second), Attempts: 1, Result: ledger.ResultSuccess, Fence: 5}
	lost := ledger.RunRecord{RunID: "sched-2", Slot: slots[1].Unix(), Trigger: ledger.TriggerSchedule, Node: "node-2",
		Fence: 6, Skip: ledger.SkipLockLost}
	for _, rec := range []ledger.RunRecord{ran, lost} {
		if _, err := r.Finish(ctx, ledger.FinishRequest{Job: "backup", Record: rec}); err != nil {
			t.Fatal(err)
		}
	}
	// The job's ledger began before the first slot (the daemons ran it
	// then): a slot without a record is one nothing decided, not one a loss
	// may have erased (docs/protocol.md, R1).
	began := strconv.FormatInt(slots[0].Add(-time.Hour).UnixMilli(), 10)
	if _, err := redistest.Do(addr, 5*time.Second, "HSET", r.Key("state", "backup"), "since", began); err != nil {
		t.Fatal(err)
	}
	rfc := func(s time.Time) string { return s.UTC().Format(time.RFC3339) }
	args := []string{"backfill", "-config", cfg, "backup", "-from", rfc(slots[0]), "-to", rfc(slots[2])}

	code, out, errs := runCLI(t, nil, append(args, "-dry-run")...)
	for _, want := range []string{
		"already run  " + rfc(slots[0]) + " ran on node-2",
		"would run    " + rfc(slots[1]) + " skipped (lock_lost)",
		"would run    " + rfc(slots[2]),
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dry run: exit %d, out %q, stderr %q; want a line %q", code, out, errs, want)
		}
	}

	code, out, errs = runCLI(t, nil, args...)
	if code != 0 || strings.Contains(out, "ran "+rfc(slots[0])) ||
		!strings.Contains(out, "already run  "+rfc(slots[0])) || !strings.Contains(out, "ran          "+rfc(slots[1])+" success") ||
		!strings.Contains(out, "ran          "+rfc(slots[2])+" success") ||
		!strings.Contains(out, "backfill backup: 3 slots: 2 ran, 1 already run, 0 not run or not successful") {
		t.Errorf("backfill: exit %d, out %q, stderr %q; want slot 1 already run, slots 2 and 3 run", code, out, errs)
	}
	if n := strings.Count(out, "ran 20"); n != 2 { // the command's own lines: one per slot run
		t.Errorf("backfill: the command ran %d times (out %q), want 2", n, out)
	}
	occ, err := r.Occurrences(ctx, "backup", slots[0].Unix(), slots[2].Unix())
	if err != nil {
		t.Fatal(err)
	}
	if len(occ) != 3 || occ[0].RunID != "sched-1" || occ[0].Trigger != string(ledger.TriggerSchedule) ||
		occ[1].Status != "ran" || occ[1].Trigger != string(ledger.TriggerBackfill) ||
		occ[2].Status != "ran" || occ[2].Trigger != string(ledger.TriggerBackfill) {
		t.Errorf("ledger: %+v; want the schedule's run kept and the two others run by the backfill", occ)
	}

	code, out, errs = runCLI(t, nil, args...)
	if code != 0 || !strings.Contains(out, "backfill backup: 3 slots: 0 ran, 3 already run") || strings.Contains(out, "ran 20") {
		t.Errorf("second backfill: exit %d, out %q, stderr %q; want every slot already run, nothing run", code, out, errs)
	}
}
