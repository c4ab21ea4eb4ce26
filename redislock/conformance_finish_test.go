package redislock

import (
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"testing"
	"time"
)

// Finish releases our lease and records the run in one call; a lease held
// by someone else is left alone but the run is still recorded.
func testFinish(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	if _, err := b.Claim(ctxT(t), actors.ClaimRequest{Job: job, Slot: 1, Owner: "n1:a", TTL: time.Minute, Lease: true}); err != nil {
		t.Fatal(err)
	}
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n2:b", Record: sampleRecord(1)})
	if err != nil || f.Released {
		t.Fatalf("Finish by non-owner: got (%v, %v), want (false, nil)", f.Released, err)
	}
	if st, _ := b.State(ctxT(t), job); st.LeaseHolder != "n1:a" {
		t.Fatalf("lease holder after non-owner Finish: got %q, want n1:a", st.LeaseHolder)
	}
	f, err = b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:a", Record: sampleRecord(2)})
	if err != nil || !f.Released {
		t.Fatalf("Finish by owner: got (%v, %v), want (true, nil)", f.Released, err)
	}
	st, err := b.State(ctxT(t), job)
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaseHolder != "" {
		t.Errorf("lease holder after Finish: got %q, want none", st.LeaseHolder)
	}
	h, err := b.History(ctxT(t), job, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 {
		t.Fatalf("history: got %d records, want 2", len(h))
	}
	sameRecord(t, "newest", h[0], sampleRecord(2))
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: sampleRecord(3)}); err != nil {
		t.Fatalf("Finish without lease: %v", err)
	}
}

// A retried finish (its first answer was lost) appends the record and
// counts a success only when the history does not hold the run's record
// yet: once whether the first attempt was applied or not. It still
// releases the lease it names, and a record of a run that ended before
// the newest one recorded does not become the job's last run.
func testFinishRetry(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	record := func(i int, end time.Time) actors.RunRecord {
		r := sampleRecord(i)
		r.Result, r.Start, r.End = actors.ResultSuccess, end.Add(-time.Second), end
		return r
	}
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 1, Owner: "n1:a", TTL: time.Minute, Lease: true}, actors.Claimed)
	rec := record(1, time.Now().Add(-time.Second))
	// Applied, answer lost; then retried twice.
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:a", Record: rec}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:a", Record: rec, Retry: true}); err != nil {
			t.Fatalf("retried finish: %v", err)
		}
	}
	// Never applied: the retry records it and releases the lease.
	mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: 2, Owner: "n1:b", TTL: time.Minute, Lease: true}, actors.Claimed)
	time.Sleep(2 * time.Millisecond) // rec2 ends after rec was appended
	rec2 := record(2, time.Now())
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:b", Record: rec2, Retry: true})
	if err != nil || !f.Released || f.Runs != 2 {
		t.Fatalf("retry of a finish never applied: got released %v, runs %d, %v; want true, 2, nil", f.Released, f.Runs, err)
	}
	// An older run's finish, never applied, retried late: recorded, not last.
	rec0 := record(0, time.Now().Add(-time.Minute))
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: rec0, Retry: true}); err != nil {
		t.Fatalf("late retry: %v", err)
	}
	h, err := b.History(ctxT(t), job, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range h {
		ids = append(ids, r.RunID)
	}
	if len(h) != 3 || h[0].RunID != rec0.RunID || h[1].RunID != rec2.RunID || h[2].RunID != rec.RunID {
		t.Fatalf("history: run ids %v, want [%s %s %s] (each once, in the order written)", ids, rec0.RunID, rec2.RunID, rec.RunID)
	}
	st := mustState(t, b, job)
	if st.Runs != 3 || st.LeaseHolder != "" || st.Last == nil || st.Last.RunID != rec2.RunID {
		t.Errorf("state: runs %d, lease %q, last %+v; want 3 successes counted once each, no lease, last %s",
			st.Runs, st.LeaseHolder, st.Last, rec2.RunID)
	}
	if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "n1:c", Next: "n1:d", TTL: time.Second, Record: rec, Retry: true}); err == nil {
		t.Errorf("a retried finish that hands the lease on: got nil error")
	}
}

// A retried finish cannot tell whether its first attempt was applied once
// the capped history no longer reaches back before the run's end (a
// record of it may have been trimmed away): it appends and counts nothing
// and answers Unsure, rather than risk a record and a success twice.
func testFinishRetryUnsure(t *testing.T, s store) {
	b := s.newClient(t)
	job := t.Name()
	for i := range DefaultHistoryLen {
		r := sampleRecord(i)
		r.RunID, r.End = fmt.Sprintf("fill-%d", i), time.Now()
		if _, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	old := sampleRecord(1)
	old.Result, old.End = actors.ResultSuccess, time.Now().Add(-2*time.Minute)
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: old, Retry: true})
	if err != nil || !f.Unsure || f.Runs != 0 {
		t.Fatalf("retry older than the history: unsure %v, runs %d, %v; want unsure, 0 runs, nil", f.Unsure, f.Runs, err)
	}
	h, err := b.History(ctxT(t), job, 1)
	if err != nil || len(h) != 1 || h[0].RunID != fmt.Sprintf("fill-%d", DefaultHistoryLen-1) {
		t.Errorf("newest record after an unsure retry: %+v, %v; want the last fill record", h, err)
	}
	// A first attempt (not a retry) is never unsure.
	if f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Record: old}); err != nil || f.Unsure || f.Runs != 1 {
		t.Errorf("first finish: unsure %v, runs %d, %v; want recorded, 1 run", f.Unsure, f.Runs, err)
	}
}

// Unhand takes back the lease a finish handed to the pending slot (its
// answer lost, nobody runs the slot) and makes that slot pending again,
// so that the job's next claim runs it; a lease of another owner is left
// alone.
func testUnhand(t *testing.T, s store) {
	b := s.newClient(t)
	u, ok := b.(actors.Unhander)
	if !ok {
		t.Fatalf("%T is no actors.Unhander", b)
	}
	job := t.Name()
	queue := func(slot int64, owner string, want actors.Outcome) actors.Claim {
		return mustClaim(t, b, actors.ClaimRequest{Job: job, Slot: slot, Owner: owner, TTL: time.Minute, Lease: true, Queue: true}, want)
	}
	queue(1, "a:1", actors.Claimed)
	queue(2, "b:2", actors.Queued)
	f, err := b.Finish(ctxT(t), actors.FinishRequest{Job: job, Owner: "a:1", Record: sampleRecord(1), Next: "a:next", TTL: time.Minute})
	if err != nil || f.Fence == 0 || f.Pending != 2 {
		t.Fatalf("finish handing on: %+v, %v; want slot 2 handed to a:next", f, err)
	}
	if slot, held, err := u.Unhand(ctxT(t), job, "other:x"); err != nil || held || slot != 0 {
		t.Errorf("Unhand of another owner: %d, %v, %v; want 0, false, nil", slot, held, err)
	}
	slot, held, err := u.Unhand(ctxT(t), job, "a:next")
	if err != nil || !held || slot != 2 {
		t.Fatalf("Unhand: %d, %v, %v; want slot 2 put back, held", slot, held, err)
	}
	if st := mustState(t, b, job); st.LeaseHolder != "" || st.Pending != 2 {
		t.Fatalf("after Unhand: %+v, want no lease, slot 2 pending", st)
	}
	if c := queue(3, "c:3", actors.Claimed); c.Takes != 2 {
		t.Errorf("next claim: takes %d, want the pending slot 2 (its own slot 3 waits behind it)", c.Takes)
	}
	if slot, held, err := u.Unhand(ctxT(t), job, "a:next"); err != nil || held || slot != 0 {
		t.Errorf("Unhand again: %d, %v, %v; want 0, false (not held)", slot, held, err)
	}
}
