package actors

import (
	"context"
	"strconv"
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

// With the claim lead's growth the fires of a crowded instant are sent
// earlier, by ClaimLeadPerFire for each fire after the first, up to the
// bound, all together; a lone fire keeps the base lead.
func TestTicker_ClaimLeadGrowsWithTheInstantsFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := NewTicker(zap.NewNop(), NewMetrics(nil), nil)
		tk.SetClaimLead(ClaimLead)
		tk.SetClaimLeadGrowth(ClaimLeadPerFire, 100*time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tk.Run(ctx) }()
		defer func() { cancel(); <-done }()

		crowd := make(chan jobMsg, 2000)
		lone := make(chan jobMsg, 10)
		var entries []TickerEntry
		add := func(n int, spec string, inbox chan jobMsg) {
			for i := range n {
				entries = append(entries, TickerEntry{Job: spec + strconv.Itoa(i), Sched: mustSchedule(t, spec), Inbox: inbox})
			}
		}
		// Even seconds: 300 jobs (lead 30 + 299 × 0.1 = 59.9 ms); odd
		// seconds: one job. Every 4 s: 900 more (1,200 fires: the
		// bound, 100 ms).
		add(300, "*/2 * * * * *", crowd)
		add(1, "1/2 * * * * *", lone)
		add(900, "*/4 * * * * *", crowd)
		if err := tk.SetEntries(ctx, entries); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			select {
			case m := <-lone:
				f := m.(Fire)
				if got := time.Until(f.At); got != ClaimLead {
					t.Errorf("lone fire of %v sent %v before its fire time, want %v", f.Slot, got, ClaimLead)
				}
			case m := <-crowd:
				f := m.(Fire)
				want, n := 59900*time.Microsecond, 300
				if f.Slot.Unix()%4 == 0 {
					want, n = 100*time.Millisecond, 1200
				}
				if got := time.Until(f.At); got != want {
					t.Errorf("fire of %v (%d at once) sent %v before its fire time, want %v", f.Slot, n, got, want)
				}
				for i := 1; i < n; i++ {
					g := (<-crowd).(Fire)
					if !g.Slot.Equal(f.Slot) || time.Until(g.At) != time.Until(f.At) {
						t.Fatalf("fire %d of the instant %v: slot %v, sent %v before its fire time; want all together",
							i, f.Slot, g.Slot, time.Until(g.At))
					}
				}
			}
		}
	})
}
