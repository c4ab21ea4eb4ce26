package subscription

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type end struct {
	at                           time.Duration
	wasConfirmed, first, refused bool
}

// Failures back off 1 s, 2 s, 4 s…; a confirmed subscription resets the
// backoff, and its loss starts a new streak (reported as first); a Redis refusal is told apart from a
// lost connection; ctx's end returns without a report.
func TestKeep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		noperm := errors.New("NOPERM") // what Redis answers: an ACL refusal, say
		// The subscriptions: failures, one confirmed, failures, then the
		// last blocks until ctx ends.
		plan := []struct {
			confirm bool
			err     error
		}{{false, errors.New("dial")}, {false, noperm}, {false, errors.New("dial")}, {true, errors.New("closed")}, {false, errors.New("dial")}, {false, errors.New("dial")}}
		var ends []end
		calls := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			Keep(ctx, func(confirmed func()) error {
				if calls == len(plan) {
					cancel()
					<-ctx.Done()
					return ctx.Err()
				}
				p := plan[calls]
				calls++
				if p.confirm {
					confirmed()
				}
				return p.err
			}, func(err error) bool { return errors.Is(err, noperm) }, func(err error, wasConfirmed, first, refused bool) {
				ends = append(ends, end{time.Since(start), wasConfirmed, first, refused})
			})
		}()
		<-done
		want := []end{
			{0, false, true, false},                 // the streak's first failure
			{1 * time.Second, false, true, true},    // after 1 s; the streak's first refusal
			{3 * time.Second, false, false, false},  // after 2 s more
			{7 * time.Second, true, true, false},    // after 4 s: confirmed, then lost: a new streak
			{8 * time.Second, false, false, false},  // the backoff reset to 1 s
			{10 * time.Second, false, false, false}, // 2 s
		}
		if len(ends) != len(want) {
			t.Fatalf("ends %+v, want %+v", ends, want)
		}
		for i := range want {
			if ends[i] != want[i] {
				t.Errorf("end %d: %+v, want %+v", i, ends[i], want[i])
			}
		}
	})
}
