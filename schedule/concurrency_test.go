package schedule

import (
	"sync"
	"testing"
	"time"
)

// Many goroutines share one Schedule, as the ticker and the run actors do;
// under -race this checks that Next shares no mutable state (cronexpr's
// Next would race), and every goroutine must see the same sequence as a
// sequential walk.
func TestNext_Concurrent(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	for _, expr := range []string{"*/5 * * * *", "0 0 */2 * 1", "30 1 * * *", "@every 10s"} {
		s, err := Parse(expr, ny)
		if err != nil {
			t.Fatal(err)
		}
		from := time.Date(2026, 10, 1, 0, 0, 0, 0, ny)
		want := walk(s, from, 50)
		var wg sync.WaitGroup
		errs := make(chan string, 32)
		for range 32 {
			wg.Go(func() {
				got := walk(s, from, 50)
				for i := range want {
					if !got[i].Equal(want[i]) {
						errs <- expr + ": " + got[i].String() + " != " + want[i].String()
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

func walk(s *Schedule, from time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		from = s.Next(from)
		out = append(out, from)
	}
	return out
}
