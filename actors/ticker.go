package actors

import (
	"container/heap"
	"context"
	"hash/fnv"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// maxSleep caps one timer wait so that a stepped wall clock (NTP, manual
// change) is noticed within a minute: Go timers run on the monotonic clock
// while slots are wall-clock instants.
const maxSleep = time.Minute

// Nexter yields a schedule's next fire time strictly after a given instant,
// or the zero time when there is none. *schedule.Schedule implements it.
type Nexter interface {
	Next(after time.Time) time.Time
}

// onceOf is the fire time of an "@at T" schedule (*schedule.Schedule's
// Once); false for every other schedule.
func onceOf(s Nexter) (time.Time, bool) {
	o, ok := s.(interface{ Once() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	return o.Once()
}

// sameOnce reports whether a and b are "@at" schedules of the same time.
func sameOnce(a, b Nexter) bool {
	ta, oa := onceOf(a)
	tb, ob := onceOf(b)
	return oa && ob && ta.Equal(tb)
}

// TickerEntry is one job as the ticker sees it.
type TickerEntry struct {
	Job    string
	Sched  Nexter
	Jitter time.Duration // each slot fires at slot + Jitter(job, slot)
	// Inbox receives Fire messages. The ticker never blocks on it: when it
	// is full the fire is dropped, logged and counted.
	Inbox chan<- jobMsg
	// Deliver, when set, is used instead of Inbox (Job.TryFire: a lazy job
	// actor makes its inbox at the first fire and starts its goroutine). It
	// must not block, and returns false when the fire was not taken
	// (inbox full): then it is dropped, logged and counted.
	Deliver func(Fire) bool
}

type tickerMsg interface{ tickerMsg() }

type setEntries struct{ entries []TickerEntry }
type probe struct{ reply chan struct{} }

func (setEntries) tickerMsg() {}
func (probe) tickerMsg()      {}

// Ticker computes next fire times for all jobs with one timer over a heap
// (not one timer per job) and sends Fire messages to job actors. Next
// slots are computed from the previous slot, never from "now", so nothing
// drifts.
type Ticker struct {
	log     *zap.Logger
	metrics *Metrics
	now     func() time.Time
	inbox   chan tickerMsg

	heap  entryHeap
	byJob map[string]*tickerItem
}

// NewTicker returns a ticker with no entries. now reads the wall clock
// (nil = time.Now; tests pass a skewed clock).
func NewTicker(log *zap.Logger, metrics *Metrics, now func() time.Time) *Ticker {
	if now == nil {
		now = time.Now
	}
	return &Ticker{log: log, metrics: metrics, now: now, inbox: make(chan tickerMsg),
		byJob: map[string]*tickerItem{}}
}

// SetEntries replaces the ticker's jobs. A job whose schedule is unchanged
// (same Nexter value) keeps its pending slot, whatever else changed; a job
// whose schedule changed keeps a pending slot that was already due or in
// its jitter wait (a reload never drops a slot) and takes its later slots
// from the new schedule. Its fire time follows the new jitter. New jobs
// start at their first slot whose fire time is after now. Blocks until the
// ticker took the message or ctx ends.
func (t *Ticker) SetEntries(ctx context.Context, entries []TickerEntry) error {
	return send(ctx, t.inbox, tickerMsg(setEntries{entries}))
}

// Probe returns nil once the ticker loop has answered, proving it is alive
// (used by the systemd watchdog and /healthz). Blocks until then or ctx ends.
func (t *Ticker) Probe(ctx context.Context) error {
	p := probe{reply: make(chan struct{}, 1)}
	if err := send(ctx, t.inbox, tickerMsg(p)); err != nil {
		return err
	}
	select {
	case <-p.reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run drives the timer until ctx ends; it then returns ctx's error. It
// returns only when fully stopped.
func (t *Ticker) Run(ctx context.Context) error {
	timer := time.NewTimer(maxSleep)
	defer timer.Stop()
	for {
		t.fireDue()
		timer.Reset(t.sleepFor())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-t.inbox:
			t.handle(m)
		case <-timer.C:
		}
	}
}

func (t *Ticker) handle(m tickerMsg) {
	switch m := m.(type) {
	case setEntries:
		t.setEntries(m.entries)
	case probe:
		m.reply <- struct{}{}
	}
}

func (t *Ticker) setEntries(entries []TickerEntry) {
	now := t.now()
	old := t.byJob
	t.byJob = make(map[string]*tickerItem, len(entries))
	t.heap = t.heap[:0]
	for _, e := range entries {
		it := &tickerItem{TickerEntry: e}
		prev, ok := old[e.Job]
		if ok && !prev.parked && (prev.Sched == e.Sched || !prev.slot.After(now)) {
			it.slot = prev.slot
		} else {
			it.slot = firstUnfired(e, now)
		}
		if ok {
			// A slot already fired is not fired again by the new schedule.
			it.fired = prev.fired
			for range maxMissedCount {
				if it.slot.IsZero() || prev.fired.IsZero() || it.slot.After(prev.fired) {
					break
				}
				it.slot = e.Sched.Next(it.slot)
			}
		}
		t.byJob[e.Job] = it
		if it.slot.IsZero() {
			if ok && prev.parked && (prev.Sched == e.Sched || sameOnce(prev.Sched, e.Sched)) {
				it.parked = true // reported when it was parked (the same schedule, or the same @at job): once, not at every reload
				continue
			}
			t.park(it, now)
			continue
		}
		it.fireAt = it.slot.Add(jitterFor(e.Job, it.slot, e.Jitter))
		t.heap = append(t.heap, it)
	}
	heap.Init(&t.heap)
}

// firstUnfired is e's first slot whose fire time (slot + jitter) is after
// now: a slot still in its jitter wait is pending, as on every other node.
// Zero when the schedule yields none.
func firstUnfired(e TickerEntry, now time.Time) time.Time {
	s := e.Sched.Next(now.Add(-e.Jitter))
	for range maxMissedCount { // jitter longer than the interval: a bounded walk
		if s.IsZero() || s.Add(jitterFor(e.Job, s, e.Jitter)).After(now) {
			return s
		}
		s = e.Sched.Next(s)
	}
	return e.Sched.Next(now)
}

// windowed is a Nexter with an active window [from, until) (a zero bound
// is open); *schedule.Schedule implements it.
type windowed interface {
	Window() (from, until time.Time)
}

// park takes a job whose next time cannot be computed off the heap, with one
// log line: never a busy loop. An "@at T" job whose time has passed is done
// (info); so is a job whose active window has no fire time left (its
// active_until has passed, or comes before the next fire time), as
// configured; any other schedule without a next time is an error.
func (t *Ticker) park(it *tickerItem, now time.Time) {
	it.parked = true
	if at, once := onceOf(it.Sched); once && !at.After(now) {
		t.log.Info("job done: its @at time has passed; it does not fire again", zap.String("job", it.Job),
			zap.Time("at", at))
		return
	}
	if w, ok := it.Sched.(windowed); ok {
		if _, until := w.Window(); !until.IsZero() {
			msg := "active window ended; the job does not fire any more"
			if until.After(now) {
				msg = "no fire time left before active_until; the job does not fire any more"
			}
			t.log.Info(msg, zap.String("job", it.Job), zap.Time("active_until", until))
			return
		}
	}
	t.log.Error("schedule yields no next fire time; job parked until reload", zap.String("job", it.Job))
}

// sleepFor is the wait until the next fire time, at most maxSleep.
func (t *Ticker) sleepFor() time.Duration {
	d := maxSleep
	if len(t.heap) > 0 {
		d = min(d, t.heap[0].fireAt.Sub(t.now()))
	}
	return max(d, 0)
}

// fireDue sends a Fire for every entry whose fire time has come. When the ticker wakes so late that a newer slot of the same job is
// already due, the older slots are passed over (logged and counted): only
// the latest due slot is fired. It returns how many fires it sent.
func (t *Ticker) fireDue() int {
	sent := 0
	now := t.now()
	for len(t.heap) > 0 && !now.Before(t.heap[0].fireAt) {
		it := t.heap[0]
		missed := 0
		next := it.Sched.Next(it.slot)
		for !next.IsZero() && !now.Before(next.Add(jitterFor(it.Job, next, it.Jitter))) {
			missed++
			it.slot, next = next, it.Sched.Next(next)
		}
		if missed > 0 {
			t.metrics.SlotsMissed(it.Job, missed)
			t.log.Warn("ticker woke late; older slots passed over", zap.String("job", it.Job),
				zap.Int("missed", missed), slotField(it.slot))
		}
		t.fire(it, missed)
		sent++
		it.fired = it.slot
		if next.IsZero() {
			heap.Pop(&t.heap)
			t.park(it, now) // its fire time has come: an @at job is done
			continue
		}
		it.slot = next
		it.fireAt = next.Add(jitterFor(it.Job, next, it.Jitter))
		heap.Fix(&t.heap, 0)
	}
	return sent
}

func (t *Ticker) fire(it *tickerItem, passed int) {
	f := Fire{Job: it.Job, Slot: it.slot, At: it.fireAt, Passed: passed}
	if it.Deliver != nil {
		if !it.Deliver(f) {
			t.dropped(it)
		}
		return
	}
	select {
	case it.Inbox <- f:
	default:
		t.dropped(it)
	}
}

// dropped logs and counts a fire the job actor's inbox had no room for.
func (t *Ticker) dropped(it *tickerItem) {
	t.metrics.FireDropped(it.Job)
	t.log.Warn("job actor inbox full; fire dropped", zap.String("job", it.Job), slotField(it.slot))
}

// jitterFor is a stable pseudo-random delay in [0, max) derived from the
// job name and slot, so every node waits the same amount for a slot.
func jitterFor(job string, slot time.Time, maxJitter time.Duration) time.Duration {
	if maxJitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(job))
	h.Write([]byte(strconv.FormatInt(slot.Unix(), 10)))
	return time.Duration(h.Sum64() % uint64(maxJitter))
}

type tickerItem struct {
	TickerEntry
	slot   time.Time
	fireAt time.Time
	fired  time.Time // the last slot fired (zero before the first)
	parked bool
}

type entryHeap []*tickerItem

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].fireAt.Before(h[j].fireAt) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(*tickerItem)) }
func (h *entryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// send delivers v on ch unless ctx ends first: no send blocks forever.
func send[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
