package actors_test

import (
	"context"
	"github.com/cronlock/cronlock/ledger/memory"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/promtest"
	"go.uber.org/zap"
)

// unreplicatedLocker answers from the memory backend, but a won claim
// comes back NotReplicated (no replica acknowledged it), as the Redis
// backend's does with redis.min_replicas_acked.
type unreplicatedLocker struct{ *memory.Memory }

func (l unreplicatedLocker) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	c, err := l.Memory.Claim(ctx, req)
	if err == nil && c.Outcome == ledger.Claimed {
		c.Outcome = ledger.NotReplicated
	}
	return c, err
}

// A won claim that the replicas did not acknowledge is not run: the slot is
// skipped not_replicated (a warning with the acknowledgement count, then
// summarised like other per-slot warnings; every slot counted), and the
// lease is released at once, so the next slot is not an overlap.
func TestJob_NotReplicatedClaimIsNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		h := startJobOn(t, "j", "exit 0", unreplicatedLocker{mem})
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))
		for i := range 2 {
			h.job.Inbox() <- Fire{Job: "j", Slot: s.Add(time.Duration(i) * time.Second)}
			synctest.Wait()
			time.Sleep(time.Second)
		}
		if got := promtest.Value(t, h.metrics, "cronlock_skips_total", "job", "j", "reason", ledger.SkipNotReplicated); got != 2 {
			t.Errorf("not_replicated skips: got %v, want 2 (the lease of the first was released: no overlap)", got)
		}
		if n := h.logs.FilterMessageSnippet("claim not replicated; not run").FilterField(zap.Int("replicas_acked", 0)).Len(); n != 1 {
			t.Errorf("'claim not replicated' warnings with replicas_acked 0: got %d, want 1 (the second is summarised)", n)
		}
		st, err := mem.State(t.Context(), "j")
		if err != nil || st.LeaseHolder != "" || st.Fence <= 0 {
			t.Errorf("state: got %+v, %v; want no lease held and the tokens minted", st, err)
		}
		for i := range 2 {
			if o := occurrence(t, mem, "j", s.Add(time.Duration(i)*time.Second)); o.Status != "skipped" || o.Reason != ledger.SkipNotReplicated {
				t.Errorf("slot %d's record: %+v, want skipped not_replicated (the won claim did not run)", s.Unix()+int64(i), o)
			}
		}
		select {
		case fin := <-h.results:
			t.Errorf("a not-replicated slot ran: %+v", fin)
		case p := <-h.phantoms:
			t.Errorf("phantom sent although the release succeeded: %+v", p)
		default:
		}
		h.stop(t)
	})
}

// unreplicatedHandOver answers from the memory backend, but a finish that
// hands the lease to the pending slot comes back NotReplicated, as the
// Redis backend's does with redis.min_replicas_acked.
type unreplicatedHandOver struct{ *memory.Memory }

func (l unreplicatedHandOver) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	f, err := l.Memory.Finish(ctx, req)
	if err == nil && f.Token > 0 {
		f.NotReplicated = true
	}
	return f, err
}

// overlap: queue with a hand-over the replicas did not acknowledge: the
// queued slot is not run (skipped not_replicated, a warning naming it) and
// the lease handed to it is released at once.
func TestJob_NotReplicatedHandOverIsNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.NewMemory()
		cfg := testJob(t, "q", "sleep 1500ms")
		cfg.Overlap = config.OverlapQueue
		h := startJobCfgOn(t, cfg, unreplicatedHandOver{mem})
		s := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(s))
		h.job.Inbox() <- Fire{Job: "q", Slot: s}
		time.Sleep(time.Second)
		h.job.Inbox() <- Fire{Job: "q", Slot: s.Add(time.Second)} // queued
		first := <-h.results
		time.Sleep(time.Second)
		synctest.Wait()
		if first.Slot != s {
			t.Errorf("first run: slot %v, want %v", first.Slot, s)
		}
		if got := promtest.Value(t, h.metrics, "cronlock_skips_total", "job", "q", "reason", ledger.SkipNotReplicated); got != 1 {
			t.Errorf("not_replicated skips: got %v, want 1 (the queued slot)", got)
		}
		if n := h.logs.FilterMessageSnippet("pending slot handed the lease but not run").Len(); n != 1 {
			t.Errorf("hand-over warnings: got %d, want 1", n)
		}
		st, err := mem.State(t.Context(), "q")
		if err != nil || st.LeaseHolder != "" {
			t.Errorf("state: got %+v, %v; want no lease held", st, err)
		}
		select {
		case fin := <-h.results:
			t.Errorf("the not-replicated queued slot ran: %+v", fin.RunInfo)
		default:
		}
		h.stop(t)
	})
}
