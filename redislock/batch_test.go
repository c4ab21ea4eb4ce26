package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// TestClaimBatchScript_SameAsClaimScript runs random claims twice, on two
// jobs with the same state: once with claimScript, once inside one
// claimBatchScript call with all the others. Replies and the state left
// behind must be the same.
func TestClaimBatchScript_SameAsClaimScript(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	c := raw(t, srv.Addr())
	ctx := ctxT(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 300
	var bkeys, bargs []string
	single := make([]actors.Claim, n)
	for i := range n {
		// The same random state for job a<i> and b<i>.
		slot := int64(1000 + rng.IntN(5))
		state := []string{}
		if rng.IntN(4) > 0 {
			state = append(state, "slot", strconv.Itoa(998+rng.IntN(5)), "fence", strconv.Itoa(rng.IntN(9)))
		}
		if rng.IntN(3) == 0 {
			state = append(state, "runs", strconv.Itoa(rng.IntN(4)))
		}
		paused, held, pending, backfilled := rng.IntN(5) == 0, rng.IntN(3) == 0, rng.IntN(4) == 0, rng.IntN(4) == 0
		for _, job := range []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)} {
			if len(state) > 0 {
				must(t, c.Do(ctx, c.B().Hset().Key(r.key("state", job)).FieldValue().FieldValueIter(kvPairs(state)).Build()).Error())
			}
			if paused {
				must(t, c.Do(ctx, c.B().Set().Key(r.key("paused", job)).Value("x").Build()).Error())
			}
			if held {
				must(t, c.Do(ctx, c.B().Set().Key(r.key("job", job)).Value("other:run").Build()).Error())
			}
			if pending {
				must(t, c.Do(ctx, c.B().Set().Key(r.key("pending", job)).Value("999").Build()).Error())
			}
			if backfilled {
				must(t, c.Do(ctx, c.B().Zadd().Key(r.key("backfill", job)).ScoreMember().ScoreMember(float64(slot), strconv.FormatInt(slot, 10)).Build()).Error())
			}
		}
		req := actors.ClaimRequest{Slot: slot, Owner: "n1:r" + strconv.Itoa(i), TTL: time.Minute,
			Lease: rng.IntN(4) > 0, IgnorePause: rng.IntN(5) == 0, MinSlot: int64(rng.IntN(2) * (999 + rng.IntN(3))),
			MinFence: int64(rng.IntN(2) * rng.IntN(12)), MaxRuns: int64(rng.IntN(2) * rng.IntN(4))}
		switch rng.IntN(5) {
		case 0:
			req.NeedRecord = true
		case 1:
			req.Queue = req.Lease
		case 2:
			req.Backfill = true
		case 3:
			req.Early = true
		}
		req.Job = fmt.Sprintf("a%d", i)
		if req.Validate() != nil {
			req.Queue, req.Backfill, req.NeedRecord, req.Early = false, false, false, false
		}
		keys, args := r.claimKeysArgs(req)
		vals, err := claimScript.Exec(ctx, r.c, keys, args).ToArray()
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if single[i], err = decodeClaim(vals); err != nil {
			t.Fatal(err)
		}
		req.Job = fmt.Sprintf("b%d", i)
		keys, args = r.claimKeysArgs(req)
		bkeys, bargs = append(bkeys, keys...), append(bargs, args...)
	}
	replies, err := claimBatchScript.Exec(ctx, r.c, bkeys, bargs).ToArray()
	if err != nil || len(replies) != n {
		t.Fatalf("batch: %d replies, %v", len(replies), err)
	}
	outcomes := map[actors.Outcome]int{}
	for i := range n {
		got, err := decodeBatchReply(replies[i])
		if err != nil {
			t.Fatalf("batch reply %d: %v", i, err)
		}
		outcomes[got.Outcome]++
		if got != single[i] {
			t.Errorf("claim %d: batch %+v, alone %+v", i, got, single[i])
		}
		for _, kind := range []string{"job", "state", "paused", "pending", "backfill"} {
			a, b := dump(t, c, r.key(kind, fmt.Sprintf("a%d", i))), dump(t, c, r.key(kind, fmt.Sprintf("b%d", i)))
			if a != b {
				t.Errorf("claim %d: key %s: batch left %q, alone %q", i, kind, b, a)
			}
		}
	}
	// The random requests reach every outcome but NotReplicated (a backend
	// with min_replicas_acked only).
	for o := actors.Claimed; o <= actors.NotYet; o++ {
		if outcomes[o] == 0 && o != actors.NotReplicated {
			t.Errorf("no claim had outcome %v: the random requests miss a branch (%v)", o, outcomes)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func kvPairs(kv []string) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield(kv[i], kv[i+1]) {
				return
			}
		}
	}
}

// dump is a key's value in a comparable form ("" when absent).
func dump(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	typ, err := c.Do(ctxT(t), c.B().Type().Key(key).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "none":
		return ""
	case "string":
		v, err = c.Do(ctxT(t), c.B().Get().Key(key).Build()).ToString()
	case "hash":
		v, err = c.Do(ctxT(t), c.B().Hgetall().Key(key).Build()).AsStrMap()
	case "zset":
		v, err = c.Do(ctxT(t), c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v", typ, v)
}

// TestClaim_ConcurrentClaimsAreBatched sends 200 claims of distinct jobs
// at once: each is answered as if sent alone (Claimed, fence 1; then
// AlreadyRun for the same slot), the server sees far fewer script calls
// than claims, and a job whose state key has the wrong type fails alone.
func TestClaim_ConcurrentClaimsAreBatched(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	c := raw(t, srv.Addr())
	ctx := ctxT(t)
	const n = 200
	must(t, c.Do(ctx, c.B().Set().Key(r.key("state", "j7")).Value("not a hash").Build()).Error())
	before := cmdstats(t, c)["evalsha"]["calls"]
	claimAll := func() ([]actors.Claim, []error) {
		out, errs := make([]actors.Claim, n), make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				out[i], errs[i] = r.Claim(ctx, actors.ClaimRequest{Job: fmt.Sprintf("j%d", i), Slot: 1000,
					Owner: "n1:r" + strconv.Itoa(i), TTL: time.Minute, Lease: true})
			})
		}
		close(start)
		wg.Wait()
		return out, errs
	}
	first, errs := claimAll()
	for i := range n {
		switch {
		case i == 7:
			if errs[i] == nil {
				t.Errorf("j7 (state not a hash): %+v, %v; want an error", first[i], errs[i])
			}
		case errs[i] != nil || first[i].Outcome != actors.Claimed || first[i].Fence != 1:
			t.Errorf("j%d: %+v, %v; want claimed with fence 1", i, first[i], errs[i])
		}
	}
	calls := cmdstats(t, c)["evalsha"]["calls"] - before
	t.Logf("%d claims in %d script calls", n, calls)
	if calls > n/4 {
		t.Errorf("%d claims sent at once took %d script calls; want them batched (at most %d)", n, calls, n/4)
	}
	again, errs := claimAll()
	for i := range n {
		if i != 7 && (errs[i] != nil || again[i].Outcome != actors.ClaimedElsewhere) {
			t.Errorf("j%d again: %+v, %v; want claimed elsewhere (the slot is recorded)", i, again[i], errs[i])
		}
	}
}

// TestClaim_QueuedClaimFailsWithTheStuckCalls: a claim queued behind the
// calls in flight to a frozen server does not wait for them: it is sent
// after maxClaimWait and fails at its own deadline, as they do (it must
// not go out later, on a connection that came back, and run its slot
// late); the client works again once the server is back.
func TestClaim_QueuedClaimFailsWithTheStuckCalls(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	// The script is loaded (SCRIPT LOAD, once per process, under a lock
	// that does not watch the caller's deadline; the daemon loads it
	// after its first probe) before the server freezes.
	warmClaim(t, r)
	srv.Pause()
	var wg sync.WaitGroup
	for i := range maxClaimCalls { // the calls in flight, to the frozen server
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			r.Claim(ctx, actors.ClaimRequest{Job: fmt.Sprintf("f%d", i), Slot: 1000, Owner: "n1:f", TTL: time.Minute, Lease: true})
		})
	}
	time.Sleep(100 * time.Millisecond) // they are in flight
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := r.Claim(ctx, actors.ClaimRequest{Job: "q", Slot: 1000, Owner: "n1:q", TTL: time.Minute, Lease: true})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second {
		t.Errorf("queued claim: %v after %v; want its deadline's error at 300ms", err, time.Since(t0))
	}
	if q := len(r.claims.queue); q != 0 {
		t.Errorf("%d claims still queued after the deadline, want 0 (sent after %v)", q, maxClaimWait)
	}
	srv.Resume()
	wg.Wait()
	// It was sent (behind the others, to the frozen server), so the
	// server, once back, applied it: an error is an unknown outcome.
	if got := srv.Do("HGET", r.key("state", "q"), "slot"); got != "1000" {
		t.Errorf("state of q after resume: slot %q, want 1000 (the claim was sent before its deadline)", got)
	}
	c, err := r.Claim(ctxT(t), actors.ClaimRequest{Job: "q2", Slot: 1000, Owner: "n1:q2", TTL: time.Minute, Lease: true})
	if err != nil || c.Outcome != actors.Claimed {
		t.Errorf("after resume: %+v, %v; want claimed", c, err)
	}
}

// warmClaim claims once, so that the batch script is loaded (SCRIPT LOAD,
// under a lock that does not watch the caller's deadline) before a test
// freezes the server.
func warmClaim(t *testing.T, r *Redis) {
	t.Helper()
	if _, err := r.Claim(ctxT(t), actors.ClaimRequest{Job: "warm", Slot: 1, Owner: "n1:w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
}

// timedResult is a claim's answer and how long Claim took.
type timedResult struct {
	c    actors.Claim
	err  error
	took time.Duration
}

// timedClaim claims slot 1000 of job with a lease, a 200 ms deadline and,
// when answerBy > 0, AnswerBy that long from now.
func timedClaim(r *Redis, job string, answerBy time.Duration) timedResult {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := actors.ClaimRequest{Job: job, Slot: 1000, Owner: "n1:" + job, TTL: time.Minute, Lease: true}
	if answerBy > 0 {
		req.AnswerBy = time.Now().Add(answerBy)
	}
	t0 := time.Now()
	c, err := r.Claim(ctx, req)
	return timedResult{c, err, time.Since(t0)}
}

// A claim sent before its deadline whose answer comes after it (the server
// was frozen for 600 ms) is the claim's outcome when it comes by AnswerBy:
// the claim was applied, and a caller that gave up would leave the slot
// claimed and run nowhere. Without AnswerBy the deadline's error, as
// before; with an AnswerBy that passes too, the error at AnswerBy. (Whether
// those two were applied depends on rueidis' connection after a timeout.)
func TestClaim_LateAnswerIsUsedUntilAnswerBy(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	warmClaim(t, r) // the script is loaded before the server freezes
	for _, tc := range []struct {
		job      string
		answerBy time.Duration
		won      bool
	}{{"late", 3 * time.Second, true}, {"nowait", 0, false}, {"toolate", 400 * time.Millisecond, false}} {
		srv.Pause()
		resumed := make(chan struct{})
		go func() {
			defer close(resumed)
			time.Sleep(600 * time.Millisecond)
			srv.Resume()
		}()
		got := timedClaim(r, tc.job, tc.answerBy)
		c, err, took := got.c, got.err, got.took
		<-resumed
		switch {
		case tc.won && (err != nil || c.Outcome != actors.Claimed):
			t.Errorf("%s: %+v, %v after %v; want claimed (answered at about 600ms, before AnswerBy)", tc.job, c, err, took)
		case !tc.won && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: %+v, %v after %v; want a deadline error", tc.job, c, err, took)
		case !tc.won && tc.answerBy == 0 && took > 500*time.Millisecond:
			t.Errorf("%s: gave up after %v, want at its 200ms deadline", tc.job, took)
		}
		if tc.won {
			if got := srv.Do("HGET", r.key("state", tc.job), "slot"); got != "1000" {
				t.Errorf("%s: state slot %q, want 1000", tc.job, got)
			}
		}
	}
}

// BenchmarkClaimServerTime reports the server's time per claim (INFO
// commandstats usec of EVALSHA over the claims) for claims sent one per
// call and in batches of 100 (claimBatchScript).
func BenchmarkClaimServerTime(b *testing.B) {
	srv := redistest.Start(b)
	r := newRedis(b, srv.Addr(), Options{})
	c := raw(b, srv.Addr())
	ctx := ctxT(b)
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			usec := func() int64 { return cmdstats(b, c)["evalsha"]["usec"] }
			before, claims := usec(), 0
			slot := int64(0)
			for b.Loop() {
				slot++
				var keys, args []string
				for j := range size {
					k, a := r.claimKeysArgs(actors.ClaimRequest{Job: fmt.Sprintf("bench%d", j), Slot: slot, Owner: "n1:r",
						TTL: time.Minute})
					keys, args = append(keys, k...), append(args, a...)
				}
				var err error
				if size == 1 {
					err = claimScript.Exec(ctx, r.c, keys, args).Error()
				} else {
					err = claimBatchScript.Exec(ctx, r.c, keys, args).Error()
				}
				if err != nil {
					b.Fatal(err)
				}
				claims += size
			}
			b.ReportMetric(float64(usec()-before)/float64(claims), "server-µs/claim")
		})
	}
}

// The sender of a batch never waits past its own limit, while the others
// of its batch still get their late answers: x (200 ms deadline, no
// AnswerBy) sends itself and y (AnswerBy 3 s) while the server is frozen
// for 900 ms behind two calls in flight; x gives up at its deadline, y is
// answered claimed once the server is back.
func TestClaim_SenderWaitsNoLongerThanItsOwnLimit(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	warmClaim(t, r)
	claim := func(job string, answerBy time.Duration, out chan<- timedResult) { out <- timedClaim(r, job, answerBy) }
	srv.Pause()
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(900 * time.Millisecond)
		srv.Resume()
	}()
	stuck := make(chan timedResult, maxClaimCalls)
	for i := range maxClaimCalls {
		go claim(fmt.Sprintf("p%d", i), 3*time.Second, stuck)
	}
	time.Sleep(20 * time.Millisecond) // in flight: x and y queue
	xr, yr := make(chan timedResult, 1), make(chan timedResult, 1)
	go claim("x", 0, xr)
	time.Sleep(5 * time.Millisecond) // x first: after maxClaimWait it sends itself and y
	go claim("y", 3*time.Second, yr)
	x, y := <-xr, <-yr
	<-resumed
	if x.err == nil || x.took > 500*time.Millisecond {
		t.Errorf("x: %+v, %v after %v; want its deadline's error at about 200ms", x.c, x.err, x.took)
	}
	if y.err != nil || y.c.Outcome != actors.Claimed || y.took < 800*time.Millisecond {
		t.Errorf("y: %+v, %v after %v; want claimed once the server is back (about 900ms)", y.c, y.err, y.took)
	}
	for range maxClaimCalls {
		if p := <-stuck; p.err != nil || p.c.Outcome != actors.Claimed {
			t.Errorf("a call in flight: %+v, %v; want claimed (late answer, AnswerBy 3s)", p.c, p.err)
		}
	}
}

// A sender left out of its own batch (its deadline passed before the
// send) while another member waits longer: the call goes on for the
// other, and the sender gets its deadline's error at once.
func TestSendClaims_SenderLeftOutOfItsBatch(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	keysArgs := func(job string) ([]string, []string) {
		return r.claimKeysArgs(actors.ClaimRequest{Job: job, Slot: 1000, Owner: "n1:" + job, TTL: time.Minute, Lease: true})
	}
	past := time.Now().Add(-time.Millisecond)
	self := &claimCall{deadline: past, answerBy: past}
	self.keys, self.args = keysArgs("self")
	other := &claimCall{deadline: time.Now().Add(time.Second), answerBy: time.Now().Add(3 * time.Second), ready: make(chan struct{})}
	other.keys, other.args = keysArgs("other")
	r.claims.mu.Lock()
	r.claims.inflight++ // the sender's place, as claim takes it
	r.claims.mu.Unlock()
	c, err := r.send(context.Background(), []*claimCall{self, other}, self)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sender: %+v, %v; want its deadline's error", c, err)
	}
	<-other.ready
	if other.err != nil || other.c.Outcome != actors.Claimed {
		t.Errorf("other member: %+v, %v; want claimed", other.c, other.err)
	}
}

// TestClaim_EarlyClaimsOfAnInstantGoOutTogether: 50 early claims of
// distinct jobs that come 40 µs apart (a node's claims of one rank,
// nodeload's spacing) wait earlyLinger for each other and go out in one or
// two script calls (at most 5 under -race on a busy machine), each
// answered as if sent alone. The same claims sent at their fire time (not
// early) go out as they come, alone while fewer than maxClaimCalls are in
// flight: 3–14 calls in the runs of this test that added the linger.
func TestClaim_EarlyClaimsOfAnInstantGoOutTogether(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	c := raw(t, srv.Addr())
	warmClaim(t, r)
	ctx := ctxT(t)
	const n = 50
	claimAll := func(early bool, prefix string) (calls int64) {
		slot := time.Now().Unix() + 3 // early claims linger only with room before their slot
		before := cmdstats(t, c)["evalsha"]["calls"]
		var wg sync.WaitGroup
		errs := make([]error, n)
		out := make([]actors.Claim, n)
		for i := range n {
			wg.Go(func() {
				out[i], errs[i] = r.Claim(ctx, actors.ClaimRequest{Job: prefix + strconv.Itoa(i), Slot: slot,
					Owner: "n1:" + prefix + strconv.Itoa(i), TTL: time.Minute, Lease: true, Early: early})
			})
			for t0 := time.Now(); time.Since(t0) < 40*time.Microsecond; { // time.Sleep would take a millisecond
			}
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || out[i].Outcome != actors.Claimed || out[i].Fence != 1 {
				t.Errorf("%s%d (early %v): %+v, %v; want claimed with fence 1", prefix, i, early, out[i], errs[i])
			}
		}
		return cmdstats(t, c)["evalsha"]["calls"] - before
	}
	early := claimAll(true, "e")
	atFire := claimAll(false, "f")
	t.Logf("%d claims 40 µs apart: %d script calls early, %d at their fire time", n, early, atFire)
	if early > 5 {
		t.Errorf("%d early claims 40 µs apart took %d script calls; want at most 5 (they wait %v for each other; at their fire time: %d)", n, early, earlyLinger, atFire)
	}
}
