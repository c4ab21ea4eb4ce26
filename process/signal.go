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

// groupAlive reports whether process group pgid has a member that is not a
// zombie. Zombies count as gone: they hold no resources but a pid, and
// reaping orphans is init's job.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // kill(2) says the group exists; trust it
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, pg, ok := procStat(pid); ok && pg == pgid && st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}

// procStat returns the state and process group of pid from /proc/pid/stat.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')') // comm may contain spaces and ')'
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp ...
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
