package actors

import (
	"testing"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/statedir"
)

// keeper is a SeenKeeper in memory.
type keeper struct {
	kept map[string]statedir.Seen
	saw  []statedir.Seen
}

func (k *keeper) Get(job string) (statedir.Seen, bool) { s, ok := k.kept[job]; return s, ok }
func (k *keeper) Saw(job string, seq, runs int64) {
	k.saw = append(k.saw, statedir.Seen{Seq: seq, Runs: runs})
}

// A job starts from the counts its node kept across its restart, and
// hands every rise to the keeper; nothing is handed when nothing rose
// (docs/protocol.md, R5, R6).
func TestJob_SeenCountsAreKept(t *testing.T) {
	k := &keeper{kept: map[string]statedir.Seen{"once": {Seq: 9, Runs: 1}, "tick": {Seq: 4, Runs: 4}}}
	shared := ShareDeps(JobDeps{Seen: k})
	once := NewJobOf(&config.Job{Name: "once", MaxRuns: 1}, shared)
	if s, r := once.seenSeq.Load(), once.seenRuns.Load(); s != 9 || r != 1 {
		t.Fatalf("max_runs job after a restart: seen seq %d runs %d, want 9 and 1 (kept)", s, r)
	}
	once.See(8, 1) // nothing rose
	once.See(12, 1)
	once.See(12, 2)
	if want := []statedir.Seen{{Seq: 12, Runs: 1}, {Seq: 12, Runs: 2}}; len(k.saw) != 2 || k.saw[0] != want[0] || k.saw[1] != want[1] {
		t.Fatalf("kept rises: %+v, want %+v", k.saw, want)
	}

	k.saw = nil
	tick := NewJobOf(&config.Job{Name: "tick"}, shared) // no max_runs: its seq tells a restarted node of a loss (R5)
	if s, r := tick.seenSeq.Load(), tick.seenRuns.Load(); s != 4 || r != 4 {
		t.Errorf("job without max_runs after a restart: seen seq %d runs %d, want 4 and 4 (kept)", s, r)
	}
	tick.See(5, 4)
	if len(k.saw) != 1 || k.saw[0] != (statedir.Seen{Seq: 5, Runs: 4}) {
		t.Errorf("job without max_runs: kept rises %+v, want its seq 5", k.saw)
	}
}
