package actors

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/internal/promtest"
	"github.com/cronlock/cronlock/schedule"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func mustSchedule(t *testing.T, expr string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(expr, time.UTC)
	if err != nil {
		t.Fatalf("parse %q: %v", expr, err)
	}
	return s
}

// startTicker runs a ticker in the bubble and returns it with a stop func
// that cancels it and waits for Run to return.
func startTicker(t *testing.T, m *Metrics, entries ...TickerEntry) (*Ticker, func()) {
	t.Helper()
	tk := NewTicker(zap.NewNop(), m, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	if err := tk.SetEntries(ctx, entries); err != nil {
		t.Fatalf("SetEntries: %v", err)
	}
	return tk, func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}
}

// drainFires returns every Fire queued on ch without blocking.
func drainFires(ch chan jobMsg) []Fire {
	var out []Fire
	for {
		select {
		case m := <-ch:
			out = append(out, m.(Fire))
		default:
			return out
		}
	}
}

func TestTicker_FiresOncePerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inbox := make(chan jobMsg, 100)
		_, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: "a", Sched: mustSchedule(t, "*/10 * * * * *"), Inbox: inbox})
		defer stop()
		start := time.Now() // 2000-01-01T00:00:00Z in a bubble
		time.Sleep(35 * time.Second)
		synctest.Wait()
		got := drainFires(inbox)
		want := []time.Time{start.Add(10 * time.Second), start.Add(20 * time.Second), start.Add(30 * time.Second)}
		if len(got) != len(want) {
			t.Fatalf("got %d fires %v, want %d", len(got), got, len(want))
		}
		for i, f := range got {
			if !f.Slot.Equal(want[i]) || f.Job != "a" {
				t.Errorf("fire %d: got %v %s, want %v a", i, f.Slot, f.Job, want[i])
			}
		}
	})
}

// A slot is sent exactly at its instant, every second for a simulated day:
// no drift, because next slots come from the previous slot.
func TestTicker_NoDriftOverSimulatedDay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inbox := make(chan jobMsg, 1)
		_, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: "s", Sched: mustSchedule(t, "* * * * * *"), Inbox: inbox})
		defer stop()
		start := time.Now()
		const day = 24 * 60 * 60
		for i := 1; i <= day; i++ {
			f := (<-inbox).(Fire)
			want := start.Add(time.Duration(i) * time.Second)
			if !f.Slot.Equal(want) || !time.Now().Equal(want) {
				t.Fatalf("fire %d: slot %v received at %v, want both %v", i, f.Slot, time.Now(), want)
			}
		}
		synctest.Wait()
		if extra := drainFires(inbox); len(extra) != 0 {
			t.Fatalf("got %d extra fires, want none", len(extra))
		}
	})
}

// The ticker never waits on a busy job actor: a full inbox drops the fire
// and counts it, while other jobs keep firing on time.
func TestTicker_NeverBlocksOnBusyJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics(nil)
		m.InitJob("busy")
		busy := make(chan jobMsg) // nobody reads: always full
		free := make(chan jobMsg, 100)
		_, stop := startTicker(t, m,
			TickerEntry{Job: "busy", Sched: mustSchedule(t, "* * * * * *"), Inbox: busy},
			TickerEntry{Job: "free", Sched: mustSchedule(t, "* * * * * *"), Inbox: free})
		defer stop()
		time.Sleep(5500 * time.Millisecond)
		synctest.Wait()
		if got := len(drainFires(free)); got != 5 {
			t.Errorf("free job: got %d fires, want 5", got)
		}
		if got := promtest.Value(t, m, "cronlock_fires_dropped_total", "job", "busy"); got != 5 {
			t.Errorf("busy job: got %v dropped fires, want 5", got)
		}
	})
}

// Reloading with the same schedule keeps the pending slot; a new job starts
// at its first slot after now.
func TestTicker_SetEntriesKeepsPendingSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := make(chan jobMsg, 10), make(chan jobMsg, 10)
		sched := mustSchedule(t, "*/10 * * * * *")
		tk, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: "a", Sched: sched, Inbox: a})
		defer stop()
		start := time.Now()
		time.Sleep(5 * time.Second)
		if err := tk.SetEntries(t.Context(), []TickerEntry{{Job: "a", Sched: sched, Inbox: a},
			{Job: "b", Sched: mustSchedule(t, "*/3 * * * * *"), Inbox: b}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second) // now start+11s
		synctest.Wait()
		if got := drainFires(a); len(got) != 1 || !got[0].Slot.Equal(start.Add(10*time.Second)) {
			t.Errorf("job a: got %v, want one fire at +10s", got)
		}
		if got := drainFires(b); len(got) != 2 || !got[0].Slot.Equal(start.Add(6*time.Second)) {
			t.Errorf("job b: got %v, want fires at +6s and +9s", got)
		}
	})
}

func TestTicker_JitterStableAndBounded(t *testing.T) {
	slot := time.Unix(1_800_000_000, 0)
	for i := range 1000 {
		s := slot.Add(time.Duration(i) * time.Second)
		d := jitterFor("job", s, 7*time.Second)
		if d < 0 || d >= 7*time.Second {
			t.Fatalf("jitter %v outside [0, 7s)", d)
		}
		if d2 := jitterFor("job", s, 7*time.Second); d2 != d {
			t.Fatalf("jitter not stable: got %v then %v", d, d2)
		}
	}
	if d := jitterFor("job", slot, 0); d != 0 {
		t.Fatalf("got jitter %v with jitter 0, want 0", d)
	}
}

func TestTicker_ProbeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk, stop := startTicker(t, NewMetrics(nil))
		if err := tk.Probe(t.Context()); err != nil {
			t.Errorf("Probe: got %v, want nil", err)
		}
		stop()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := tk.Probe(ctx); err == nil {
			t.Error("Probe on a stopped ticker: got nil, want an error")
		}
	})
}

// jitteryJob returns a job name whose jitter for slot, out of max, is at
// least min.
func jitteryJob(t *testing.T, slot time.Time, maxJitter, atLeast time.Duration) (string, time.Duration) {
	t.Helper()
	for i := range 1000 {
		name := "j" + strconv.Itoa(i)
		if j := jitterFor(name, slot, maxJitter); j >= atLeast {
			return name, j
		}
	}
	t.Fatal("no job name with enough jitter")
	return "", 0
}

// drainEarlier drains the fires so far, which must all be of slots before
// slot (the bubble starts at a slot instant: that slot is in its jitter
// wait at the ticker's start and fires).
func drainEarlier(t *testing.T, inbox chan jobMsg, slot time.Time) {
	t.Helper()
	for _, f := range drainFires(inbox) {
		if !f.Slot.Before(slot) {
			t.Fatalf("fire of slot %v before its fire time", f.Slot)
		}
	}
}

// Issue 9: a reload that changes only the jitter while a slot is in its
// jitter wait keeps that slot: it fires once, at the slot plus the new
// jitter (at once when that has passed), and the next slot follows.
func TestTicker_ReloadJitterInJitterWaitKeepsSlot(t *testing.T) {
	for _, newJitter := range []time.Duration{0, 2 * time.Second, 9 * time.Second} {
		t.Run(newJitter.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slot := time.Now().Add(10 * time.Second)
				name, j := jitteryJob(t, slot, 8*time.Second, 4*time.Second)
				inbox := make(chan jobMsg, 10)
				sched := mustSchedule(t, "*/10 * * * * *")
				tk, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: name, Sched: sched, Jitter: 8 * time.Second, Inbox: inbox})
				defer stop()
				time.Sleep(10*time.Second + j/2) // in the jitter wait
				synctest.Wait()
				drainEarlier(t, inbox, slot)
				if err := tk.SetEntries(t.Context(), []TickerEntry{{Job: name, Sched: sched, Jitter: newJitter, Inbox: inbox}}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				fireAt := slot.Add(jitterFor(name, slot, newJitter))
				if now := time.Now(); fireAt.Before(now) {
					fireAt = now // passed already: fired at the reload
				}
				time.Sleep(time.Until(fireAt))
				synctest.Wait()
				if got := drainFires(inbox); len(got) != 1 || !got[0].Slot.Equal(slot) || !time.Now().Equal(fireAt) {
					t.Fatalf("got fires %v at %v, want one of slot %v at %v", got, time.Now(), slot, fireAt)
				}
				next := slot.Add(10 * time.Second)
				time.Sleep(time.Until(next.Add(jitterFor(name, next, newJitter))))
				synctest.Wait()
				if got := drainFires(inbox); len(got) != 1 || !got[0].Slot.Equal(next) {
					t.Errorf("next slot: got %v, want one fire of %v", got, next)
				}
			})
		})
	}
}

// A reload that changes the schedule keeps a slot in its jitter wait too,
// and takes the later slots from the new schedule.
func TestTicker_ReloadScheduleInJitterWaitKeepsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slot := time.Now().Add(10 * time.Second)
		name, j := jitteryJob(t, slot, 8*time.Second, 4*time.Second)
		inbox := make(chan jobMsg, 10)
		tk, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: name, Sched: mustSchedule(t, "*/10 * * * * *"),
			Jitter: 8 * time.Second, Inbox: inbox})
		defer stop()
		time.Sleep(10*time.Second + j/2)
		synctest.Wait()
		drainEarlier(t, inbox, slot)
		if err := tk.SetEntries(t.Context(), []TickerEntry{{Job: name, Sched: mustSchedule(t, "*/30 * * * * *"), Inbox: inbox}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(slot.Add(25 * time.Second)))
		synctest.Wait()
		if got := drainFires(inbox); len(got) != 2 || !got[0].Slot.Equal(slot) || !got[1].Slot.Equal(slot.Add(20*time.Second)) {
			t.Errorf("got %v, want the kept slot %v, then %v of the new schedule", got, slot, slot.Add(20*time.Second))
		}
	})
}

// A job added (or a daemon started) while a slot is in its jitter wait
// fires that slot, as every other node does.
func TestTicker_NewEntryInJitterWaitFiresSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slot := time.Now().Add(10 * time.Second)
		name, j := jitteryJob(t, slot, 8*time.Second, 4*time.Second)
		time.Sleep(10*time.Second + j/2)
		inbox := make(chan jobMsg, 10)
		_, stop := startTicker(t, NewMetrics(nil), TickerEntry{Job: name, Sched: mustSchedule(t, "*/10 * * * * *"),
			Jitter: 8 * time.Second, Inbox: inbox})
		defer stop()
		time.Sleep(time.Until(slot.Add(j)))
		synctest.Wait()
		if got := drainFires(inbox); len(got) != 1 || !got[0].Slot.Equal(slot) {
			t.Errorf("got %v, want one fire of %v at %v", got, slot, slot.Add(j))
		}
	})
}

// TestTicker_ActiveWindow: a job fires only inside its active window
// [active_from, active_until), and the end of its window is reported once
// (at info, not as a broken schedule), also across a reload that keeps it.
func TestTicker_ActiveWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		start := time.Now()
		inbox := make(chan jobMsg, 100)
		ended := make(chan jobMsg, 100)
		win := mustSchedule(t, "*/5 * * * * *").InWindow(start.Add(10*time.Second), start.Add(27*time.Second))
		gone := mustSchedule(t, "*/5 * * * * *").InWindow(time.Time{}, start.Add(-time.Second))
		entries := []TickerEntry{{Job: "a", Sched: win, Inbox: inbox}, {Job: "gone", Sched: gone, Inbox: ended}}
		tk := NewTicker(zap.New(core), NewMetrics(nil), nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tk.Run(ctx) }()
		if err := tk.SetEntries(ctx, entries); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if err := tk.SetEntries(ctx, entries); err != nil { // a reload that keeps both jobs
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done
		var got []time.Duration
		for _, f := range drainFires(inbox) {
			got = append(got, f.Slot.Sub(start))
		}
		if want := []time.Duration{10 * time.Second, 15 * time.Second, 20 * time.Second, 25 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("fires at %v after start, want %v", got, want)
		}
		if f := drainFires(ended); len(f) != 0 {
			t.Errorf("job whose window ended fired %v", f)
		}
		msgs := map[string]int{}
		for _, e := range logs.All() {
			msgs[e.Entry.Level.String()+" "+e.ContextMap()["job"].(string)+": "+e.Message]++
		}
		want := map[string]int{
			"info a: no fire time left before active_until; the job does not fire any more": 1,
			"info gone: active window ended; the job does not fire any more":                1,
		}
		if !maps.Equal(msgs, want) {
			t.Errorf("logs %v, want %v", msgs, want)
		}
	})
}
