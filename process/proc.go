package process

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// killWait bounds how long Wait waits for the group to vanish after SIGKILL
// (a process in uninterruptible sleep dies only when the I/O returns).
const killWait = 5 * time.Second

// Proc is one started command. Its methods are safe for concurrent use.
//
// Start launches three goroutines per Proc: one reader per output stream
// and one that waits for the leader's exit status (from the package's
// reaper), the group and the output. They have ended when
// Done is closed. A pending SIGKILL (Terminate with a grace) is a
// time.AfterFunc timer, stopped when the group is gone; a call of it that
// had already begun then finds the Proc finished and does nothing.
type Proc struct {
	spec    Spec
	pid     int // also the process group id
	group   Group
	started time.Time
	exit    <-chan exitStatus // from the reaper, once

	out      [2]*os.File // read ends: stdout, stderr
	outW     [2]*lineWriter
	readErr  [2]error
	readDone [2]chan struct{}
	tail     *Tail

	mu         sync.Mutex // guards the signal state below
	finished   bool       // group gone: no more signals (its id may be reused)
	termSent   bool
	killSent   bool
	killSentAt time.Time
	killAt     time.Time // pending SIGKILL, zero if none
	sigErr     error
	killTimer  *time.Timer // sends the pending SIGKILL (killDue); nil until Terminate with a grace

	done   chan struct{} // closed once result is set
	result Result
}

func newProc(spec Spec, pid int, group Group, started time.Time, exit <-chan exitStatus, out [2]*os.File) *Proc {
	p := &Proc{
		spec:    spec,
		pid:     pid,
		group:   group,
		started: started,
		exit:    exit,
		out:     out,
		tail:    NewTail(spec.TailSize),
		done:    make(chan struct{}),
	}
	for i, stream := range []string{"stdout", "stderr"} {
		p.outW[i] = newLineWriter(spec.Log, stream, spec.MaxLine)
		p.outW[i].redact, p.outW[i].lines = spec.Redact, spec.Lines
		if spec.Redact != nil {
			p.outW[i].tail = p.tail // redacted lines, not raw reads
		}
		p.readDone[i] = make(chan struct{})
	}
	return p
}

func (p *Proc) run() {
	raw := p.tail
	if p.spec.Redact != nil {
		raw = nil // the line writers keep the redacted lines
	}
	for i := range p.out {
		go readStream(p.out[i], raw, p.outW[i], &p.readErr[i], p.readDone[i])
	}
	go p.wait()
}

// Pid returns the leader's process id, which is also the process group id.
func (p *Proc) Pid() int { return p.pid }

// Group identifies the process group beyond the life of this daemon: its
// id, session and the leader's start time (for the run records that let
// the next incarnation kill what a crash left, see KillLeftovers).
func (p *Proc) Group() Group { return p.group }

// Started returns the instant exec succeeded (for the fire-delay metric).
func (p *Proc) Started() time.Time { return p.started }

// Done returns a channel closed when Wait's result is ready, i.e. the leader
// has exited, the group is gone and output is drained.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait blocks until the leader has exited, the remaining members of its
// process group are gone (SIGTERM, then SIGKILL after Spec.KillGrace), and
// output is drained or Spec.DrainTimeout has passed since the group went.
// It may be called any number of times from any goroutine and always
// returns the same Result (Tail is shared: do not modify it).
func (p *Proc) Wait() Result {
	<-p.done
	return p.result
}

// wait runs in its own goroutine: it takes the leader's exit status from
// the reaper, clears the group, stops the control loop, drains output and
// publishes the Result.
func (p *Proc) wait() {
	st := <-p.exit
	res := Result{Started: p.started, Finished: st.at, ExitCode: -1}
	var errs []error
	switch {
	case st.err != nil:
		errs = append(errs, fmt.Errorf("wait: %w", st.err))
	case st.ws.Signaled():
		res.Signal = st.ws.Signal()
	case st.ws.Exited():
		res.ExitCode = st.ws.ExitStatus()
	}
	if err := p.clearGroup(); err != nil {
		errs = append(errs, err)
	}
	p.mu.Lock()
	p.finished = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	errs = append(errs, p.sigErr)
	p.mu.Unlock()
	res.DrainTimedOut = p.drain()
	for i, err := range p.readErr {
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", p.outW[i].stream, err))
		}
	}
	res.Tail = p.tail.Bytes()
	res.Err = errors.Join(errs...)
	p.result = res
	close(p.done)
}

// Re-checks of a group whose members outlive the leader. A child subreaper
// (AdoptOrphans) needs none to notice the group's end: every member's
// parent is in the group or is this process (orphans are re-parented to
// it), so the last member to exit is always our child, and each reap is an
// event (reaper.reaped) after which clearGroup asks kill(-pgid, 0). The
// slow re-check only catches a zombie left in the group by a parent that
// escaped it (setsid) and never waits. A process that does not adopt gets
// no event when a member re-parented to init exits, so it re-checks from
// 1 ms, doubling up to the same second.
const (
	groupRecheck         = time.Second
	groupRecheckNoAdopt0 = time.Millisecond
)

// clearGroup terminates members of the group left after the leader exited
// (SIGTERM, SIGKILL after Spec.KillGrace) and waits until none is alive,
// at most killWait after SIGKILL (plus one re-check).
func (p *Proc) clearGroup() error {
	if groupGone(p.pid) {
		return nil // the common case: one kill(2), no /proc scan
	}
	// Members, or zombies about to be reaped: terminate whatever lives.
	p.Terminate(p.spec.KillGrace)
	delay := groupRecheck
	if !children.adopting() {
		delay = groupRecheckNoAdopt0
	}
	recheck := time.NewTimer(delay)
	defer recheck.Stop()
	for {
		reaped := children.reaped() // before the check: no exit goes unnoticed
		if groupGone(p.pid) {
			return nil
		}
		select {
		case <-reaped:
			continue
		case <-recheck.C:
		}
		if !groupAlive(p.pid) {
			return nil
		}
		p.mu.Lock()
		at := p.killSentAt
		p.mu.Unlock()
		if !at.IsZero() && time.Since(at) > killWait {
			return fmt.Errorf("process group %d: members alive %v after SIGKILL", p.pid, killWait)
		}
		delay = min(2*delay, groupRecheck)
		recheck.Reset(delay)
	}
}

// drain waits for both readers to reach EOF, at most DrainTimeout; then it
// closes the read ends, which ends any reader still blocked. It reports
// whether the timeout cut reading short.
func (p *Proc) drain() bool {
	timer := time.NewTimer(p.spec.DrainTimeout)
	defer timer.Stop()
	timedOut := false
	for _, done := range p.readDone {
		select {
		case <-done:
		case <-timer.C:
			timedOut = true
			closeAll(p.out[:])
			<-done
		}
	}
	if timedOut {
		p.spec.Log.Warn("job output still open after process group exited; stopped reading",
			zap.Int("pgid", p.pid), zap.Duration("drain_timeout", p.spec.DrainTimeout))
		return true
	}
	closeAll(p.out[:])
	return false
}
