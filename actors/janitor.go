package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"go.uber.org/zap"
)

// Phantom is a lease this node may hold without knowing it: a claim or a
// release whose request failed may still have been applied by Redis
// (docs/protocol.md, "Phantom leases and the janitor"). Until is when the lease would expire by itself.
type Phantom struct {
	Job, Owner string
	Until      time.Time
	// HandedOn: the lease a failed finish may have handed to the job's
	// pending slot (overlap queue or replace). When it holds the lease the
	// janitor takes it back and, with an Unhander, puts the slot back as
	// pending (the job's next claim runs it); else that slot does not run
	// (logged as an error).
	HandedOn bool
}

// Janitor releases phantom leases once Redis answers again, so that a
// phantom never blocks a job for lock_ttl, and sends again the finishes
// of runs whose answer was lost, so that no run goes without its history
// record (and state.runs, max_runs' count). It retries every
// janitorRetry until the release succeeds or the lease would have
// expired, and a finish until it succeeds or unfinishedFor has passed.
type Janitor struct {
	log        *zap.Logger
	locker     ledger.Locker
	inbox      chan Phantom
	finishes   chan ledger.FinishRequest
	sweeps     chan chan struct{}
	pending    map[Phantom]struct{}
	unfinished []unfinished // oldest first
}

// unfinished is a finish the janitor sends again.
type unfinished struct {
	req   ledger.FinishRequest // Retry set, Next ""
	since time.Time
}

const (
	janitorRetry = 250 * time.Millisecond
	// unfinishedFor is how long a finish is sent again before its run's
	// record is given up (logged as an error with the record's facts).
	unfinishedFor = time.Hour
	// maxUnfinished bounds the finishes kept to be sent again (each holds
	// a run record with up to MaxOutputTail of output); a finish beyond it
	// is given up at once, logged.
	maxUnfinished = 4096
)

// NewJanitor returns a janitor with inboxes (phantoms, finishes) of size n.
func NewJanitor(log *zap.Logger, locker ledger.Locker, n int) *Janitor {
	return &Janitor{log: log, locker: locker, inbox: make(chan Phantom, n), finishes: make(chan ledger.FinishRequest, n),
		sweeps: make(chan chan struct{}), pending: map[Phantom]struct{}{}}
}

// Sweep asks the janitor to try every pending release now and blocks until
// it has (or ctx ends). The engine calls it when Redis answers again, before
// catch-up claims: claims queued while Redis hung may have been applied
// after their callers gave up, and their leases would make the catch-up
// claims fail with overlap.
func (j *Janitor) Sweep(ctx context.Context) {
	done := make(chan struct{})
	select {
	case j.sweeps <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Inbox is where runs send phantoms (non-blocking sends).
func (j *Janitor) Inbox() chan<- Phantom { return j.inbox }

// Finishes is where runs send the finish requests that failed (their
// answer was lost: Redis may or may not have applied them), with Next ""
// (a lease handed on is released as a phantom); non-blocking sends. The
// janitor sends each again with Retry set, which records the run once
// whether the first one was applied or not.
func (j *Janitor) Finishes() chan<- ledger.FinishRequest { return j.finishes }

// Run retries releases and finishes until ctx ends; then it makes one
// last attempt for each (bounded), logs the records it could not write
// and returns nil.
func (j *Janitor) Run(ctx context.Context) error {
	// The retry ticker runs only while something waits to be sent again:
	// an idle janitor wakes nothing (four wake-ups a second on every node
	// otherwise, each also waking the Go runtime's sysmon).
	t := time.NewTicker(janitorRetry)
	t.Stop()
	defer t.Stop()
	ticking := false
	for {
		if busy := len(j.pending) > 0 || len(j.unfinished) > 0; busy != ticking {
			if busy {
				t.Reset(janitorRetry)
			} else {
				t.Stop() // no tick of before is received after Stop (Go 1.23 timers)
			}
			ticking = busy
		}
		select {
		case <-ctx.Done():
			j.drainInbox()
			j.sweep(context.WithoutCancel(ctx))
			for _, u := range j.unfinished {
				j.lost(u, "the daemon stopped before Redis answered")
			}
			return nil
		case p := <-j.inbox:
			j.pending[p] = struct{}{}
		case req := <-j.finishes:
			j.addFinish(req)
		case done := <-j.sweeps:
			j.drainInbox()
			j.sweep(ctx)
			close(done)
		case <-t.C:
			j.sweep(ctx)
		}
	}
}

// addFinish queues req to be sent again.
func (j *Janitor) addFinish(req ledger.FinishRequest) {
	req.Retry, req.Next = true, ""
	u := unfinished{req: req, since: time.Now()}
	if len(j.unfinished) >= maxUnfinished {
		j.lost(u, fmt.Sprintf("more than %d finishes wait to be sent again", maxUnfinished))
		return
	}
	j.unfinished = append(j.unfinished, u)
}

// sweep releases the phantoms, then sends the pending finishes again,
// oldest first. Each part stops at its first call that fails (Redis still
// out of reach: the next sweep tries again); a finish that failed goes to
// the back, so that one the server keeps refusing (a full memory, a key of
// the wrong type) does not hold the others back.
func (j *Janitor) sweep(ctx context.Context) {
	j.releasePhantoms(ctx)
	for range len(j.unfinished) {
		u := j.unfinished[0]
		j.unfinished[0] = unfinished{} // no reference kept by the backing array
		j.unfinished = j.unfinished[1:]
		if time.Since(u.since) > unfinishedFor {
			j.lost(u, "no retry succeeded within "+unfinishedFor.String())
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		f, err := j.locker.Finish(rctx, u.req)
		cancel()
		if err != nil {
			j.unfinished = append(j.unfinished, u)
			return
		}
		if u.req.OwnRecordOnly {
			j.log.Info("claim whose answer was lost settled: if Redis had applied it, its record now says skipped "+
				"redis_error (this node ran nothing)", zap.String("job", u.req.Job), zap.String("run_id", u.req.Record.RunID),
				zap.Int64("slot", u.req.Record.Slot), zap.Duration("after", time.Since(u.since)))
			continue
		}
		j.log.Info("run recorded: its finish was sent again after its answer was lost", zap.String("job", u.req.Job),
			zap.String("run_id", u.req.Record.RunID), zap.String("result", u.req.Record.Result),
			zap.Bool("lease_released", f.Released), zap.Duration("after", time.Since(u.since)))
	}
}

// releasePhantoms releases the pending phantoms until a release fails.
func (j *Janitor) releasePhantoms(ctx context.Context) {
	for p := range j.pending {
		if time.Now().After(p.Until) {
			delete(j.pending, p)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		var released bool
		var back int64
		var err error
		if u, ok := j.locker.(ledger.Unhander); ok && p.HandedOn {
			back, released, err = u.Unhand(rctx, p.Job, p.Owner)
		} else {
			released, err = j.locker.Release(rctx, p.Job, p.Owner)
		}
		cancel()
		if err != nil {
			return // Redis still unreachable; try again later
		}
		delete(j.pending, p)
		switch {
		case released && back > 0:
			j.log.Warn("pending slot put back: the finish that handed it the lease was applied though its answer was "+
				"lost; the job's next claim runs it", zap.String("job", p.Job), zap.Int64("pending_slot", back))
		case released && p.HandedOn:
			j.log.Error("pending slot not run: the finish that handed it the lease was applied though its answer "+
				"was lost, and that lease, held by no run, is released", zap.String("job", p.Job), zap.String("owner", p.Owner))
		case released:
			j.log.Info("phantom lease released", zap.String("job", p.Job), zap.String("owner", p.Owner))
		}
	}
}

// lost logs a run whose record the janitor gives up, with its facts (the
// record is not in the job's history, and a success not in max_runs'
// count).
func (j *Janitor) lost(u unfinished, why string) {
	r := u.req.Record
	if u.req.OwnRecordOnly {
		j.log.Warn("claim whose answer was lost not settled: if Redis applied it, its record stays claimed and the audit "+
			"declares it unknown (this node ran nothing)", zap.String("job", u.req.Job), zap.String("run_id", r.RunID),
			zap.Int64("slot", r.Slot), zap.String("why", why))
		return
	}
	j.log.Error("run record lost: the run's finish failed and was not written; the job's history and max_runs count may miss it",
		zap.String("job", u.req.Job), zap.String("run_id", r.RunID), zap.Int64("slot", r.Slot),
		zap.String("result", r.Result), zap.Int("exit_code", r.ExitCode), zap.Time("start", r.Start),
		zap.Time("end", r.End), zap.String("cause", why))
}

// drainInbox moves queued phantoms and finishes to pending without
// blocking.
func (j *Janitor) drainInbox() {
	for {
		select {
		case p := <-j.inbox:
			j.pending[p] = struct{}{}
		case req := <-j.finishes:
			j.addFinish(req)
		default:
			return
		}
	}
}
