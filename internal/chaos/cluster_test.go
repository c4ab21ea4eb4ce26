//go:build chaos

package chaos

// The processes of the chaos test: daemons (started, paused, killed with
// their runs, restarted with a clock offset), the Redis server behind one
// proxy per node (internal/redistest), and the reads of the ledger.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// clockSeams are the daemon's test clock variables, preferred first:
// CRONLOCK_TEST_CLOCK_OFFSET (protocol v2's name) and
// CRONLOCK_INTERNAL_CLOCK_OFFSET (cmd/cronlock/daemon.go before it).
var clockSeams = []string{"CRONLOCK_TEST_CLOCK_OFFSET", "CRONLOCK_INTERNAL_CLOCK_OFFSET"}

// clockSeam returns the clock variable the binary knows (its name is a
// string in the binary), or "" when it knows none.
func clockSeam(bin string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	for _, s := range clockSeams {
		if bytes.Contains(data, []byte(s)) {
			return s, nil
		}
	}
	return "", nil
}

// daemon is one node: a cronlock process and what it needs to be started
// again (same node id, state directory and proxy).
type daemon struct {
	id, bin, cfg, stateDir, logPath string
	seam                            string // clock variable, "" if none
	proxy                           *redistest.Proxy
	report                          func(format string, args ...any) // a problem: the checker's row 7

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	exit     int
	stopping bool // the test asked this process to end
	paused   bool
}

// env is the daemon's environment: the test's, without any CRONLOCK_
// variable (an unknown one is warned about; a known one would override the
// config), plus the node's own.
func (d *daemon) env(offset time.Duration) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRONLOCK_") {
			env = append(env, kv)
		}
	}
	env = append(env, "CRONLOCK_NODE_ID="+d.id, "CRONLOCK_NODE_STATE_DIR="+d.stateDir, "CRONLOCK_REDIS_ADDRESS="+d.proxy.Addr())
	if offset != 0 && d.seam != "" {
		env = append(env, d.seam+"="+offset.String())
	}
	return env
}

// start starts the daemon (it must not be running), its clock shifted by
// offset; its stderr (JSON logs) is appended to logPath.
func (d *daemon) start(offset time.Duration) error {
	logf, err := os.OpenFile(d.logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, `{"chaos":"start","offset":%q,"at":%q}`+"\n", offset, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(d.bin, "-config", d.cfg, "-log-format", "json")
	cmd.Env, cmd.Stderr = d.env(offset), logf
	// Should the test process die (a go test -timeout panic skips the
	// cleanups), its daemons die with it. Each daemon leads a process group
	// of its own, as under systemd: a signal it sends to its own group
	// (kill(0, …)) must not reach the test, and shows as a daemon that
	// exited on its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", d.id, err)
	}
	done := make(chan struct{})
	d.mu.Lock()
	d.cmd, d.done, d.stopping, d.paused = cmd, done, false, false
	d.mu.Unlock()
	go func() {
		_ = cmd.Wait() // the exit code is all that is needed
		d.mu.Lock()
		d.exit = cmd.ProcessState.ExitCode()
		asked := d.stopping
		d.mu.Unlock()
		if !asked {
			d.report("%s (pid %d) exited on its own at %s: %s", d.id, cmd.Process.Pid, clock(time.Now()), cmd.ProcessState)
		}
		close(done)
	}()
	return nil
}

// running returns the process and its done channel, or nil if it has
// exited.
func (d *daemon) running() (*exec.Cmd, chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil, nil
	}
	select {
	case <-d.done:
		return nil, nil
	default:
		return d.cmd, d.done
	}
}

// pause sends SIGSTOP, resume SIGCONT (to the daemon only: its runs go on).
func (d *daemon) pause() bool  { return d.signalPaused(syscall.SIGSTOP, true) }
func (d *daemon) resume() bool { return d.signalPaused(syscall.SIGCONT, false) }

func (d *daemon) signalPaused(sig syscall.Signal, paused bool) bool {
	cmd, _ := d.running()
	if cmd == nil {
		return false
	}
	d.mu.Lock()
	d.paused = paused
	d.mu.Unlock()
	return cmd.Process.Signal(sig) == nil
}

// kill is a crash of the node's machine: the daemon is stopped (so that it
// forks nothing more), its children's process groups (its runs) and the
// daemon get SIGKILL. It returns when all of them are gone.
func (d *daemon) kill() (time.Time, error) {
	cmd, done := d.running()
	if cmd == nil {
		return time.Time{}, fmt.Errorf("%s: not running", d.id)
	}
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	pid := cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	// The daemon's group: the daemon and a child forked but not yet in its
	// own group.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(-k, syscall.SIGKILL)
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range kids {
		for !processGone(k) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return time.Now(), nil
}

// term sends SIGTERM (and SIGCONT) and waits up to timeout for a clean
// exit; after that it sends SIGKILL. A daemon that does not exit 0 in time
// is a problem.
func (d *daemon) term(timeout time.Duration, why string) {
	cmd, done := d.running()
	if cmd == nil {
		return
	}
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-done:
		d.mu.Lock()
		code := d.exit
		d.mu.Unlock()
		if code != 0 {
			d.report("%s: exit code %d after SIGTERM (%s), want 0", d.id, code, why)
		}
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		d.report("%s: still running %v after SIGTERM (%s); killed", d.id, timeout, why)
	}
}

// waitLog waits until the daemon's log holds want (a JSON fragment).
func (d *daemon) waitLog(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(d.logPath)
		if bytes.Contains(data, []byte(want)) {
			return nil
		}
		if cmd, _ := d.running(); cmd == nil {
			return fmt.Errorf("%s exited before logging %s; log:\n%s", d.id, want, tail(data, 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %s within %v; log:\n%s", d.id, want, timeout, tail(data, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(data []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range dirs {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// parentOf reads the parent pid of p from /proc/p/stat.
func parentOf(p int) (int, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(f) == 0 || f[0] == "Z"
}

// redisBox is the Redis server and what the test did to it. mu
// serialises restarts and ledger reads.
type redisBox struct {
	srv *redistest.Server
	dir string // its --dir: the AOF

	mu     sync.Mutex
	losses []Loss
	ledger Ledger
	bad    []string
	reads  int
	notes  []string // what a restart from the AOF lost (nothing, with fsync always)
}

// restart kills Redis (SIGKILL: a crash), erases its directory when empty
// is set, waits down and starts it again on the same port. The ledger is
// read just before the kill.
func (r *redisBox) restart(jobs []string, empty bool, down time.Duration) (killed, up time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readLocked(jobs)
	before := r.countLocked(jobs)
	r.srv.Kill()
	killed = time.Now()
	if empty {
		entries, err := os.ReadDir(r.dir)
		if err != nil {
			return killed, killed, err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(r.dir, e.Name())); err != nil {
				return killed, killed, err
			}
		}
	}
	time.Sleep(down)
	r.srv.Restart()
	up = time.Now()
	if empty {
		r.losses = append(r.losses, Loss{From: killed, To: up})
		return killed, up, nil
	}
	after := r.countLocked(jobs)
	for _, job := range jobs {
		if after[job] < before[job] {
			r.notes = append(r.notes, fmt.Sprintf("the restart of Redis from its AOF at %s lost %d of job %s's occurrence records (%d before, %d after)",
				clock(killed), before[job]-after[job], job, before[job], after[job]))
		}
	}
	return killed, up, nil
}

// countLocked counts each job's occurrence records (HLEN).
func (r *redisBox) countLocked(jobs []string) map[string]int {
	n := map[string]int{}
	for _, job := range jobs {
		for _, key := range []string{"cronlock:occ:" + job, "cronlock:occ:{" + job + "}"} {
			v, err := redistest.Do(r.srv.Addr(), 2*time.Second, "HLEN", key)
			if c, _ := strconv.Atoi(v); err == nil {
				n[job] += c
			}
		}
	}
	return n
}

// read merges one read of every job's ledger.
func (r *redisBox) read(jobs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readLocked(jobs)
}

func (r *redisBox) readLocked(jobs []string) {
	const timeout = 2 * time.Second
	addr := r.srv.Addr()
	keys, err := redistest.Do(addr, timeout, "KEYS", "cronlock:occ:*")
	if err != nil {
		return // Redis down or busy: the next read
	}
	r.reads++
	r.ledger.Reads = r.reads
	if keys != "" {
		r.ledger.Found = true
	}
	for _, job := range jobs {
		// Standalone keys are P+"occ:"+J; Cluster mode tags the job.
		for _, key := range []string{"cronlock:occ:" + job, "cronlock:occ:{" + job + "}"} {
			reply, err := redistest.Do(addr, timeout, "HGETALL", key)
			if err != nil || reply == "" {
				continue
			}
			recs, bad := ParseRecords(job, strings.Split(reply, "\n"))
			r.ledger.Add(job, recs)
			r.bad = append(r.bad, bad...)
		}
	}
}

// snapshot returns what was read so far, the losses, the records that
// could not be read, and notes.
func (r *redisBox) snapshot() (Ledger, []Loss, []string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger, append([]Loss(nil), r.losses...), append([]string(nil), r.bad...), append([]string(nil), r.notes...)
}
