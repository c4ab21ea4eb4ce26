package actors

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/schedule"
)

func TestLatestSlot(t *testing.T) {
	at := time.Date(2026, 3, 7, 12, 30, 10, 500_000_000, time.UTC)
	for _, c := range []struct {
		expr string
		want time.Time
	}{
		{"* * * * * *", time.Date(2026, 3, 7, 12, 30, 10, 0, time.UTC)},
		{"*/2 * * * * *", time.Date(2026, 3, 7, 12, 30, 10, 0, time.UTC)},
		{"*/3 * * * * *", time.Date(2026, 3, 7, 12, 30, 9, 0, time.UTC)},
		{"0 * * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)},
		{"30 2 * * *", time.Date(2026, 3, 7, 2, 30, 0, 0, time.UTC)},
		{"0 0 1 1 *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"* * 3 * * *", time.Date(2026, 3, 7, 3, 59, 59, 0, time.UTC)}, // dense, long ago
		{"* * * 1 * *", time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC)},
		{"0-8 0 12 * * *", time.Date(2026, 3, 7, 12, 0, 8, 0, time.UTC)}, // the walk ends on the answer
		{"0-9 0 12 * * *", time.Date(2026, 3, 7, 12, 0, 9, 0, time.UTC)},
		{"@every 7s", time.Unix(at.Unix()/7*7, 0)},
	} {
		got := latestSlot(mustSchedule(t, c.expr), at)
		if !got.Equal(c.want) {
			t.Errorf("%q: got %v, want %v", c.expr, got.UTC(), c.want)
		}
	}
	// A slot exactly at `at` counts.
	exact := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	if got := latestSlot(mustSchedule(t, "0 * * * *"), exact); !got.Equal(exact) {
		t.Errorf("slot at at: got %v, want %v", got, exact)
	}
}

// In a DST zone the latest slot is found across the change (fall back:
// the wildcard job's repeated hour).
func TestLatestSlot_DST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.Parse("30 * * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 6, 45, 0, 0, time.UTC) // 01:45 EST, the second 01:xx
	if got, want := latestSlot(s, at), time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("got %v, want %v", got.UTC(), want)
	}
}

func TestMissedCheckFor(t *testing.T) {
	now := time.Date(2026, 3, 7, 12, 0, 7, 300_000_000, time.UTC)
	job := config.Job{Name: "j", Enabled: true, Sched: mustSchedule(t, "*/2 * * * * *")}
	c, ok := MissedCheckFor(job, 5, now, 2*time.Second)
	want := MissedCheck{Job: "j", Seen: 5, Certain: now.Unix() - 3, Latest: now.Unix() - 1}
	if !ok || c != want {
		t.Errorf("got %+v, %v; want %+v", c, ok, want)
	}
	// With jitter, a slot still in its jitter wait has not fired.
	job.Jitter = 2 * time.Second
	for s := now.Unix() - 1; ; s -= 2 {
		if j := jitterFor("j", time.Unix(s, 0), job.Jitter); time.Unix(s, 0).Add(j).After(now) {
			continue
		}
		if c, _ := MissedCheckFor(job, 0, now, 0); c.Latest != s {
			t.Errorf("with jitter: got latest %d, want %d (the latest slot whose fire time passed)", c.Latest, s)
		}
		break
	}
	// A node that has seen a slot decided at or after certain has nothing
	// to ask: the report's answer would be "nothing missed".
	job.Jitter = 0
	if c, ok := MissedCheckFor(job, now.Unix()-3, now, 2*time.Second); ok {
		t.Errorf("seen = certain: got check %+v, want none", c)
	}
	if c, ok := MissedCheckFor(job, now.Unix()-4, now, 2*time.Second); !ok || c.Seen != now.Unix()-4 {
		t.Errorf("seen just before certain: got %+v, %v; want a check", c, ok)
	}
	job.Enabled = false
	if _, ok := MissedCheckFor(job, 5, now, 0); ok {
		t.Error("disabled job: got a check, want none")
	}
}

// BenchmarkMissedCheckFor_Yearly is the start-up cost per job of the
// missed-slot check for a schedule whose latest slot is months back (the
// look-back is longest): 10,000 such jobs cost 10,000 times this.
func BenchmarkMissedCheckFor_Yearly(b *testing.B) {
	job := config.Job{Name: "j", Enabled: true, Sched: mustSchedule(&testing.T{}, "17 5 1 1 *")}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		if _, ok := MissedCheckFor(job, 0, now, 2*time.Second); !ok {
			b.Fatal("no check")
		}
	}
}

// latestSlot agrees with a forward walk over many instants and schedules.
func TestLatestSlot_AgreesWithWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		expr   string
		window time.Duration // longer than the schedule's longest gap
	}{{"* * * * * *", time.Minute}, {"*/7 * * * * *", time.Minute}, {"0-9 0 12 * * *", 2 * day},
		{"*/15 * * * *", time.Hour}, {"0 9-17 * * 1-5", 4 * day}, {"@every 13s", time.Minute}, {"30 2 * * 0", 8 * day}} {
		sched := mustSchedule(t, c.expr)
		for range 200 {
			at := base.Add(time.Duration(rng.Int64N(int64(20 * day))))
			var want time.Time
			for s := sched.Next(at.Add(-c.window)); !s.After(at); s = sched.Next(s) {
				want = s
			}
			if got := latestSlot(sched, at); !got.Equal(want) {
				t.Fatalf("%q at %v: got %v, want %v", c.expr, at, got, want)
			}
		}
	}
}
