package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// An "@at T" job fires once, at T, and is then reported done once (info,
// not the error of a schedule without a next time), also across a reload
// that keeps it; a job whose @at time had passed before it was added is
// reported done at once and never fires.
func TestTicker_AtFiresOnceThenDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		tk := NewTicker(zap.New(core), NewMetrics(nil), nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tk.Run(ctx) }()
		start := time.Now() // 2000-01-01T00:00:00Z in a bubble
		at, past := make(chan jobMsg, 10), make(chan jobMsg, 10)
		entries := []TickerEntry{
			{Job: "once", Sched: mustSchedule(t, "@at 2000-01-01T00:00:30Z"), Inbox: at},
			{Job: "gone", Sched: mustSchedule(t, "@at 1999-12-31T23:00:00Z"), Inbox: past},
		}
		if err := tk.SetEntries(ctx, entries); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := tk.SetEntries(ctx, entries); err != nil { // a reload that keeps both jobs
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done

		got := drainFires(at)
		if len(got) != 1 || !got[0].Slot.Equal(start.Add(30*time.Second)) {
			t.Errorf("once: got fires %v, want one at %v", got, start.Add(30*time.Second))
		}
		if got := drainFires(past); len(got) != 0 {
			t.Errorf("gone: got fires %v, want none", got)
		}
		for _, job := range []string{"once", "gone"} {
			n := 0
			for _, e := range logs.FilterMessage("job done: its @at time has passed; it does not fire again").All() {
				if e.ContextMap()["job"] == job {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: got %d \"job done\" lines, want 1", job, n)
			}
		}
		if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
			t.Errorf("got %d error lines, want none: %v", n, logs.FilterLevelExact(zap.ErrorLevel).All())
		}
	})
}
