package process

import (
	"testing"
)

// The group identity Start records (session, leader start ticks) must hold
// what /proc says of the leader, whether it came from the boot-clock
// bracket or from /proc itself: KillLeftovers checks the leader's start
// time against the range, and a range that missed it by a tick would make
// the next incarnation leave a crashed run's group alive as "foreign".
func TestStart_GroupIsTheLeadersProcStat(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = "exec sleep 30"
	bracketed := 0
	for range 60 {
		from := bootTicks()
		p := h.start(spec)
		if first, last, ok := forkTicks(from, bootTicks()); ok && first == last {
			bracketed++
		}
		st, ok := readStat(p.Pid())
		if !ok {
			t.Fatalf("pid %d: no /proc/PID/stat", p.Pid())
		}
		g := p.Group()
		if g.ID != p.Pid() || g.Session != st.session || !g.leaderStarted(st.startTime) || g.LeaderStartLast-g.LeaderStart > maxForkTicks {
			t.Fatalf("Group() = %+v; /proc/%d/stat: session %d, starttime %d", g, p.Pid(), st.session, st.startTime)
		}
		p.Terminate(0)
		h.wait(p)
	}
	if bracketed == 0 {
		t.Errorf("no start fell within one boot-clock tick: the bracket path went untested")
	}
}

func TestForkTicks(t *testing.T) {
	for _, c := range []struct {
		from, to uint64
		want     bool
	}{{5, 5, true}, {5, 6, true}, {5, 5 + maxForkTicks, true}, {5, 6 + maxForkTicks, false}, {6, 5, false}, {0, 0, false}} {
		first, last, ok := forkTicks(c.from, c.to)
		if ok != c.want || (ok && (first != c.from || last != c.to)) {
			t.Errorf("forkTicks(%d, %d) = %d, %d, %v; want ok %v", c.from, c.to, first, last, ok, c.want)
		}
	}
}

// A leader start recorded as a range of ticks (the fork straddled a tick)
// identifies the leader when its start time is inside the range, and only
// then; a record without LeaderStartLast (written before ranges) is one tick.
func TestGroup_LeaderStarted(t *testing.T) {
	for _, c := range []struct {
		g    Group
		tick uint64
		want bool
	}{
		{Group{LeaderStart: 10, LeaderStartLast: 10}, 10, true},
		{Group{LeaderStart: 10, LeaderStartLast: 10}, 11, false},
		{Group{LeaderStart: 10}, 10, true},
		{Group{LeaderStart: 10}, 11, false},
		{Group{LeaderStart: 10, LeaderStartLast: 12}, 9, false},
		{Group{LeaderStart: 10, LeaderStartLast: 12}, 11, true},
		{Group{LeaderStart: 10, LeaderStartLast: 12}, 12, true},
		{Group{LeaderStart: 10, LeaderStartLast: 12}, 13, false},
	} {
		if got := c.g.leaderStarted(c.tick); got != c.want {
			t.Errorf("%+v.leaderStarted(%d) = %v, want %v", c.g, c.tick, got, c.want)
		}
	}
}
