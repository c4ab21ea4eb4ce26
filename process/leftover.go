package process

import (
	"fmt"
	"syscall"
	"time"
)

// Group identifies a run's process group beyond the life of the daemon
// that started it, so that the next incarnation can tell the group from
// processes that reused its numbers.
type Group struct {
	// ID is the process group id, which is the leader's pid.
	ID int
	// Session is the leader's session id: the daemon's session (runs get
	// their own group, not their own session), shared by every member.
	Session int
	// LeaderStart is the leader's start time in clock ticks after boot
	// (/proc/PID/stat field 22, proc(5)), or the first tick it may have
	// started in when only a range is known; 0 when it could not be read.
	LeaderStart uint64
	// LeaderStartLast is the last tick the leader may have started in
	// (process/starttime.go): LeaderStart when the tick is known exactly,
	// at most a second of ticks after it. 0 (a record written before the
	// range existed) means LeaderStart.
	LeaderStartLast uint64
}

// leaderStarted reports whether tick is a start time the group's leader
// may have had: within [LeaderStart, LeaderStartLast].
func (g Group) leaderStarted(tick uint64) bool {
	return tick >= g.LeaderStart && tick <= max(g.LeaderStart, g.LeaderStartLast)
}

// leaderTicks names the leader's start time for a reason: "tick N" or
// "ticks N–M".
func (g Group) leaderTicks() string {
	if g.LeaderStartLast <= g.LeaderStart {
		return fmt.Sprintf("tick %d", g.LeaderStart)
	}
	return fmt.Sprintf("ticks %d–%d", g.LeaderStart, g.LeaderStartLast)
}

// Leftover is a process group that a previous incarnation of the daemon
// started and may have left running when it died.
type Leftover struct {
	Group Group
	// KillGrace is the delay between SIGTERM and SIGKILL (the job's
	// kill_grace when the group was started); <= 0 means SIGKILL at once.
	KillGrace time.Duration
}

// LeftoverOutcome says what KillLeftovers did with one group.
type LeftoverOutcome int

const (
	// LeftoverGone: the group had no live member; nothing was signalled.
	LeftoverGone LeftoverOutcome = iota
	// LeftoverKilled: the group's members were terminated and are gone.
	LeftoverKilled
	// LeftoverForeign: the group id now belongs to processes that cannot
	// be ours (pid reused); nothing was signalled. The recorded group
	// itself must have ended before its id could be reused.
	LeftoverForeign
	// LeftoverUnverified: the group has live members but the record has no
	// leader start time to check them against; nothing was signalled.
	LeftoverUnverified
	// LeftoverSurvived: members were still alive killWait after SIGKILL
	// (uninterruptible sleep).
	LeftoverSurvived
)

// String returns the outcome's log spelling: gone, killed, foreign,
// unverified, survived.
func (o LeftoverOutcome) String() string {
	switch o {
	case LeftoverGone:
		return "gone"
	case LeftoverKilled:
		return "killed"
	case LeftoverForeign:
		return "foreign"
	case LeftoverUnverified:
		return "unverified"
	case LeftoverSurvived:
		return "survived"
	}
	return fmt.Sprintf("LeftoverOutcome(%d)", int(o))
}

// LeftoverResult is what KillLeftovers found and did for one group.
type LeftoverResult struct {
	Outcome LeftoverOutcome
	// Members is the number of live members found before signalling.
	Members int
	// Signal is the last signal sent to the group (SIGTERM or SIGKILL), or
	// 0 when none was.
	Signal syscall.Signal
	// Reason explains LeftoverForeign and LeftoverUnverified.
	Reason string
}

// leftoverPoll is how often KillLeftovers looks at /proc while it waits
// for leftover groups to end: they are not our children (they were
// re-parented when their daemon died), so no exit reaches us. It runs
// once, at start-up, before anything is claimed.
const leftoverPoll = 20 * time.Millisecond

// KillLeftovers terminates the process groups a previous incarnation of
// the daemon left behind: SIGTERM to every verified group at once, SIGKILL
// to each still alive after its KillGrace, and waits until every group is
// gone or killWait has passed since its SIGKILL. A group is verified when
// every live member is in the recorded session and started no earlier
// than the recorded leader, and a process holding the leader's pid has the
// leader's start time; a group that fails this is left alone
// (LeftoverForeign). Zombies count as gone. It blocks for at most the
// largest KillGrace plus killWait plus one poll, and returns one result
// per group, in order.
func KillLeftovers(groups []Leftover) []LeftoverResult {
	res := make([]LeftoverResult, len(groups))
	members := liveMembers()
	start := time.Now()
	type kill struct{ killAt, killedAt time.Time }
	pending := map[int]*kill{} // by index into groups
	for i, g := range groups {
		if res[i] = verifyLeftover(g.Group, members); res[i].Outcome != LeftoverKilled {
			continue
		}
		k := &kill{killAt: start.Add(g.KillGrace)}
		sig := syscall.SIGTERM
		if g.KillGrace <= 0 {
			sig, k.killedAt = syscall.SIGKILL, start
		}
		if err := syscall.Kill(-g.Group.ID, sig); err != nil {
			res[i].Outcome = LeftoverGone // ended since the scan (ESRCH)
			continue
		}
		res[i].Signal, pending[i] = sig, k
	}
	for len(pending) > 0 {
		time.Sleep(leftoverPoll)
		members = liveMembers()
		now := time.Now()
		for i, k := range pending {
			id := groups[i].Group.ID
			switch {
			case len(members[id]) == 0:
				delete(pending, i)
			case k.killedAt.IsZero() && !now.Before(k.killAt):
				if syscall.Kill(-id, syscall.SIGKILL) == nil {
					res[i].Signal = syscall.SIGKILL
				}
				k.killedAt = now
			case !k.killedAt.IsZero() && now.Sub(k.killedAt) > killWait:
				res[i].Outcome = LeftoverSurvived
				delete(pending, i)
			}
		}
	}
	return res
}

// verifyLeftover decides whether g, as found in members (live processes by
// process group), is ours to kill: LeftoverKilled means "verified, kill".
func verifyLeftover(g Group, members map[int][]procStat) LeftoverResult {
	if g.ID <= 1 { // kill(-0) is our own group, kill(-1) every process
		return LeftoverResult{Outcome: LeftoverForeign, Reason: fmt.Sprintf("%d is no process group id", g.ID)}
	}
	if leader, ok := readStat(g.ID); ok && !g.leaderStarted(leader.startTime) {
		// A live pid equal to the group id was allocated after the group
		// ended (a pid is not reused while it names a group).
		return LeftoverResult{Outcome: LeftoverForeign,
			Reason: fmt.Sprintf("pid %d was reused by a process started at tick %d, not at %s", g.ID, leader.startTime, g.leaderTicks())}
	}
	live := members[g.ID]
	if len(live) == 0 {
		return LeftoverResult{Outcome: LeftoverGone}
	}
	if g.LeaderStart == 0 {
		return LeftoverResult{Outcome: LeftoverUnverified, Members: len(live),
			Reason: "no leader start time recorded"}
	}
	for _, m := range live {
		if m.session != g.Session || m.startTime < g.LeaderStart {
			return LeftoverResult{Outcome: LeftoverForeign, Members: len(live),
				Reason: fmt.Sprintf("member %d is in session %d started at tick %d; the run's leader was in session %d, started at %s",
					m.pid, m.session, m.startTime, g.Session, g.leaderTicks())}
		}
	}
	return LeftoverResult{Outcome: LeftoverKilled, Members: len(live)}
}

// liveMembers maps each process group id to its live (non-zombie)
// members, from one scan of /proc.
func liveMembers() map[int][]procStat {
	out := map[int][]procStat{}
	_ = scanProcs(func(st procStat) bool {
		if st.live() {
			out[st.pgrp] = append(out[st.pgrp], st)
		}
		return true
	})
	return out
}
