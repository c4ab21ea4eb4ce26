package process

import (
	"testing"
)

// The group identity Start records (session, leader start tick) must be
// what /proc says of the leader, whether it came from the boot-clock
// bracket or from /proc itself: KillLeftovers compares them for equality,
// and a tick off by one would make the next incarnation leave a crashed
// run's group alive as "foreign".
func TestStart_GroupIsTheLeadersProcStat(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = "exec sleep 30"
	bracketed := 0
	for range 60 {
		from := bootTicks()
		p := h.start(spec)
		if _, ok := forkTick(from, bootTicks()); ok {
			bracketed++
		}
		st, ok := readStat(p.Pid())
		if !ok {
			t.Fatalf("pid %d: no /proc/PID/stat", p.Pid())
		}
		if g := p.Group(); g.ID != p.Pid() || g.Session != st.session || g.LeaderStart != st.startTime {
			t.Fatalf("Group() = %+v; /proc/%d/stat: session %d, starttime %d", g, p.Pid(), st.session, st.startTime)
		}
		p.Terminate(0)
		h.wait(p)
	}
	if bracketed == 0 {
		t.Errorf("no start fell within one boot-clock tick: the bracket path went untested")
	}
}

func TestForkTick(t *testing.T) {
	for _, c := range []struct {
		from, to uint64
		want     bool
	}{{5, 5, true}, {5, 6, false}, {0, 0, false}} {
		if got, ok := forkTick(c.from, c.to); ok != c.want || (ok && got != c.from) {
			t.Errorf("forkTick(%d, %d) = %d, %v; want ok %v", c.from, c.to, got, ok, c.want)
		}
	}
}
