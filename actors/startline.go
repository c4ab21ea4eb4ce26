package actors

import (
	"sync"
	"time"
)

// StartLine makes a node's process starts take turns in arrival order, at
// most n at once (NewStartLine): a start that waits its turn is handed the
// line by the one before it. A Go channel hands its blocked senders on in
// order, and the goroutine handed on runs next on its P (the runtime's
// runnext), ahead of the goroutines already queued. So at a herd (a
// thousand won runs released by one fire time) the forks run back to back
// instead of taking turns with the work of the runs started first; at an
// ordinary instant nothing waits. One StartLine is shared by all job
// actors of a daemon; a nil *StartLine orders nothing.
//
// A start can block (a user lookup through NSS, a chdir into a hung NFS
// mount): the line must not make that one job's trouble every job's. A
// start that has waited StuckLine while no start took or ended a turn
// goes on without one, so a line filled by hung starts delays the others by
// StuckLine, and a long queue that moves (a herd) keeps its order. A
// run's work after its start (the "run started" line) and its end (the
// "run finished" line, the release and history record) pass through the
// line (pass), behind the starts queued before them, so that at a herd
// the forks are not interleaved with the work of the runs started first;
// behind hung starts they too wait StuckLine at most.
type StartLine struct {
	turn chan struct{}

	mu      sync.Mutex
	moved   time.Time     // when a start last took or ended a turn (or the line was made)
	stuck   chan struct{} // closed when the waiting starts go on without a turn
	waiting int           // starts waiting for a turn
	watch   *time.Timer   // checks the line StuckLine after it was last seen moving; nil when no start waits
}

// StuckLine is how long a start waits for its turn while no start leaves
// the line before it goes on without one.
const StuckLine = time.Second

// NewStartLine returns a line of n (at least 1) starts at once: the
// daemon's GOMAXPROCS, so that no P that could fork waits.
func NewStartLine(n int) *StartLine {
	return &StartLine{turn: make(chan struct{}, max(n, 1)), moved: time.Now(), stuck: make(chan struct{})}
}

// enter blocks until it is the caller's turn to start a process, or until
// the line has not moved for StuckLine; held reports a turn, which the
// caller ends with leave once the process has started (or failed to).
// Waiting starts keep their order: only one timer per line watches it.
func (l *StartLine) enter() (held bool) {
	if l == nil {
		return false
	}
	select {
	case l.turn <- struct{}{}:
		l.move()
		return true
	default:
	}
	l.mu.Lock()
	l.waiting++
	stuck := l.stuck
	if l.watch == nil {
		l.watch = time.AfterFunc(max(StuckLine-time.Since(l.moved), 0), l.check)
	}
	l.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		held = true
	case <-stuck: // hung starts hold every turn: go on without one
	}
	l.mu.Lock()
	l.waiting--
	if held {
		l.moved = time.Now()
	}
	l.mu.Unlock()
	return held
}

// move records that a start took or ended a turn.
func (l *StartLine) move() {
	l.mu.Lock()
	l.moved = time.Now()
	l.mu.Unlock()
}

// check runs on the watch timer: when no start has taken or ended a turn
// for StuckLine, the starts waiting now go on without a turn; else it
// looks again StuckLine after the last move, while starts wait.
func (l *StartLine) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watch = nil
	if l.waiting == 0 {
		return
	}
	if still := time.Since(l.moved); still < StuckLine {
		l.watch = time.AfterFunc(StuckLine-still, l.check)
		return
	}
	close(l.stuck)
	l.stuck = make(chan struct{}) // for later starts: they go on at once while the line has not moved
}

// pass blocks until the starts that entered the line before the call have
// started, or StuckLine when the line does not move (it takes a turn and
// ends it at once).
func (l *StartLine) pass() {
	l.leave(l.enter())
}

// leave ends a turn that enter reported held.
func (l *StartLine) leave(held bool) {
	if held {
		l.move()
		<-l.turn
	}
}
