package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Terminate asks the whole process group to stop: SIGTERM now,
// unless already sent, and SIGKILL once grace has passed. grace <= 0 sends
// SIGKILL now. A later call can only bring a pending SIGKILL forward, never
// push it back. It never blocks, may be called from any goroutine any number
// of times, and does nothing once SIGKILL was sent or the run is finished
// (Done closed). Signal failures other than "no such process" are reported
// in Result.Err.
func (p *Proc) Terminate(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.killSent {
		return
	}
	if grace <= 0 {
		p.killLocked()
		return
	}
	if !p.termSent {
		p.termSent = true
		p.signalLocked(syscall.SIGTERM)
	}
	at := time.Now().Add(grace)
	if p.killAt.IsZero() || at.Before(p.killAt) {
		p.killAt = at
		select {
		case p.wake <- struct{}{}:
		default: // a wake-up is already pending; it reads the new killAt
		}
	}
}

// killLocked sends SIGKILL to the group. p.mu must be held.
func (p *Proc) killLocked() {
	p.killSent = true
	p.killSentAt = time.Now()
	p.signalLocked(syscall.SIGKILL)
}

// signalLocked sends sig to the group. p.mu must be held.
func (p *Proc) signalLocked(sig syscall.Signal) {
	err := syscall.Kill(-p.pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) && p.sigErr == nil {
		p.sigErr = fmt.Errorf("signal process group %d with %v: %w", p.pid, sig, err)
	}
}

// control owns the SIGKILL timer. It ends when stopCtl is closed.
func (p *Proc) control() {
	defer close(p.ctlDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-p.stopCtl:
			return
		case <-p.wake:
			p.armKill(timer)
		case <-timer.C:
			p.armKill(timer)
		}
	}
}

// armKill sends SIGKILL if it is due, else resets timer to the pending
// SIGKILL deadline.
func (p *Proc) armKill(timer *time.Timer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.killSent || p.killAt.IsZero() {
		return
	}
	if d := time.Until(p.killAt); d > 0 {
		timer.Reset(d)
		return
	}
	p.killLocked()
}

// groupGone reports whether process group pgid has no member at all, not
// even a zombie (kill(2) with signal 0 fails with ESRCH).
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// groupAlive reports whether process group pgid has a member that is not a
// zombie. Zombies count as gone: they hold no resources but a pid, and
// reaping them is their parent's job (ours, for adopted orphans).
func groupAlive(pgid int) bool {
	if groupGone(pgid) {
		return false
	}
	found := false
	err := scanProcs(func(st procStat) bool {
		found = st.pgrp == pgid && st.live()
		return !found
	})
	return found || err != nil // kill(2) says the group exists; trust it if /proc fails
}

// procStat is what cronlock reads from /proc/PID/stat (proc(5)).
type procStat struct {
	pid       int
	state     byte // R, S, D, Z, X, …
	ppid      int
	pgrp      int
	session   int
	startTime uint64 // field 22: clock ticks after boot
}

// live reports whether the process runs or can run (not a zombie).
func (st procStat) live() bool { return st.state != 'Z' && st.state != 'X' }

// readStat reads /proc/pid/stat; ok is false when the process is gone or
// the file cannot be parsed.
func readStat(pid int) (st procStat, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')') // comm may contain spaces and ')'
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:]) // field 3 (state) onwards
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	st := procStat{pid: pid, state: f[0][0]}
	var errs [4]error
	st.ppid, errs[0] = strconv.Atoi(string(f[1]))
	st.pgrp, errs[1] = strconv.Atoi(string(f[2]))
	st.session, errs[2] = strconv.Atoi(string(f[3]))
	st.startTime, errs[3] = strconv.ParseUint(string(f[19]), 10, 64)
	if errors.Join(errs[:]...) != nil {
		return procStat{}, false
	}
	return st, true
}

// scanProcs calls fn with the stat of every process in /proc until fn
// returns false. Processes that exit meanwhile are skipped.
func scanProcs(fn func(procStat) bool) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && !fn(st) {
			return nil
		}
	}
	return nil
}
