package actors

// StartLine makes a node's process starts take turns in arrival order, at
// most n at once (NewStartLine): a start that waits its turn is handed the
// line by the one before it. A Go channel hands its blocked senders on in
// order, and the goroutine handed on runs next on its P (the runtime's
// runnext), ahead of the goroutines already queued. A run's work after its
// start (the "run started" line) and its end (the "run finished" line, the
// release and history record) pass through the line too (pass), behind
// the starts queued before them. So at a herd (a thousand won runs
// released by one fire time) the forks run back to back instead of taking
// turns with the work of the runs started first, which the runtime's
// queues otherwise put ahead of most of the waiting starts; at an ordinary
// instant nothing waits. The cost is that at a herd a run's end (its
// release, and so the job's next slot on any node) comes after the
// instant's starts. One StartLine is shared by all job actors of a daemon;
// a nil *StartLine orders nothing.
type StartLine struct{ turn chan struct{} }

// NewStartLine returns a line of n (at least 1) starts at once: the
// daemon's GOMAXPROCS, so that no P that could fork waits.
func NewStartLine(n int) *StartLine { return &StartLine{turn: make(chan struct{}, max(n, 1))} }

// enter blocks until it is the caller's turn to start a process; leave,
// called once the process has started (or failed to), ends the turn.
func (l *StartLine) enter() {
	if l != nil {
		l.turn <- struct{}{}
	}
}

func (l *StartLine) leave() {
	if l != nil {
		<-l.turn
	}
}

// pass blocks until the starts that entered the line before the call have
// started (it takes a turn and ends it at once).
func (l *StartLine) pass() {
	l.enter()
	l.leave()
}
