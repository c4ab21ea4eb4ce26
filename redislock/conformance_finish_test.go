package redislock

import (
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
