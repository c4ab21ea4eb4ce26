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
		if p.killTimer == nil {
			p.killTimer = time.AfterFunc(grace, p.killDue)
		} else {
			p.killTimer.Reset(grace)
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

// killDue runs on the kill timer's own goroutine: it sends SIGKILL if it
// is due, else sets the timer to the pending SIGKILL deadline.
func (p *Proc) killDue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.killSent || p.killAt.IsZero() {
		return
	}
	if d := time.Until(p.killAt); d > 0 {
		p.killTimer.Reset(d)
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
// the file cannot be parsed. It reads into a stack buffer with three
// system calls: Start calls it for every run.
func readStat(pid int) (st procStat, ok bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	var buf [1024]byte // the file is well under 1 KiB (52 numbers and a 16-byte comm)
	n, err := syscall.Read(fd, buf[:])
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return procStat{}, false
	}
	return parseStat(pid, buf[:n])
}

// parseStat parses the fields of /proc/PID/stat that cronlock uses:
// state (3), ppid (4), pgrp (5), session (6) and starttime (22).
func parseStat(pid int, b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')') // comm may contain spaces and ')'
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	st := procStat{pid: pid}
	field := 3
	for rest := b[i+2:]; len(rest) > 0 && field <= 22; field++ {
		f := rest
		if j := bytes.IndexByte(rest, ' '); j >= 0 {
			f, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		ok := true
		switch field {
		case 3:
			ok = len(f) == 1
			if ok {
				st.state = f[0]
			}
		case 4:
			st.ppid, ok = decimalInt(f)
		case 5:
			st.pgrp, ok = decimalInt(f)
		case 6:
			st.session, ok = decimalInt(f)
		case 22:
			st.startTime, ok = decimal(f)
		}
		if !ok {
			return procStat{}, false
		}
	}
	return st, field > 22
}

func decimalInt(b []byte) (int, bool) {
	n, ok := decimal(b)
	return int(n), ok
}

// decimal parses an unsigned decimal number (at most 19 digits).
func decimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
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
