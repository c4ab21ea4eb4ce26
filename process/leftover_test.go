package process

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanedGroup makes what a SIGKILLed daemon leaves: a process group
// whose leader has exited while a member (sleep 1000, after prelude) still
// runs, re-parented. The group is in a session of its own (setsid), so
// that the run that made it can end without killing it. It returns the
// group as the daemon would have recorded it and the member's pid.
func orphanedGroup(t *testing.T, prelude string) (Group, int) {
	t.Helper()
	h, spec := newHarness(t)
	spec.Command = `setsid sh -c '` + prelude + ` sleep 1000 </dev/null >/dev/null 2>&1 & ` +
		`echo $$ $! $(cut -d" " -f22 /proc/$$/stat)'`
	if res := h.wait(h.start(spec)); res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("got exit %d err %v", res.ExitCode, res.Err)
	}
	f := strings.Fields(h.lines("stdout")[0])
	leader, member := atoi(t, f[0]), atoi(t, f[1])
	t.Cleanup(func() { killPid(member) })
	g := Group{ID: leader, Session: leader, LeaderStart: uint64(atoi(t, f[2]))}
	if st, ok := readStat(member); !ok || st.pgrp != leader || !st.live() {
		t.Fatalf("member %d: stat %+v ok %v, want alive in group %d", member, st, ok, leader)
	}
	return g, member
}

// waitGone waits until pid has left the process table (reaped: it is our
// child by adoption) or testTimeout passes.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for st, ok := readStat(pid); ok && st.live(); st, ok = readStat(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive after %v", pid, testTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKillLeftovers_OrphanedGroup(t *testing.T) {
	g, member := orphanedGroup(t, "")
	got := KillLeftovers([]Leftover{{Group: g, KillGrace: time.Hour}})
	if r := got[0]; r.Outcome != LeftoverKilled || r.Signal != syscall.SIGTERM || r.Members != 1 {
		t.Errorf("got %+v, want killed by SIGTERM, 1 member", r)
	}
	if alive(member) {
		t.Errorf("member %d alive after KillLeftovers", member)
	}
}

func TestKillLeftovers_SIGKILLAfterGrace(t *testing.T) {
	g, member := orphanedGroup(t, "trap \"\" TERM;")
	const grace = 200 * time.Millisecond
	t0 := time.Now()
	got := KillLeftovers([]Leftover{{Group: g, KillGrace: grace}})
	if took := time.Since(t0); took < grace {
		t.Errorf("took %v, want at least kill_grace %v", took, grace)
	}
	if r := got[0]; r.Outcome != LeftoverKilled || r.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, want killed by SIGKILL", r)
	}
	if alive(member) {
		t.Errorf("member %d alive after KillLeftovers", member)
	}
}

// A group that cannot be shown to be the recorded one is never signalled.
func TestKillLeftovers_RefusesWhatIsNotOurs(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Group)
		want LeftoverOutcome
	}{
		"other session":         {func(g *Group) { g.Session++ }, LeftoverForeign},
		"member older than run": {func(g *Group) { g.LeaderStart += 1 << 20 }, LeftoverForeign},
		"no leader start":       {func(g *Group) { g.LeaderStart = 0 }, LeftoverUnverified},
	} {
		t.Run(name, func(t *testing.T) {
			g, member := orphanedGroup(t, "")
			tc.edit(&g)
			got := KillLeftovers([]Leftover{{Group: g, KillGrace: 0}})
			if r := got[0]; r.Outcome != tc.want || r.Signal != 0 || r.Reason == "" {
				t.Errorf("got %+v, want %v, no signal, a reason", r, tc.want)
			}
			if !alive(member) {
				t.Errorf("member %d was killed", member)
			}
		})
	}
}

// A live leader is checked by its start time: the same pid with another
// start time is a reused pid.
func TestKillLeftovers_LiveLeader(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = "sleep 1000 & echo forked; sleep 1000"
	p := h.start(spec)
	h.waitLines("stdout", 1) // the background sleep is in the group
	st, ok := readStat(p.Pid())
	if !ok {
		t.Fatalf("no /proc/%d/stat", p.Pid())
	}
	reused := p.Group()
	reused.LeaderStart, reused.LeaderStartLast = st.startTime-1, st.startTime-1
	if r := KillLeftovers([]Leftover{{Group: reused}})[0]; r.Outcome != LeftoverForeign || r.Signal != 0 {
		t.Errorf("leader with another start time: got %+v, want foreign, no signal", r)
	}
	after := p.Group()
	after.LeaderStart, after.LeaderStartLast = st.startTime+1, st.startTime+3
	if r := KillLeftovers([]Leftover{{Group: after}})[0]; r.Outcome != LeftoverForeign || r.Signal != 0 {
		t.Errorf("leader started before the recorded range: got %+v, want foreign, no signal", r)
	}
	// The range the fork's bracket gives when it straddles a tick, with
	// the leader's real start tick as its last tick: ours.
	ranged := p.Group()
	ranged.LeaderStart, ranged.LeaderStartLast = st.startTime-1, st.startTime
	if r := KillLeftovers([]Leftover{{Group: ranged, KillGrace: time.Hour}})[0]; r.Outcome != LeftoverKilled || r.Members < 2 {
		t.Errorf("got %+v, want killed with at least 2 members", r)
	}
	if res := h.wait(p); res.Signal != syscall.SIGTERM {
		t.Errorf("run: got signal %v, want SIGTERM", res.Signal)
	}
	if r := KillLeftovers([]Leftover{{Group: p.Group()}})[0]; r.Outcome != LeftoverGone && r.Outcome != LeftoverForeign {
		t.Errorf("after the run: got %+v, want gone (or foreign, if the pid was reused)", r)
	}
}

func TestKillLeftovers_Several(t *testing.T) {
	a, am := orphanedGroup(t, "")
	b, bm := orphanedGroup(t, "trap \"\" TERM;")
	got := KillLeftovers([]Leftover{{Group: a, KillGrace: time.Hour}, {Group: b, KillGrace: 100 * time.Millisecond}})
	if got[0].Outcome != LeftoverKilled || got[0].Signal != syscall.SIGTERM || got[1].Outcome != LeftoverKilled || got[1].Signal != syscall.SIGKILL {
		t.Errorf("got %+v and %+v, want killed by SIGTERM and by SIGKILL", got[0], got[1])
	}
	if r := KillLeftovers([]Leftover{{Group: a}})[0]; r.Outcome != LeftoverGone || r.Signal != 0 {
		t.Errorf("a group already killed: got %+v, want gone, no signal", r)
	}
	waitGone(t, am)
	waitGone(t, bm)
}
