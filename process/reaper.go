package process

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel keeps one list of children per process and wait4(2) takes
// from it, so a process has exactly one reaper or several that steal each
// other's exit statuses. This package's reaper is therefore the one
// package-level value of cronlock (docs/architecture.md, "Processes and
// environment"): it mirrors a per-process kernel resource, and passing it
// around would only allow a second, conflicting one.
var children = newReaper()

// exitStatus is what the reaper hands a leader's Proc: its wait status and
// when it was reaped, or err when it cannot be had (ECHILD: someone else in
// the process waited for it).
type exitStatus struct {
	ws  syscall.WaitStatus
	at  time.Time
	err error
}

// reaper owns all waiting for this process's children. It runs one
// goroutine while a registered leader has not been reaped yet, or while
// AdoptOrphans is in force; each SIGCHLD makes it run one pass:
//
//   - adopting (the daemon, a child subreaper): wait4(-1, WNOHANG) until no
//     exited child is left; a registered leader's status goes to its Proc,
//     any other child (an orphan re-parented to us) is discarded;
//   - otherwise (tests, library use): wait4(pid, WNOHANG) for each
//     registered leader only, so that os/exec children of the same process
//     keep their exit statuses.
//
// After a pass that reaped anything, the channel returned by reaped is
// closed (and replaced): that is how a Proc learns that a member of its
// group may have exited, without polling.
type reaper struct {
	// forkMu is read-held across fork and registration (startChild) and
	// write-held by a pass, so that a pass never reaps a child that is not
	// registered yet, and os.StartProcess's own wait for a child whose exec
	// failed is never raced.
	forkMu sync.RWMutex

	mu       sync.Mutex // guards the fields below
	leaders  map[int]chan<- exitStatus
	adopters int  // AdoptOrphans holders
	running  bool // the pass goroutine runs
	reapedCh chan struct{}
	orphans  int // adopted children reaped and discarded (tests read it)
	wake     chan struct{}
}

func newReaper() *reaper {
	return &reaper{leaders: map[int]chan<- exitStatus{}, reapedCh: make(chan struct{}),
		wake: make(chan struct{}, 1)}
}

// AdoptOrphans makes this process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER): processes orphaned below it are re-parented to
// it instead of to init. From then on the reaper waits for every child,
// registered or not (wait4(-1)), so orphans never stay zombies, which also
// makes the daemon a correct PID 1 in a container without an init. As PID
// 1 every orphan of the namespace is ours anyway; prctl only matters below
// another init.
//
// Only a program in which nothing else waits for children may call it:
// os/exec's Cmd.Wait or os.Process.Wait would lose their child's status to
// the reaper. The cronlock binary's main does (every process it starts
// goes through Start); test binaries that run redis-server through os/exec
// must not. release undoes the call (the last release clears the
// subreaper flag); calls nest. The error is prctl's.
func AdoptOrphans() (release func(), err error) {
	r := children
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adopters == 0 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("become child subreaper: %w", err)
		}
	}
	r.adopters++
	r.ensureRunningLocked()
	r.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.adopters--; r.adopters == 0 {
				_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			}
			r.poke() // a pass notices and the goroutine may end
		})
	}, nil
}

// startChild starts path with argv and attr (syscall.ForkExec) and
// registers its pid, holding the fork lock so that no pass runs in
// between; held, if not nil, runs with the lock still held (the child
// cannot have been reaped yet, so /proc/PID is there). The returned
// channel receives the child's exit status once. An error is an
// *os.PathError (op "fork/exec"), as os.StartProcess returns.
func (r *reaper) startChild(path string, argv []string, attr *syscall.ProcAttr, held func(pid int)) (int, <-chan exitStatus, error) {
	r.forkMu.RLock()
	defer r.forkMu.RUnlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	ch := make(chan exitStatus, 1)
	r.mu.Lock()
	r.leaders[pid] = ch
	r.ensureRunningLocked()
	r.mu.Unlock()
	if held != nil {
		held(pid)
	}
	// No wake-up needed: a running pass goroutine listens for SIGCHLD since
	// before its first pass, and a new one starts with a pass.
	return pid, ch, nil
}

// reaped returns a channel that is closed after the next pass that reaps
// any child. Take it before checking a condition, then wait on it.
func (r *reaper) reaped() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reapedCh
}

// adopting reports whether AdoptOrphans is in force.
func (r *reaper) adopting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adopters > 0
}

// orphansReaped is how many adopted children were reaped and discarded.
func (r *reaper) orphansReaped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.orphans
}

func (r *reaper) poke() {
	select {
	case r.wake <- struct{}{}:
	default: // a pass is already due
	}
}

// ensureRunningLocked starts the pass goroutine unless it runs. r.mu must
// be held.
func (r *reaper) ensureRunningLocked() {
	if !r.running {
		r.running = true
		go r.loop()
	}
}

// loop runs a pass at start, on every SIGCHLD and on every poke, until a
// pass finds nothing left to wait for.
func (r *reaper) loop() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for r.pass() {
		select {
		case <-sig:
		case <-r.wake:
		}
	}
}

// pass reaps every exited child it may and reports whether the goroutine
// must go on (a leader is registered, or adopting).
func (r *reaper) pass() bool {
	r.forkMu.Lock()
	r.mu.Lock()
	adopt := r.adopters > 0
	var pids []int
	if !adopt {
		for pid := range r.leaders {
			pids = append(pids, pid)
		}
	}
	r.mu.Unlock()
	var got []reapedChild
	if adopt {
		got = reapAny()
	} else {
		got = reapEach(pids)
	}
	r.forkMu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range got {
		r.deliverLocked(c)
	}
	if adopt && len(got) == 0 && len(r.leaders) > 0 && noChildren() {
		// wait4(-1) says we have no children, yet leaders are registered:
		// something else in the process waited for them.
		for pid := range r.leaders {
			r.deliverLocked(reapedChild{pid: pid, st: exitStatus{at: time.Now(), err: syscall.ECHILD}})
		}
	}
	if len(got) > 0 {
		close(r.reapedCh)
		r.reapedCh = make(chan struct{})
	}
	if len(r.leaders) == 0 && r.adopters == 0 {
		r.running = false
		return false
	}
	return true
}

// deliverLocked hands c's status to its Proc, or counts an orphan. r.mu
// must be held.
func (r *reaper) deliverLocked(c reapedChild) {
	ch, ok := r.leaders[c.pid]
	if !ok {
		r.orphans++
		return
	}
	delete(r.leaders, c.pid)
	ch <- c.st // 1-buffered, one send per leader
}

type reapedChild struct {
	pid int
	st  exitStatus
}

// reapAny reaps every exited child (wait4(-1, WNOHANG)).
func reapAny() []reapedChild {
	var out []reapedChild
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return out // ECHILD: no children; 0: none exited
		}
		out = append(out, reapedChild{pid: pid, st: exitStatus{ws: ws, at: time.Now()}})
	}
}

// reapEach reaps those of pids that have exited (wait4(pid, WNOHANG)). A
// pid that is no longer our child (ECHILD: waited for elsewhere) is
// reported with that error.
func reapEach(pids []int) []reapedChild {
	var out []reapedChild
	for _, pid := range pids {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		for errors.Is(err, syscall.EINTR) {
			got, err = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		switch {
		case err != nil:
			out = append(out, reapedChild{pid: pid, st: exitStatus{at: time.Now(), err: err}})
		case got == pid:
			out = append(out, reapedChild{pid: pid, st: exitStatus{ws: ws, at: time.Now()}})
		}
	}
	return out
}

// noChildren reports whether this process has no child at all, reaped or
// not (waitid(2) with WNOWAIT leaves an exited child in place).
func noChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return errors.Is(err, syscall.ECHILD)
}
