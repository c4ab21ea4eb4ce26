package redislock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cronlock/cronlock/internal/redistest"
)

// outcomeRecorder is RecordOutcome, which both backends have.
type outcomeRecorder interface {
	RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error)
}

var (
	_ outcomeRecorder = (*Redis)(nil)
	_ outcomeRecorder = (*Memory)(nil)
)

// notifySteps is one job's sequence of finished occurrences and the
// transition each must return: the same on Redis and in memory.
var notifySteps = []struct {
	name string
	slot int64
	run  string
	ok   bool
	want string
}{
	{"first outcome a failure: failing", 10, "r10", false, TransitionFailing},
	{"retried call: nothing", 10, "r10", false, ""},
	{"failure after failure: nothing", 20, "r20", false, ""},
	{"older success, reordered: ignored", 15, "r15", true, ""},
	{"same slot, other run: ignored", 20, "r20b", true, ""},
	{"success after failure: recovered", 30, "r30", true, TransitionRecovered},
	{"retried success: nothing", 30, "r30", true, ""},
	{"success after success: nothing", 40, "r40", true, ""},
	{"failure after success: failing", 50, "r50", false, TransitionFailing},
	{"older failure after it: ignored", 45, "r45", false, ""},
}

func testNotifyTransitions(t *testing.T, b outcomeRecorder) {
	ctx := ctxT(t)
	for _, s := range notifySteps {
		got, err := b.RecordOutcome(ctx, "j", s.slot, s.run, s.ok)
		if err != nil || got != s.want {
			t.Errorf("%s: got %q, %v, want %q", s.name, got, err, s.want)
		}
	}
	// Another job has its own record: a first success is no transition.
	if got, err := b.RecordOutcome(ctx, "k", 10, "k10", true); err != nil || got != "" {
		t.Errorf("first outcome a success: got %q, %v, want no transition", got, err)
	}
	if _, err := b.RecordOutcome(ctx, "k", 0, "manual", true); err == nil {
		t.Errorf("slot 0: got no error, want one")
	}
}

func TestNotify_TransitionsRedis(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	testNotifyTransitions(t, r)
	ttl, err := r.c.Do(ctxT(t), r.c.B().Pttl().Key(r.key("notify", "j")).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > NotifyStateTTL.Milliseconds() {
		t.Errorf("PTTL notify:j: got %d, %v, want (0, %d]", ttl, err, NotifyStateTTL.Milliseconds())
	}
}

func TestNotify_TransitionsMemory(t *testing.T) {
	testNotifyTransitions(t, NewMemory())
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
				ev, err := c.RecordOutcome(ctxT(t), "race", slot, run, ok)
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
		want := map[int]string{0: TransitionFailing, 2: TransitionRecovered}[i]
		if (want == "" && len(evs) != 0) || (want != "" && (len(evs) != 1 || evs[0] != want)) {
			t.Errorf("slot %d: got transitions %q, want %q once", slot, evs, want)
		}
	}
}
