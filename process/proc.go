package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// killWait bounds how long Wait waits for the group to vanish after SIGKILL
// (a process in uninterruptible sleep dies only when the I/O returns).
const killWait = 5 * time.Second

// Proc is one started command. Its methods are safe for concurrent use.
//
// Start launches four goroutines per Proc: one reader per output stream,
// one that owns the SIGKILL timer and one that waits for the leader, the
// group and the output. All of them have ended when Done is closed.
type Proc struct {
	spec    Spec
	cmd     *exec.Cmd
	pid     int // also the process group id
	started time.Time

	out      [2]*os.File // read ends: stdout, stderr
	outW     [2]*lineWriter
	readErr  [2]error
	readDone [2]chan struct{}
	tail     *tailBuffer

	mu         sync.Mutex // guards the signal state below
	finished   bool       // group gone: no more signals (its id may be reused)
	termSent   bool
	killSent   bool
	killSentAt time.Time
	killAt     time.Time // pending SIGKILL, zero if none
	sigErr     error
	wake       chan struct{} // 1-buffered: killAt moved
	stopCtl    chan struct{} // closed by the waiter: control loop ends
	ctlDone    chan struct{} // closed by the control loop

	done   chan struct{} // closed once result is set
	result Result
}

func newProc(spec Spec, cmd *exec.Cmd, started time.Time, out [2]*os.File) *Proc {
	p := &Proc{
		spec:    spec,
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		started: started,
		out:     out,
		tail:    newTailBuffer(spec.TailSize),
		wake:    make(chan struct{}, 1),
		stopCtl: make(chan struct{}),
		ctlDone: make(chan struct{}),
		done:    make(chan struct{}),
	}
	for i, stream := range []string{"stdout", "stderr"} {
		p.outW[i] = newLineWriter(spec.Log, stream, spec.MaxLine)
		p.readDone[i] = make(chan struct{})
	}
	return p
}

func (p *Proc) run() {
	for i := range p.out {
		go readStream(p.out[i], p.tail, p.outW[i], &p.readErr[i], p.readDone[i])
	}
	go p.control()
	go p.wait()
}

// Pid returns the leader's process id, which is also the process group id.
func (p *Proc) Pid() int { return p.pid }

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

// wait runs in its own goroutine: it reaps the leader, clears the group,
// stops the control loop, drains output and publishes the Result.
func (p *Proc) wait() {
	werr := p.cmd.Wait()
	res := Result{Started: p.started, Finished: time.Now(), ExitCode: -1}
	var errs []error
	if st := p.cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal()
		}
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		errs = append(errs, fmt.Errorf("wait: %w", werr))
	}
	if err := p.clearGroup(); err != nil {
		errs = append(errs, err)
	}
	p.mu.Lock()
	p.finished = true
	errs = append(errs, p.sigErr)
	p.mu.Unlock()
	close(p.stopCtl)
	<-p.ctlDone
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

// clearGroup terminates members of the group left after the leader exited
// and waits until none is alive, at most killWait after SIGKILL.
func (p *Proc) clearGroup() error {
	if !groupAlive(p.pid) {
		return nil
	}
	p.Terminate(p.spec.KillGrace)
	delay := time.Millisecond
	for groupAlive(p.pid) {
		p.mu.Lock()
		at := p.killSentAt
		p.mu.Unlock()
		if !at.IsZero() && time.Since(at) > killWait {
			return fmt.Errorf("process group %d: members alive %v after SIGKILL", p.pid, killWait)
		}
		time.Sleep(delay) // polling: group members are not our children
		delay = min(2*delay, 20*time.Millisecond)
	}
	return nil
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
