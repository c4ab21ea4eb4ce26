package actors

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// noteLocal keeps the latest slot whatever order the skips are noted in
// (a run goroutine's skip of slot S may come after the job actor's of
// S+1), and only the reasons decided by this node alone (localReasons).
func TestNoteLocal_LatestSlotWins(t *testing.T) {
	j := &Job{}
	d := &j.deps
	s := time.Unix(1_700_000_000, 0)
	d.noteLocal(s.Add(time.Second), ledger.SkipRedisError)
	d.noteLocal(s, ledger.SkipClaimLate)
	d.noteLocal(s.Add(2*time.Second), ledger.SkipClaimedElsewhere) // not local: a record exists

	if slot, r := j.LocalSkip(s.Unix(), s.Unix()+5); slot != s.Unix()+1 || r != ledger.SkipRedisError {
		t.Errorf("LocalSkip: %d %q, want %d redis_error", slot, r, s.Unix()+1)
	}
	if slot, r := j.LocalSkip(s.Unix(), s.Unix()); slot != 0 || r != "" {
		t.Errorf("LocalSkip of the earlier slot alone: %d %q, want none (the latest only is kept)", slot, r)
	}
}
