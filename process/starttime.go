package process

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The leader's start time (Group.LeaderStart) without reading
// /proc/PID/stat on every start (an open, a read and a close of a procfs
// file: about 6% of the daemon's CPU under 3 nodes × 200 runs/s, README.md
// "Performance").
//
// proc(5) gives field 22, starttime, as the time the process started after
// system boot in clock ticks; the kernel sets it at fork (copy_process
// records ktime_get_boottime_ns in task->start_boottime) and /proc shows it
// divided down to USER_HZ. CLOCK_BOOTTIME (clock_gettime(2)) is the same
// clock, shifted alike inside a time namespace. So a boot-clock reading
// just before the fork and one just after it bracket the child's start
// time: when both fall in the same tick, that tick is the child's
// starttime exactly. When they straddle a tick boundary, the start time is
// one of the ticks from the first reading to the second, and Start records
// that range (Group.LeaderStart to Group.LeaderStartLast) instead of
// reading /proc: the bracket spans ForkExec up to the child's exec, which
// under 3 nodes × 200 runs/s on a 2-core machine straddles a tick often
// enough that the /proc read was 3% of the daemon's CPU. The range is as
// good an identity as one tick: a pid is not reused while its group lives,
// so a process that reused the leader's pid started after the group ended,
// and a bracket is at most maxForkTicks long (past that, Start reads /proc).

// userHZ is USER_HZ, the unit of /proc/PID/stat's times (proc(5):
// sysconf(_SC_CLK_TCK)); the kernel's ABI fixes it at 100 on every
// architecture Linux runs cronlock on.
const userHZ = 100

// bootTicks is CLOCK_BOOTTIME in USER_HZ ticks, or 0 if it cannot be read
// (then forkTick refuses the bracket).
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// maxForkTicks bounds the range forkTicks accepts: 1 s of ticks. A fork
// bracketed by readings further apart (a frozen or badly overloaded
// machine) has its start time read from /proc instead.
const maxForkTicks = userHZ

// forkTicks is the range of ticks the child's start time lies in, from the
// readings before (from) and after (to) its fork: first == last when both
// fall in one tick. ok is false when a reading failed (0), the clock went
// backwards or the range is longer than maxForkTicks.
func forkTicks(from, to uint64) (first, last uint64, ok bool) {
	return from, to, from != 0 && to >= from && to-from <= maxForkTicks
}

// ownSession is this process's session id, which every child inherits:
// Start gives it a process group of its own (setpgid), never a session.
// ok is false when getsid(2) failed (then Start reads /proc).
var ownSession = sync.OnceValues(func() (int, bool) {
	sid, err := unix.Getsid(0)
	return sid, err == nil
})
