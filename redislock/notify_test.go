package redislock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/ledgertest"
)

var _ ledger.OutcomeRecorder = (*Redis)(nil)

func TestNotify_TransitionsRedis(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	ledgertest.OutcomeTransitions(t, r)
	ttl, err := r.c.Do(context.Background(), r.c.B().Pttl().Key(r.key("notify", "j")).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > ledger.NotifyStateTTL.Milliseconds() {
		t.Errorf("PTTL notify:j: got %d, %v, want (0, %d]", ttl, err, ledger.NotifyStateTTL.Milliseconds())
	}
}

// TestNotify_OneTransitionAmongRacers: clients that record the outcome of
// the same occurrence at once (a retry racing the first call) get its
// transition once in all.
func TestNotify_OneTransitionAmongRacers(t *testing.T) {
	srv := redistest.Start(t)
	clients := []*Redis{newRedis(t, srv.Addr(), Options{}), newRedis(t, srv.Addr(), Options{}), newRedis(t, srv.Addr(), Options{})}
	for i, ok := range []bool{false, false, true, true} {
		slot, run := int64(i+1), fmt.Sprintf("r%d", i+1)
		got := make(chan string, len(clients))
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				ev, err := c.RecordOutcome(context.Background(), "race", slot, run, ok)
				if err != nil {
					t.Errorf("RecordOutcome: %v", err)
				}
				got <- ev
			})
		}
		wg.Wait()
		close(got)
		var evs []string
		for ev := range got {
			if ev != "" {
				evs = append(evs, ev)
			}
		}
		want := map[int]string{0: ledger.TransitionFailing, 2: ledger.TransitionRecovered}[i]
		if (want == "" && len(evs) != 0) || (want != "" && (len(evs) != 1 || evs[0] != want)) {
			t.Errorf("slot %d: got transitions %q, want %q once", slot, evs, want)
		}
	}
}
