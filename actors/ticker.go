package actors

import (
	"container/heap"
	"context"
	"hash/fnv"
	"strconv"
	"syscall"
	"time"
	"unsafe"

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

	precise bool // SetPreciseWake: the last PreciseLead before a fire time is slept with nanosleep
	// lead (SetClaimLead): fires are sent this long before their fire
	// time; dues are the fire times of fires sent early, each with the
	// channel closed when it comes, in time order.
	lead time.Duration
	// leadPerFire and maxLead (SetClaimLeadGrowth): the lead grows by
	// leadPerFire for each further fire of an instant, up to maxLead.
	leadPerFire, maxLead time.Duration
	leadWalk             []int // leadNow's scratch stack of heap indices
	dues                 []due
}

// due is a fire time some fires were sent ahead of, and the channel their
// Fire.Due closes then. by is at on the monotonic clock of the fire's
// sending: a wall clock stepped back does not hold a won claim's run (it
// is closed at whichever comes first).
type due struct {
	at, by time.Time
	ch     chan struct{}
}

// ClaimLead is how long before its fire time the daemon's ticker sends a
// slot's fire (SetClaimLead), so that the claims of every node are
// answered by then and the process starts at the fire time: the fire delay
// is then the fork and exec alone, and no claim work competes with the
// forks of an instant. It exceeds the claim order's delays
// (nodeload.MaxDelay, 20 ms, for the nodes after the first) plus a claim
// round trip; a claim sent this early decides only a win or
// claimed_elsewhere (ClaimRequest.Early), so no skip is decided before the
// fire time (docs/protocol.md, "Early claims").
const ClaimLead = 30 * time.Millisecond

// ClaimLeadPerFire is how much the daemon's claim lead grows for each
// further fire of one instant (the fires whose fire times lie within
// ClaimLead of the first), and MaxClaimLead its bound
// (SetClaimLeadGrowth): a node sends and has answered the claims of an
// instant at some rate, about 70 µs a claim when 3 nodes claim 3,000 slots
// each on the 2-core machine of README.md "Performance" (workload herd),
// so that a herd's claims are all answered by its fire time and its
// winners start forking then, not after the last answer. 3,000 fires at
// one instant are sent 330 ms early, 50 fires 35 ms; the bound (reached
// at about 3,040 fires) is a third of the shortest lock_ttl (1 s,
// config/validate.go), the lease's first renewal, so that an early
// claim's process starts before its lease needs renewing.
const (
	ClaimLeadPerFire = 100 * time.Microsecond
	MaxClaimLead     = time.Second / 3
)

// PreciseLead is how long before a fire time a ticker with SetPreciseWake
// stops waiting on a Go timer and sleeps the rest with nanosleep(2). The
// runtime sleeps for timers in epoll_wait, whose timeout is in whole
// milliseconds and rounded up below 1 ms: a Go timer of an idle process
// fires up to 1 ms late (0.7 ms at the median, measured by `make bench`,
// workload 1x1). nanosleep is exact to the kernel's timer slack (50 µs).
const PreciseLead = 2 * time.Millisecond

// NewTicker returns a ticker with no entries. now reads the wall clock
// (nil = time.Now; tests pass a skewed clock).
func NewTicker(log *zap.Logger, metrics *Metrics, now func() time.Time) *Ticker {
	if now == nil {
		now = time.Now
	}
	return &Ticker{log: log, metrics: metrics, now: now, inbox: make(chan tickerMsg),
		byJob: map[string]*tickerItem{}}
}

// SetClaimLead makes the ticker send each fire lead before its fire time,
// with Fire.At and Fire.Due (closed at At: with SetPreciseWake on, to
// within the kernel's timer slack; and when Run returns). 0 (the
// default): fires are sent at their fire time. Call it before Run.
func (t *Ticker) SetClaimLead(lead time.Duration) { t.lead = max(lead, 0) }

// SetClaimLeadGrowth makes the claim lead (SetClaimLead) of an instant
// grow by perFire for each of its fires after the first, up to maxLead:
// the fires of an instant are those whose fire times lie within the base
// lead of the earliest pending one, and they are all sent together,
// lead(n) = min(base + perFire·(n−1), max(maxLead, base)) before it. 0
// (the default): the lead is the base lead whatever the number of fires.
// Call it before Run.
func (t *Ticker) SetClaimLeadGrowth(perFire, maxLead time.Duration) {
	t.leadPerFire, t.maxLead = max(perFire, 0), maxLead
}

// leadNow is the claim lead of the earliest pending fire time: the base
// lead, grown by the fires within the base lead of it
// (SetClaimLeadGrowth). It counts at most the fires the growth can use,
// walking only the heap's entries below that bound.
func (t *Ticker) leadNow() time.Duration {
	if t.lead == 0 || t.leadPerFire == 0 || len(t.heap) < 2 {
		return t.lead
	}
	top := max(t.maxLead, t.lead)
	limit := int((top-t.lead)/t.leadPerFire) + 1 // fires past it add nothing
	bound := t.heap[0].fireAt.Add(t.lead)
	n, stack := 0, append(t.leadWalk[:0], 0)
	defer func() { t.leadWalk = stack }()
	for len(stack) > 0 && n < limit {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(t.heap) || !t.heap[i].fireAt.Before(bound) {
			continue // its subtree's fire times are no earlier
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return min(t.lead+time.Duration(n-1)*t.leadPerFire, top)
}

// SetPreciseWake makes the ticker sleep the last PreciseLead before each
// fire time with nanosleep(2) on its own goroutine, which then blocks its
// thread and, when its pass woke nothing, its P for at most that long
// (sleepExact; messages are read between sleeps). Call it
// before Run, and only when now is the real clock: in a testing/synctest
// bubble a real sleep never advances the bubble's clock.
func (t *Ticker) SetPreciseWake(on bool) { t.precise = on }

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
// returns only when fully stopped, after closing the Due of every fire it
// sent early (a run waiting for one never waits past the ticker).
func (t *Ticker) Run(ctx context.Context) error {
	timer := time.NewTimer(maxSleep)
	defer timer.Stop()
	defer func() {
		// In the daemon the ticker outlives every run (engine.Run stops
		// it after the last one), so no process starts early by this.
		for _, d := range t.dues {
			close(d.ch)
		}
		t.dues = nil
	}()
	for {
		woke := t.fireDue() + t.closeDues()
		d, exact := t.sleepFor()
		if t.precise && exact {
			if d <= PreciseLead {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case m := <-t.inbox:
					t.handle(m)
				default:
					// Fires or dues sent in this pass: their goroutines
					// run meanwhile (fire times less than PreciseLead
					// apart must not chain raw sleeps ahead of them).
					sleepExact(d, woke > 0)
				}
				continue
			}
			d -= PreciseLead
		}
		timer.Reset(d)
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
			// A slot already fired (early, in the claim lead, its fire
			// time still ahead) is not fired again by the new schedule.
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

// sleepFor is the wait until the next fire is to be sent (its fire time
// less the lead) or the next due comes, at most maxSleep; exact says the
// wait ends at a fire time (a due, or a fire sent without a lead), which
// SetPreciseWake sleeps precisely. A fire sent early needs no precision:
// its process waits for its due.
func (t *Ticker) sleepFor() (d time.Duration, exact bool) {
	d = maxSleep
	now := t.now()
	if len(t.heap) > 0 {
		if f := t.heap[0].fireAt.Add(-t.leadNow()).Sub(now); f < d {
			d, exact = f, t.lead == 0
		}
	}
	if len(t.dues) > 0 {
		if f := min(t.dues[0].at.Sub(now), t.dues[0].by.Sub(now)); f <= d {
			d, exact = f, true
		}
	}
	return max(d, 0), exact
}

// closeDues closes the channels of the fire times that have come and
// returns how many.
func (t *Ticker) closeDues() int {
	now := t.now()
	n := 0
	for n < len(t.dues) && (!now.Before(t.dues[n].at) || !now.Before(t.dues[n].by)) {
		close(t.dues[n].ch)
		n++
	}
	if n > 0 {
		t.dues = append(t.dues[:0], t.dues[n:]...)
	}
	return n
}

// dueAt is the Fire.Due of a fire time at sent at now: nil when at has
// come, else the channel closed at at (one per fire time).
func (t *Ticker) dueAt(at, now time.Time) <-chan struct{} {
	if !now.Before(at) {
		return nil
	}
	i := len(t.dues)
	for i > 0 && t.dues[i-1].at.After(at) {
		i--
	}
	if i > 0 && t.dues[i-1].at.Equal(at) {
		return t.dues[i-1].ch
	}
	t.dues = append(t.dues, due{})
	copy(t.dues[i+1:], t.dues[i:])
	t.dues[i] = due{at: at, by: now.Add(at.Sub(now)), ch: make(chan struct{})}
	return t.dues[i].ch
}

// fireDue sends a Fire for every entry whose fire time, less the lead, has
// come. When the ticker wakes so late that a newer slot of the same job is
// already due, the older slots are passed over (logged and counted): only
// the latest due slot is fired. It returns how many fires it sent.
func (t *Ticker) fireDue() int {
	sent := 0
	real := t.now()
	now := real.Add(t.leadNow()) // the fires of fire times up to now are sent
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
		t.fire(it, real)
		sent++
		it.fired = it.slot
		if next.IsZero() {
			heap.Pop(&t.heap)
			t.park(it, now) // its fire time has come, less the lead: an @at job is done
			continue
		}
		it.slot = next
		it.fireAt = next.Add(jitterFor(it.Job, next, it.Jitter))
		heap.Fix(&t.heap, 0)
	}
	return sent
}

func (t *Ticker) fire(it *tickerItem, now time.Time) {
	f := Fire{Job: it.Job, Slot: it.slot, At: it.fireAt, Due: t.dueAt(it.fireAt, now)}
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

// sleepExact sleeps d (at most PreciseLead) with nanosleep(2). Unless
// yield, as a raw system call: the thread keeps its P, so for that time no
// other goroutine runs on it (with GOMAXPROCS 1, none in the daemon; the
// ticker sleeps so only when its pass sent nothing, so no fire or due of
// its own waits behind it). Entered as an ordinary system call (yield:
// the goroutines it has just woken run meanwhile), the Go runtime's
// sysmon takes the P away after 20 µs, hands it on and polls every 20 µs
// until the sleeper takes one back: measured at 3 nodes × 50 jobs a
// second, 4 alternating pairs, the raw sleep cost the daemons 0.87–0.92×
// the CPU, and the fire delay at one job a second fell from 0.76–1.35 ms
// to 0.49–0.65 ms at the median (README.md "Performance"). A signal may
// end the sleep early (the caller computes the wait again).
func sleepExact(d time.Duration, yield bool) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(min(d, PreciseLead).Nanoseconds())
	if yield {
		_ = syscall.Nanosleep(&ts, nil)
		return
	}
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
