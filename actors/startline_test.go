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
		first := l.enter() // a start in progress
		var mu sync.Mutex
		var order []int
		inside, most := 0, 0
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held := l.enter()
				mu.Lock()
				order = append(order, i)
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(time.Millisecond) // the fork
				mu.Lock()
				inside--
				mu.Unlock()
				l.leave(held)
			}()
			synctest.Wait() // waiting its turn, after the ones before it
		}
		l.leave(first)
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
		a := two.enter()
		entered := make(chan struct{})
		var b bool
		go func() { b = two.enter(); close(entered) }()
		synctest.Wait()
		select {
		case <-entered:
		default:
			t.Error("line of 2 with one start in progress: the second waits")
		}
		two.leave(a)
		two.leave(b)

		var none *StartLine
		for range 2 { // never blocks, never gives a turn
			if none.enter() {
				t.Error("a nil line gave a turn")
			}
		}
		none.leave(false)
	})
}

// TestStartLine_HungStartsDoNotHoldTheOthers: when every turn is held by
// a start that does not return (a hung user lookup, say), a start that
// waits goes on without a turn after StuckLine; while the line moves, a
// start waits its turn however long that takes.
func TestStartLine_HungStartsDoNotHoldTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewStartLine(1)
		if !l.enter() { // hung: never leaves
			t.Fatal("an empty line gave no turn")
		}
		t0 := time.Now()
		if l.enter() {
			t.Fatal("a full line gave a second turn")
		}
		if waited := time.Since(t0); waited != StuckLine {
			t.Errorf("waited %v for a hung line, want StuckLine (%v)", waited, StuckLine)
		}

		// While the line still has not moved, later starts and passes go
		// on at once.
		t0 = time.Now()
		if l.enter() {
			t.Fatal("a hung line gave a turn")
		}
		l.pass()
		if waited := time.Since(t0); waited != 0 {
			t.Errorf("a start and a pass behind a line hung for over StuckLine waited %v, want 0", waited)
		}

		// A line quiet for an hour, then full: its waiter waits its turn.
		quiet := NewStartLine(1)
		time.Sleep(time.Hour)
		busy := quiet.enter()
		go func() { time.Sleep(500 * time.Millisecond); quiet.leave(busy) }()
		if !quiet.enter() {
			t.Error("a line full for 0.5 s after an hour's quiet gave no turn")
		}

		// A queue that moves: one start every 0.6 s keeps the line for
		// 3 s; the last waiter waits its turn, not StuckLine.
		moving := NewStartLine(1)
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held := moving.enter()
				time.Sleep(600 * time.Millisecond) // a slow fork
				moving.leave(held)
			}()
			synctest.Wait()
		}
		t1 := time.Now()
		if !moving.enter() {
			t.Errorf("a moving line gave no turn after %v", time.Since(t1))
		}
		if waited := time.Since(t1); waited != 3*time.Second {
			t.Errorf("waited %v behind 5 starts of 0.6 s, want 3s", waited)
		}
		wg.Wait()
	})
}
