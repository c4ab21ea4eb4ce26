package main

import (
	"strings"
	"testing"
	"time"
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
