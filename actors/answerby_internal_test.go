package actors

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/schedule"
)

// A scheduled claim's answer is waited for past the claim timeout only
// while the job's next slot has not come, the lease has lived under a
// third of lock_ttl and at most maxLateAnswer after the timeout; other
// triggers wait no longer than the claim timeout (zero AnswerBy).
func TestRun_AnswerBy(t *testing.T) {
	slot := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := slot.Add(5 * time.Millisecond)
	sched := func(expr string) *schedule.Schedule {
		s, err := schedule.Parse(expr, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	deps := &jobDeps{JobDeps: &JobDeps{ClaimTimeout: 2 * time.Second}}
	for _, c := range []struct {
		name    string
		trigger Trigger
		expr    string
		ttl     time.Duration
		want    time.Time
	}{
		{"minutely: timeout + maxLateAnswer", TriggerSchedule, "* * * * *", 5 * time.Minute, now.Add(2*time.Second + maxLateAnswer)},
		{"every second: the next slot", TriggerSchedule, "* * * * * *", 5 * time.Minute, slot.Add(time.Second)},
		{"every 5 s: the next slot", TriggerSchedule, "*/5 * * * * *", 5 * time.Minute, slot.Add(5 * time.Second)},
		{"short lock_ttl: a third of it", TriggerSchedule, "* * * * *", 9 * time.Second, now.Add(3 * time.Second)},
		{"catch-up: none", TriggerCatchup, "* * * * *", 5 * time.Minute, time.Time{}},
		{"manual: none", TriggerManual, "* * * * *", 5 * time.Minute, time.Time{}},
	} {
		r := &run{job: &config.Job{Name: "j", Sched: sched(c.expr), LockTTL: c.ttl}, deps: deps,
			info: RunInfo{Trigger: c.trigger, Slot: slot}}
		if got := r.answerBy(now); !got.Equal(c.want) {
			t.Errorf("%s: answerBy = %v, want %v", c.name, got, c.want)
		}
	}
}
