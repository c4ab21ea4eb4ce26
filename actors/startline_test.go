package actors

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestStartLine_TakesTurnsInOrder: with a line of 1, starts that wait take
// their turns in the order they came, one at a time; a line of 2 lets two
// in at once; a nil line never blocks.
func TestStartLine_TakesTurnsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewStartLine(1)
		l.enter() // a start in progress
		var mu sync.Mutex
		var order []int
		inside, most := 0, 0
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.enter()
				mu.Lock()
				order = append(order, i)
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(time.Millisecond) // the fork
				mu.Lock()
				inside--
				mu.Unlock()
				l.leave()
			}()
			synctest.Wait() // waiting its turn, after the ones before it
		}
		l.leave()
		wg.Wait()
		for i, v := range order {
			if v != i {
				t.Fatalf("turns taken in the order %v, want 0 1 2 3 4", order)
			}
		}
		if most != 1 {
			t.Errorf("line of 1: %d starts at once", most)
		}

		two := NewStartLine(2)
		two.enter()
		entered := make(chan struct{})
		go func() { two.enter(); close(entered) }()
		synctest.Wait()
		select {
		case <-entered:
		default:
			t.Error("line of 2 with one start in progress: the second waits")
		}
		two.leave()
		two.leave()

		var none *StartLine
		none.enter()
		none.enter()
		none.leave()
	})
}
