package redislock

import (
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"strings"
	"testing"
	"time"
)

func sampleRecord(i int) actors.RunRecord {
	start := time.Date(2026, 3, 8, 6, 30, 0, 123456789, time.FixedZone("X", 3600)).Add(time.Duration(i) * time.Minute)
	return actors.RunRecord{
		RunID: fmt.Sprintf("run-%d", i), Slot: 1_780_000_000 + int64(i)*60, Trigger: actors.TriggerCatchup, Node: "node-a",
		Start: start, End: start.Add(1500 * time.Millisecond), Attempts: 2,
		Result: "failure", ExitCode: 3, Fence: int64(i), OutputTail: fmt.Sprintf("output %d\n", i),
	}
}

// sameRecord compares records as stored: UTC, cut tail.
func sameRecord(t *testing.T, what string, got, want actors.RunRecord) {
	t.Helper()
	want.Start, want.End = want.Start.UTC(), want.End.UTC()
	want.OutputTail = tail(want.OutputTail)
	if !got.Start.Equal(want.Start) || !got.End.Equal(want.End) {
		t.Errorf("%s times: got %v–%v, want %v–%v", what, got.Start, got.End, want.Start, want.End)
	}
	got.Start, got.End, want.Start, want.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Errorf("%s: got %+v, want %+v", what, got, want)
	}
}

func testHistory(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if h, err := b.History(ctxT(t), job, 10); err != nil || len(h) != 0 {
		t.Fatalf("history of new job: got %d records, %v; want 0, nil", len(h), err)
	}
	const n = DefaultHistoryLen + 5
	for i := 1; i <= n; i++ {
		if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: sampleRecord(i)}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	h, err := b.History(ctxT(t), job, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != DefaultHistoryLen {
		t.Fatalf("history length: got %d, want %d (cap)", len(h), DefaultHistoryLen)
	}
	for k, rec := range h {
		sameRecord(t, fmt.Sprintf("history[%d]", k), rec, sampleRecord(n-k))
	}
	if h, _ := b.History(ctxT(t), job, 2); len(h) != 2 || h[0].RunID != "run-105" || h[1].RunID != "run-104" {
		t.Fatalf("History(2): got %d records, want run-105, run-104", len(h))
	}

	// A long output tail keeps its last 4 KiB; State.Last mirrors the record.
	long := sampleRecord(n + 1)
	long.OutputTail = "é" + strings.Repeat("x", actors.MaxOutputTail) + "END"
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: long}); err != nil {
		t.Fatal(err)
	}
	h, err = b.History(ctxT(t), job, 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("History(1): got %d, %v", len(h), err)
	}
	if got := h[0].OutputTail; len(got) > actors.MaxOutputTail || !strings.HasSuffix(got, "END") {
		t.Fatalf("output tail: got %d bytes ending %q, want ≤ %d ending END", len(got), got[len(got)-3:], actors.MaxOutputTail)
	}
	sameRecord(t, "newest", h[0], long)
	st := mustState(t, b, job)
	if st.Last == nil {
		t.Fatalf("State.Last: got nil, want the last record")
	}
	long.OutputTail = ""
	sameRecord(t, "State.Last", *st.Last, long)
}

func testStateEmpty(t *testing.T, s store) {
	b := s.newClient(t)
	if st := mustState(t, b, t.Name()); st != (JobState{}) {
		t.Fatalf("state of new job: got %+v, want zero", st)
	}
}

func testTime(t *testing.T, s store) {
	b := s.newClient(t)
	got, err := b.Time(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(got); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("Time: got %v, %v from local clock, want within 5s", got, d)
	}
	if err := b.Ping(ctxT(t)); err != nil {
		t.Fatalf("Ping: got %v, want nil", err)
	}
}

func testInvalid(t *testing.T, s store) {
	b := s.newClient(t)
	bad := []actors.ClaimRequest{
		{Job: "", Slot: 1},
		{Job: "j", Slot: -1},
		{Job: "j", Slot: 1, MinSlot: -1},
		{Job: "j", Slot: 1, MinFence: -1},
		{Job: "j", Slot: 1, Lease: true, TTL: time.Second},
		{Job: "j", Slot: 1, Lease: true, Owner: "a:1", TTL: 999 * time.Microsecond},
	}
	for _, req := range bad {
		if _, err := b.Claim(ctxT(t), req); err == nil {
			t.Errorf("Claim(%+v): got nil error, want invalid request", req)
		}
	}
	if _, err := b.Renew(ctxT(t), "j", "a:1", 0); err == nil {
		t.Errorf("Renew with ttl 0: got nil error")
	}
	if _, err := b.Release(ctxT(t), "j", ""); err == nil {
		t.Errorf("Release with empty owner: got nil error")
	}
}
