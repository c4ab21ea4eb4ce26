package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

// runLeadTicker runs a ticker with the daemon's claim lead until stop
// (which waits for Run to return); ctx is Run's.
func runLeadTicker(t *testing.T) (*Ticker, context.Context, func()) {
	tk := NewTicker(zap.NewNop(), NewMetrics(nil), nil)
	tk.SetClaimLead(ClaimLead)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	return tk, ctx, func() { cancel(); <-done }
}

// With a claim lead the ticker sends each fire the lead before its fire
// time, with At and a Due that closes exactly at At (one channel for the
// fires of one instant); a fire time that has come when the fire is sent
// (a late wake) carries no Due; Run closes the Due of fires still early
// when it returns.
func TestTicker_ClaimLeadSendsFiresEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk, ctx, stop := runLeadTicker(t)
		a, b := make(chan jobMsg, 10), make(chan jobMsg, 10)
		sched := mustSchedule(t, "* * * * * *")
		if err := tk.SetEntries(ctx, []TickerEntry{{Job: "a", Sched: sched, Inbox: a}, {Job: "b", Sched: sched, Inbox: b}}); err != nil {
			t.Fatal(err)
		}
		slot := time.Now().Truncate(time.Second).Add(time.Second)
		for range 3 {
			fa, fb := (<-a).(Fire), (<-b).(Fire)
			if got := time.Until(slot); got != ClaimLead || !fa.Slot.Equal(slot) || !fa.At.Equal(slot) {
				t.Fatalf("fire of %v received %v before it (At %v), want ClaimLead before, At = slot", fa.Slot, got, fa.At)
			}
			if fa.Due == nil || fa.Due != fb.Due {
				t.Fatalf("Due: a %v, b %v; want one channel for the instant", fa.Due, fb.Due)
			}
			<-fa.Due
			if !time.Now().Equal(slot) {
				t.Fatalf("Due closed at %v, want at the fire time %v", time.Now(), slot)
			}
			slot = slot.Add(time.Second)
		}
		// Stopped while the next fires are early: their Due is closed.
		time.Sleep(time.Until(slot) - time.Millisecond)
		f := (<-a).(Fire)
		<-b
		stop()
		select {
		case <-f.Due:
		default:
			t.Fatal("Due of an early fire still open after Run returned")
		}
	})
}

// A reload in the claim lead that changes a job's schedule does not fire
// the slot just fired early a second time (its fire time is still ahead,
// and the new schedule's first unfired slot would be it).
func TestTicker_ReloadInTheLeadDoesNotRefire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk, ctx, stop := runLeadTicker(t)
		a := make(chan jobMsg, 10)
		if err := tk.SetEntries(ctx, []TickerEntry{{Job: "a", Sched: mustSchedule(t, "* * * * * *"), Inbox: a}}); err != nil {
			t.Fatal(err)
		}
		f := (<-a).(Fire) // ClaimLead before its fire time
		if err := tk.SetEntries(ctx, []TickerEntry{{Job: "a", Sched: mustSchedule(t, "*/1 * * * * *"), Inbox: a}}); err != nil {
			t.Fatal(err)
		}
		g := (<-a).(Fire)
		if !g.Slot.Equal(f.Slot.Add(time.Second)) {
			t.Errorf("after the reload: fire of %v, want the next slot %v (%v was fired already)", g.Slot, f.Slot.Add(time.Second), f.Slot)
		}
		stop()
	})
}
