package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/redis/rueidis"
)

// Claim batching (docs/protocol.md, "Claim batches"). At a herd thousands
// of jobs are due at one instant, and most of a claim's cost is the call
// around the script (reading, parsing and answering one command, the
// client's command and reply objects), not the step itself. So concurrent claims
// of one client go out as one claimBatchScript call: a claim is sent at
// once, alone, while fewer than maxClaimCalls claim calls are in flight
// (the usual case: one job due, no wait); otherwise it waits in a queue,
// and when a call returns, its sender sends the queue's claims, up to
// maxClaimBatch per call and maxDrain calls, then hands the rest to the
// first claim still queued, which does the same (handOn). No goroutine is
// started: each batch is sent by one of the callers. Batching is off where one
// script may not touch several jobs' keys (Cluster mode with the job name
// as hash tag, keys.go) and with redis.min_replicas_acked (each won claim
// waits for its replicas on its own connection, replicas.go).
const (
	maxClaimCalls  = 2
	maxClaimBatch  = 512
	fullClaimBatch = 128
	// maxClaimWait bounds a claim's wait in the queue: then it sends
	// itself and what else waits, whatever is in flight.
	maxClaimWait = 50 * time.Millisecond
	// earlyLinger is how long an early claim (ClaimRequest.Early, sent in
	// the claim lead before its fire time) waits in the queue for the
	// other claims of its instant and rank before it sends them and
	// itself, instead of going out alone at once; earlyLingerRoom is how
	// much time before its slot it must have left for that. A node's
	// claims of one rank come 40 µs apart (nodeload's burst spacing), so
	// 50 of them, the usual 3 × 50/s instant, fit in 2 ms.
	earlyLinger     = 2 * time.Millisecond
	earlyLingerRoom = 5 * time.Millisecond
)

// claimQueue is the batching state of one client.
type claimQueue struct {
	mu       sync.Mutex
	inflight int          // claim calls in flight (or being handed on)
	queue    []*claimCall // waiting, first come first
}

// claimCall is one Claim waiting for its answer.
type claimCall struct {
	keys, args []string
	deadline   time.Time     // of the caller's ctx; zero = none
	answerBy   time.Time     // once sent, the answer is waited for until then (ClaimRequest.AnswerBy, at least deadline)
	ready      chan struct{} // closed when c/err are set, or batch is this call's to send
	batch      []*claimCall  // set with ready: this call sends them (itself first)
	c          actors.Claim
	err        error
}

// claim sends one claim (keys and args as claimScript takes them) through
// the batching queue and returns its answer. With linger > 0 (an early
// claim, Redis.Claim) and no claim call in flight to wait for, the claim
// waits linger in the queue before it sends what is queued, so that the
// claims of one instant that come together go out in one call. It blocks until Redis
// answered or the deadline passed: ctx's while the claim waits in the
// queue; once it is sent, answerBy when that is later (ClaimRequest.AnswerBy:
// an answer that comes late is still the claim's outcome), else ctx's
// (CallTimeout when ctx has none). An error means the outcome is unknown,
// as for Claim.
func (r *Redis) claim(ctx context.Context, keys, args []string, answerBy time.Time, linger time.Duration) (actors.Claim, error) {
	call := &claimCall{keys: keys, args: args}
	if dl, ok := ctx.Deadline(); ok {
		call.deadline, call.answerBy = dl, dl
		if answerBy.After(dl) {
			call.answerBy = answerBy
		}
	}
	q := &r.claims
	q.mu.Lock()
	wait := maxClaimWait
	switch {
	case q.inflight < maxClaimCalls && linger > 0:
		wait = linger // sent by the first lingering claim's timer, below
	case q.inflight < maxClaimCalls:
		q.inflight++
		q.mu.Unlock()
		return r.send(ctx, []*claimCall{call}, call)
	}
	call.ready = make(chan struct{})
	q.queue = append(q.queue, call)
	if len(q.queue) >= fullClaimBatch {
		// A full batch goes at once, sent by the claim that filled it:
		// the senders in flight may wait for the scheduler (below).
		q.inflight++
		batch := q.takeLocked(maxClaimBatch)
		q.mu.Unlock()
		return r.send(ctx, batch, call)
	}
	q.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-call.ready:
	case <-timer.C:
		// Not sent yet: its linger is over, or the calls in flight may
		// be stuck (a Redis that stopped answering). Send it now, with
		// what else waits, rather than later on a connection that came
		// back: a claim is sent within maxClaimWait of its call or not
		// at all.
		q.mu.Lock()
		if q.removeLocked(call) {
			batch := append([]*claimCall{call}, q.takeLocked(maxClaimBatch-1)...)
			q.inflight++
			q.mu.Unlock()
			return r.send(ctx, batch, call)
		}
		q.mu.Unlock()
		if err := awaitBatch(ctx, call); err != nil { // taken into a batch meanwhile
			return actors.Claim{}, err
		}
	case <-ctx.Done():
		q.mu.Lock()
		if q.removeLocked(call) {
			q.mu.Unlock()
			return actors.Claim{}, fmt.Errorf("waiting to send the claim: %w", ctx.Err())
		}
		q.mu.Unlock()
		// Taken into a batch already: the answer may come at once.
		if err := awaitBatch(ctx, call); err != nil {
			return actors.Claim{}, err
		}
	}
	if call.batch != nil {
		batch := call.batch
		call.batch = nil
		return r.send(ctx, batch, call)
	}
	return call.c, call.err
}

// send sends batch (self's place among the claim calls in flight taken),
// hands the place on and returns self's answer.
func (r *Redis) send(ctx context.Context, batch []*claimCall, self *claimCall) (actors.Claim, error) {
	r.sendClaims(ctx, batch, self)
	r.handOn(ctx)
	return self.c, self.err
}

// awaitBatch waits for the answer of call, taken into a batch (ready),
// or until its answerBy (its deadline, or later with
// ClaimRequest.AnswerBy): then the outcome is unknown (it was or will be
// sent), and the caller's error says so. Its sender sets the answer
// either way; no one reads it after an error.
func awaitBatch(ctx context.Context, call *claimCall) error {
	var expired <-chan time.Time
	if !call.answerBy.IsZero() {
		t := time.NewTimer(time.Until(call.answerBy))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-call.ready:
		return nil
	case <-expired:
	case <-ctx.Done():
		// Its deadline (when answerBy is later, the answer is still
		// awaited until then) or a cancellation (then it ends here).
		if !call.answerBy.IsZero() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			select {
			case <-call.ready:
				return nil
			case <-expired:
			}
		}
	}
	select {
	case <-call.ready: // both: the answer wins
		return nil
	default:
	}
	cause := context.DeadlineExceeded
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		cause = err
	}
	return fmt.Errorf("claim sent in a batch, no answer before the deadline: %w", cause)
}

// maxDrain is how many more batches a sender sends from the queue after
// its own call before it hands the queue on (handOn), and maxDrainTime
// how long it may go on doing so after its own answer.
const (
	maxDrain     = 8
	maxDrainTime = 20 * time.Millisecond
)

// handOn ends a claim call. While claims wait, the sender sends them
// itself, up to maxDrain batches of at most maxClaimBatch (at a herd its
// own run waits for the node's claims anyway, actors.ClaimGate, and a
// hand-off to a parked goroutine would wait for the scheduler among
// thousands of runnable ones); then the queue's first claims become a
// batch that the first of them sends. When no claim waits, the call's
// place is freed.
func (r *Redis) handOn(ctx context.Context) {
	q := &r.claims
	// The sender's own caller waits meanwhile: a won claim's run must
	// start (its lease renewals begin when Claim returns), so the drain is
	// bounded by maxDrainTime as well as maxDrain batches, and a caller
	// whose deadline passed hands the queue on at once.
	until := time.Now().Add(maxDrainTime)
	if ctx.Err() != nil {
		until = time.Time{}
	}
	for drained := 0; ; drained++ {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.inflight--
			q.mu.Unlock()
			return
		}
		batch := q.takeLocked(maxClaimBatch)
		if drained == maxDrain || !time.Now().Before(until) {
			lead := batch[0]
			lead.batch = batch
			close(lead.ready)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		r.sendClaims(ctx, batch, nil)
	}
}

// takeLocked removes the queue's first claims (at most max) and returns
// them. q.mu must be held.
func (q *claimQueue) takeLocked(max int) []*claimCall {
	n := min(len(q.queue), max)
	batch := make([]*claimCall, n)
	copy(batch, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	return batch
}

// sendClaims sends calls in one claimBatchScript call (also a lone
// claim: one script, loaded once by warmScripts), sets every call's answer
// and wakes every caller but self (the sender's own call, or nil). The
// call waits for Redis until the latest of the callers' answerBy (each
// caller waits no longer than its own, awaitBatch); ctx (the sender's)
// gives only its values.
//
// The sender itself never waits past its own limit: self's answerBy, or
// for a drain (self nil) the deadline of ctx (the drainer's claim is
// answered; its run waits meanwhile). When the call may take longer than
// that, it goes on in a goroutine of its own (holding a place among the
// claim calls in flight, handed on when it returns) that answers the
// others, and the sender gets its answer through a stand-in if it comes
// by its limit, else "no answer before the deadline".
func (r *Redis) sendClaims(ctx context.Context, calls []*claimCall, self *claimCall) {
	// A member whose deadline has passed is answered here and left out
	// (nothing of it is sent).
	now := time.Now()
	var dl time.Time
	live := make([]*claimCall, 0, len(calls))
	for _, c := range calls {
		switch {
		case !c.deadline.IsZero() && !now.Before(c.deadline):
			c.err = fmt.Errorf("waiting to send the claim: %w", context.DeadlineExceeded)
			if c != self {
				close(c.ready)
			}
			continue
		case c.answerBy.IsZero():
			dl = now.Add(max(r.callTimeout, time.Until(dl)))
		case c.answerBy.After(dl):
			dl = c.answerBy
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	limit := dl
	switch {
	case self != nil && !self.answerBy.IsZero():
		limit = self.answerBy
	case self == nil:
		if d, ok := ctx.Deadline(); ok {
			limit = d
		}
	}
	if !dl.After(limit) {
		r.execClaims(ctx, live, dl)
		for _, c := range live {
			if c != self {
				close(c.ready)
			}
		}
		return
	}
	// self, when it is in the call (not left out above), is answered
	// through a stand-in that the goroutine owns.
	var stand *claimCall
	if i := slices.Index(live, self); i >= 0 {
		stand = &claimCall{keys: self.keys, args: self.args, ready: make(chan struct{})}
		live[i] = stand
	}
	q := &r.claims
	q.mu.Lock()
	q.inflight++
	q.mu.Unlock()
	detached := context.WithoutCancel(ctx)
	go func() {
		r.execClaims(detached, live, dl)
		for _, c := range live {
			close(c.ready)
		}
		r.handOn(detached)
	}()
	if stand == nil {
		return
	}
	t := time.NewTimer(time.Until(limit))
	defer t.Stop()
	select {
	case <-stand.ready:
		self.c, self.err = stand.c, stand.err
	case <-t.C:
		self.err = fmt.Errorf("claim sent in a batch, no answer before the deadline: %w", context.DeadlineExceeded)
	}
}

// execClaims runs one claimBatchScript call for calls (until dl) and sets
// every call's answer or error.
func (r *Redis) execClaims(ctx context.Context, calls []*claimCall, dl time.Time) {
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl)
	defer cancel()
	keys, args := calls[0].keys, calls[0].args
	if len(calls) > 1 {
		keys = make([]string, 0, len(calls)*len(keys))
		args = make([]string, 0, len(calls)*len(args))
		for _, c := range calls {
			keys = append(keys, c.keys...)
			args = append(args, c.args...)
		}
	}
	replies, err := claimBatchScript.Exec(cctx, r.c, keys, args).ToArray()
	if err == nil && len(replies) != len(calls) {
		err = fmt.Errorf("batch script returned %d replies for %d claims", len(replies), len(calls))
	}
	if err != nil {
		for _, c := range calls {
			c.err = err
		}
		return
	}
	for i, c := range calls {
		c.c, c.err = decodeBatchReply(replies[i])
	}
}

// decodeBatchReply reads one element of claimBatchScript's reply: a
// claimScript reply, or that claim's error.
func decodeBatchReply(m rueidis.RedisMessage) (actors.Claim, error) {
	if err := m.Error(); err != nil {
		return actors.Claim{}, err
	}
	vals, err := m.ToArray()
	if err != nil {
		return actors.Claim{}, errors.Join(errors.New("batch script reply"), err)
	}
	return decodeClaim(vals)
}

// warmScripts loads claimBatchScript (SCRIPT LOAD, rueidis.WithLoadSHA1)
// with a call that claims nothing, once per process, after the first
// probe that reached Redis: so that the first claims, a herd's thousands,
// do not wait for the load. A failure is left to the first claim (which
// loads it then, or reports why it cannot).
func (r *Redis) warmScripts(ctx context.Context) {
	if !r.batch || scriptsWarm.Load() {
		return
	}
	if claimBatchScript.Exec(ctx, r.c, nil, nil).Error() == nil {
		scriptsWarm.Store(true)
	}
}

// scriptsWarm: warmScripts loaded claimBatchScript (its SHA1 is kept by
// the package's *rueidis.Lua, for every client).
var scriptsWarm atomic.Bool

// removeLocked removes c from the queue and reports whether it was there
// (not yet taken into a batch). q.mu must be held.
func (q *claimQueue) removeLocked(c *claimCall) bool {
	i := slices.Index(q.queue, c)
	if i < 0 {
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	return true
}
