package actors

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// JobDeps are what a job actor needs from the engine. All fields are
// required unless marked optional.
type JobDeps struct {
	Log     *zap.Logger
	Metrics *Metrics
	Locker  ledger.Locker
	NodeID  string
	// Environ is what runs inherit: the daemon's environment filtered by
	// JobEnviron (once, by the caller: it is shared by every job actor).
	Environ []string
	// Results receives every finished run (the hook runner's inbox).
	Results chan<- RunFinished
	// Phantoms receives owners of claims whose outcome is unknown (the
	// request timed out): the janitor releases them once Redis answers.
	Phantoms chan<- Phantom
	// Finishes receives the finishes that failed (Janitor.Finishes): the
	// janitor sends them again so that the run's record is written. nil =
	// none (the record of such a run is lost, with an error log).
	Finishes chan<- ledger.FinishRequest
	// Kill is closed when running runs must be terminated (shutdown_timeout
	// has passed, or a second signal arrived): SIGTERM, SIGKILL after
	// kill_grace.
	Kill <-chan struct{}
	// KillNow is closed on a second shutdown signal: running runs are
	// SIGKILLed at once, then release their leases. nil = never.
	KillNow <-chan struct{}
	// GracePeriod is waited after a run before its lease is released.
	GracePeriod time.Duration
	// ClaimTimeout bounds one claim round trip (default DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// Now reads the wall clock for catch-up; nil = time.Now (tests pass a
	// skewed clock).
	Now func() time.Time
	// Start starts one attempt's process; nil = process.Start. Tests in
	// synctest bubbles substitute a fake driven by the bubble's clock.
	Start Starter
	// Records keeps the process group and lease of each run in progress in
	// the state directory; optional (nil = nothing kept).
	Records RunRecords
	// Load counts this node's runs in progress (node.max_parallel and the
	// load-ordered claim delay, actors/capacity.go); optional (nil = no
	// limit, no delay; manual runs never use it).
	Load *cluster.Load
	// MaxSkew is node.max_clock_skew: a scheduled claim's early edge and
	// the first term of a job's answer window (docs/protocol.md, R2).
	MaxSkew time.Duration
	// Retention bounds the jobs' ledgers (ledger.retention,
	// ledger.max_occurrences; docs/protocol.md, R9).
	Retention ledger.Retention
	// Output, OutputMaxBytes and Redact: a run's output (actors/output.go).
	// Output is optional (nil: output is only logged); OutputMaxBytes is
	// output.max_bytes, Redact output.redact's patterns.
	Output         ledger.OutputStore
	OutputMaxBytes int
	Redact         []*regexp.Regexp
	// Watch sees every run start and end, for alerts (package notify);
	// optional (nil = none).
	Watch RunWatcher
	// Seen keeps the ledger seq and run count this node has seen for each
	// job across its restarts (*statedir.SeenCounts; docs/protocol.md, R5,
	// R6); optional (nil = kept in memory only).
	Seen SeenKeeper
}

// SeenKeeper keeps the highest ledger seq and run count seen per job
// (*statedir.SeenCounts). Saw must not block.
type SeenKeeper interface {
	Get(job string) (statedir.Seen, bool)
	Saw(job string, seq, runs int64)
}

// RunWatcher is told when a run's first attempt starts and when the run
// has ended (its final result). Its methods must not block.
type RunWatcher interface {
	RunStarted(info RunInfo, job *config.Job, at time.Time)
	RunFinished(fin RunFinished)
}

// jobDeps are one job's dependencies: the shared JobDeps and the state of
// its logging that is the job's own.
type jobDeps struct {
	*JobDeps
	repeats *repeatLog // summarises the job's repeated warnings
	// maxRunsTold is set once the job's first max_runs skip was logged at
	// info (later ones are debug: the job is done, every slot says so).
	maxRunsTold atomic.Bool
	// latest is the job's configuration as the job actor last set it
	// (NewJobOf, Reconfigure): a run's finish reads it for the lease it
	// hands to the pending slot, so that a reload reaches a chain of
	// queued runs.
	latest atomic.Pointer[config.Job]
	// lastLocal is the latest slot this node skipped for a reason of its
	// own, with nothing written to the ledger (localReasons): the audit
	// names it in the slot's missed record (Job.LocalSkip). nil = none.
	lastLocal atomic.Pointer[localSkip]
}

// noteLocal remembers slot as skipped for reason when it is one of
// localReasons (lastLocal).
// The latest slot wins whatever order the run goroutines and the job actor
// note their skips in.
func (d *jobDeps) noteLocal(slot time.Time, reason string) {
	if !localReasons[reason] || slot.IsZero() {
		return
	}
	l := &localSkip{slot: slot.Unix(), reason: reason}
	for {
		cur := d.lastLocal.Load()
		if cur != nil && cur.slot > l.slot || d.lastLocal.CompareAndSwap(cur, l) {
			return
		}
	}
}

// localSkip is one slot skipped by this node alone, and why.
type localSkip struct {
	slot   int64
	reason string
}

// localReasons are the skip reasons decided by this node alone that leave
// the slot without a record (docs/protocol.md, "Skip reasons"): when no
// other node claims it, the audit records it missed with this node's
// reason.
var localReasons = map[string]bool{SkipNodeBusy: true, ledger.SkipShuttingDown: true, ledger.SkipRedisError: true,
	ledger.SkipRedisUnsafe: true, ledger.SkipClockSkew: true, ledger.SkipClaimLate: true}

// SharedDeps are JobDeps with their defaults filled in, shared read-only
// by many job actors (NewJobOf): a job set of 10,000 jobs keeps one copy.
type SharedDeps struct{ d JobDeps }

// ShareDeps fills deps' defaults (Start, Now, ClaimTimeout) and returns it
// for NewJobOf. The caller does not change deps' channels or values after.
func ShareDeps(deps JobDeps) *SharedDeps {
	if deps.Start == nil {
		deps.Start = startProcess
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.ClaimTimeout <= 0 {
		deps.ClaimTimeout = DefaultClaimTimeout
	}
	return &SharedDeps{d: deps}
}

// Proc is a started process as the actors use it (*process.Proc).
type Proc interface {
	Pid() int
	Group() process.Group
	Started() time.Time
	Terminate(grace time.Duration)
	Done() <-chan struct{}
	Wait() process.Result
}

// Starter starts a process from a spec (process.Start).
type Starter func(process.Spec) (Proc, error)

func startProcess(s process.Spec) (Proc, error) { return process.Start(s) }

// DefaultClaimTimeout bounds one claim round trip when JobDeps.ClaimTimeout
// is 0.
const DefaultClaimTimeout = 2 * time.Second

// Job is the actor of one job: it owns the job's overlap state and starts
// one run goroutine per run, whatever its trigger (docs/architecture.md).
// Its inbox takes Fire, Catchup, Reconfigure and RunNow.
//
// It tells a run that is claiming or releasing its lease from one that
// runs: with overlap "skip", a fire that arrives while this node's claim of
// an earlier slot, or the release after its run, is in flight is held and
// decided when that call has its answer (docs/protocol.md, "Skip reasons").
type Job struct {
	deps   jobDeps
	cfg    *config.Job   // never modified: a Reconfigure replaces it
	env    []string      // jobBaseEnv of cfg, built at the first run of each configuration
	envOK  bool          // env is built (nil is a valid env: built per attempt)
	inbox  chan jobMsg   // made at the first message (box), guarded by mu until then
	events chan runEvent // from the run goroutines: claim answered, releasing, ended; made at the first run

	running   int        // run goroutines
	claiming  int        // of them, claims not answered yet
	active    int        // of them, claims won and attempts not over: the job runs here
	releasing int        // of them, releases (with the history record) in flight
	held      []heldFire // fires waiting for the pending claim's or release's answer
	// decided is the highest slot whose claim this node saw answered with
	// a record (won, or decided by another node); gap is set when one of
	// its slots got no such answer (Undecided). The auditor skips a job
	// while no gap is set and decided covers the slots it would audit.
	decided atomic.Int64
	// firstFire is the first slot fired here (0 = none yet): this node
	// saw nothing of the slots before it.
	firstFire atomic.Int64
	gapMu     sync.Mutex
	gapMin    int64 // the earliest slot with no record-bearing answer here (0 = none); 1: unknown
	gapMax    int64 // the latest such slot
	// seenSeq and seenRuns are the highest ledger seq and run count seen
	// in the answers of claims, finishes and audits (docs/protocol.md, R5,
	// R6); atomic: the job set's auditor adds what it sees (See).
	seenSeq, seenRuns atomic.Int64

	lastCatchup time.Time

	// The goroutine of an actor started with Start lives only while it has
	// work: mu guards live (a goroutine is handling the inbox) and exited
	// (onExit was called). The state above is kept across goroutines.
	mu     sync.Mutex
	live   bool
	exited bool
	ctx    context.Context
	onExit func()
}

// heldFire is a fire that came while a claim or release was pending.
type heldFire struct {
	slot    time.Time
	trigger ledger.Trigger
}

// runEvent is what a run goroutine tells its job actor, in this order:
// evClaimed once its claim has an answer (won: it goes on to its attempts;
// failed: the call failed, redis_error), evReleasing when a won run's
// attempts are over and its release begins, evEnded when the goroutine
// ends (failed: the release failed).
type runEvent struct {
	kind        runEventKind
	won, failed bool
	slot        time.Time        // the run's slot (zero for a manual run)
	claim       ledger.Claim     // evClaimed: the answer, when not failed
	next        *handoff         // evEnded: the pending slot the run's Finish handed the lease to
	finished    *ledger.Finished // evEnded: the run's finish answer, nil when none came
	decided     bool             // evClaimed: the answer says the slot has a record
}

type runEventKind int

const (
	evClaimed runEventKind = iota
	evReleasing
	evEnded
)

// inboxSize bounds queued messages per job; the ticker drops (and counts)
// fires beyond it rather than block.
const inboxSize = 16

// NewJob returns a job actor for cfg.
func NewJob(cfg config.Job, deps JobDeps) *Job { return NewJobOf(&cfg, ShareDeps(deps)) }

// NewJobOf returns a job actor for *cfg and deps without copying either (a
// job set of 10,000 jobs keeps one copy of each job's config, 344 bytes,
// and one JobDeps). The caller never modifies *cfg afterwards.
func NewJobOf(cfg *config.Job, deps *SharedDeps) *Job {
	j := &Job{cfg: cfg} // inbox and events are made at their first use
	j.deps.JobDeps, j.deps.repeats = &deps.d, newRepeatLog(repeatEvery)
	j.deps.latest.Store(cfg)
	if k := deps.d.Seen; k != nil {
		if s, ok := k.Get(cfg.Name); ok { // R5, R6: what this node saw before its restart
			j.seenSeq.Store(s.Seq)
			j.seenRuns.Store(s.Runs)
		}
	}
	return j
}

// baseEnv is the job's base environment (jobBaseEnv), built at the first
// run of a configuration: a job that never runs (10,000 idle jobs) holds
// none.
func (j *Job) baseEnv() []string {
	if !j.envOK {
		j.env, j.envOK = jobBaseEnv(j.deps.Environ, *j.cfg), true
	}
	return j.env
}

// Inbox is where the ticker sends Fire messages.
func (j *Job) Inbox() chan<- jobMsg { return j.box() }

// box returns the inbox, made at its first use: a job that never gets a
// message (10,000 idle jobs) holds no buffer.
func (j *Job) box() chan jobMsg {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.inbox == nil {
		j.inbox = make(chan jobMsg, inboxSize)
	}
	return j.inbox
}

// TryFire sends f to the inbox without blocking and wakes a lazy actor; it
// returns false, sending nothing, when the inbox is full (the ticker's
// TickerEntry.Deliver).
func (j *Job) TryFire(f Fire) bool {
	select {
	case j.box() <- f:
		j.Wake()
		return true
	default:
		return false
	}
}

// Send delivers m (Catchup, Reconfigure, RunNow) unless ctx ends first
// (then it returns ctx.Err()), and wakes a lazy actor. It blocks while the
// inbox is full.
func (j *Job) Send(ctx context.Context, m jobMsg) error {
	if err := send(ctx, j.box(), m); err != nil {
		return err
	}
	j.Wake()
	return nil
}

// Run handles messages until ctx ends. Then it stops claiming (queued fires
// are skipped with reason shutting_down), waits for its running runs —
// which end by themselves or when deps.Kill is closed — and returns nil.
// Its goroutine stays while idle; Start is the form that holds none.
func (j *Job) Run(ctx context.Context) error {
	j.mu.Lock()
	j.ctx, j.live = ctx, true
	j.mu.Unlock()
	j.loop(true)
	return nil
}

// Start makes j a lazy actor bound to ctx and returns at once: a goroutine
// is started by Wake (the ticker calls it after a fire, Send after every
// message) and ends when the inbox is empty and no run is in progress; the
// overlap state stays in j. An idle job thus costs no goroutine: 10,000
// idle jobs hold no stacks. The caller calls Wake once ctx has ended (an
// idle actor has no goroutine to notice it; the job set does so in its
// cancel); then, once the last run has ended, onExit is called, once, on
// the actor's goroutine (it may block). Call Start once, before any Wake
// or Send, and never with Run.
func (j *Job) Start(ctx context.Context, onExit func()) {
	j.ctx, j.onExit = ctx, onExit
}

// Wake starts the actor's goroutine unless it is running. Safe from any
// goroutine; it never blocks. A message sent to the inbox before Wake is
// handled.
func (j *Job) Wake() {
	j.mu.Lock()
	start := !j.live && j.onExit != nil
	j.live = j.live || start
	j.mu.Unlock()
	if start {
		go j.loop(false)
	}
}

// loop handles the inbox and the run events. stay: it returns only when
// ctx has ended and no run is left (Run); otherwise also when it is idle
// (Start). After ctx has ended, messages are answered as at shutdown and
// no run starts (except a pending slot whose lease a finish handed over).
func (j *Job) loop(stay bool) {
	ctx, inbox := j.ctx, j.box()
	for {
		// One reading of ctx per turn, the exit check's (under mu: Wake):
		// read again for the select, a cancel in between left the select
		// without ctx.Done and nothing else to wake it (an idle Run never
		// returned).
		var ended bool
		if j.running == 0 {
			j.mu.Lock()
			ended = ctx.Err() != nil
			if len(inbox) == 0 && (ended || !stay) {
				j.live = false
				exit := ended && !j.exited && j.onExit != nil
				j.exited = j.exited || exit
				j.mu.Unlock()
				if ended {
					j.deps.Metrics.SetRunning(j.cfg.Name, 0)
				}
				if exit {
					j.onExit()
				}
				return
			}
			j.mu.Unlock()
		} else {
			ended = ctx.Err() != nil
		}
		var done <-chan struct{}
		if !ended {
			done = ctx.Done()
		}
		select {
		case <-done:
		case m := <-inbox:
			if ctx.Err() != nil {
				j.drainMsg(m)
			} else {
				j.handle(ctx, m)
			}
		case ev := <-j.events:
			j.onRunEvent(ctx, ev) // after ctx: held fires are redis_error or shutting_down
		}
	}
}

// drainMsg answers a message that comes after ctx ended: a fire is
// skipped shutting_down, a manual run refused; the rest is dropped.
func (j *Job) drainMsg(m jobMsg) {
	switch m := m.(type) {
	case Fire:
		j.skip(m.Slot, ledger.SkipShuttingDown)
	case RunNow:
		m.Reply <- Ran{Skip: ledger.SkipShuttingDown}
	}
}

// onRunEvent keeps the counts of runs by phase and decides the held fires
// once no claim or release is pending.
func (j *Job) onRunEvent(ctx context.Context, ev runEvent) {
	switch ev.kind {
	case evClaimed:
		j.claiming--
		if ev.won {
			j.active++
		}
		if !ev.slot.IsZero() {
			if ev.decided {
				atomicMax(&j.decided, ev.slot.Unix())
			} else {
				j.markGap(ev.slot.Unix(), ev.slot.Unix())
			}
		}
		if !ev.failed {
			j.see(ev.claim)
		}
		j.decideHeld(ctx, ev.failed, ev.slot)
	case evReleasing:
		j.active--
		j.releasing++
	case evEnded:
		if ev.finished != nil { // a node learns its own count at once (R6), not at its next claim
			j.See(ev.finished.Seq, ev.finished.Runs)
		}
		j.running--
		j.deps.Metrics.SetRunning(j.cfg.Name, j.running)
		if ev.won {
			j.releasing--
			if ev.next != nil { // before the held fires: the lease is the pending slot's
				j.startPending(ctx, ev.next)
			}
			j.decideHeld(ctx, ev.failed, ev.slot)
		}
	}
}

func (j *Job) handle(ctx context.Context, m jobMsg) {
	switch m := m.(type) {
	case Fire:
		j.firstFire.CompareAndSwap(0, m.Slot.Unix())
		if m.Passed > 0 {
			j.markGap(1, m.Slot.Unix()) // the slots passed over lie before it
		}
		j.onFire(ctx, m.Slot, ledger.TriggerSchedule)
	case Catchup:
		j.onCatchup(ctx, m)
	case Reconfigure:
		j.cfg, j.env, j.envOK = &m.Job, nil, false
		j.deps.latest.Store(&m.Job)
	case RunNow:
		j.onRunNow(ctx, m)
	}
}

// onFire decides a due slot: skipped locally, held while this node's claim
// of an earlier slot is pending (overlap ≠ allow), or started.
func (j *Job) onFire(ctx context.Context, slot time.Time, trigger ledger.Trigger) {
	exclusive := j.cfg.Overlap != config.OverlapAllow
	switch {
	case !j.cfg.Enabled:
		j.skip(slot, ledger.SkipDisabled)
	case ctx.Err() != nil:
		j.skip(slot, ledger.SkipShuttingDown)
	case exclusive && (j.claiming > 0 || j.releasing > 0):
		j.held = append(j.held, heldFire{slot: slot, trigger: trigger})
	default:
		// While this node's run holds the lease the slot is still claimed,
		// so that the ledger records it (skipped overlap, or queued with
		// queue and replace) and the audit does not call it missed: the
		// claim takes no place at node.max_parallel, and starts no run.
		queueClaim := exclusive && j.active > 0
		j.start(ctx, &run{job: j.cfg, env: j.baseEnv(), info: RunInfo{Job: j.cfg.Name, Slot: slot, Trigger: trigger},
			queueClaim: queueClaim, localOverlap: queueClaim && !queues(*j.cfg)}, nil)
	}
}

// decideHeld decides the fires held for a claim or release that has its
// answer: when that call failed they are skipped redis_error (the slot is
// not run, fail-safe: Redis did not answer); otherwise each is decided
// again, so a won claim makes them overlap_local and a skipped claim or a
// completed release lets the first of them claim. pending is the slot of
// the run whose call answered.
func (j *Job) decideHeld(ctx context.Context, failed bool, pending time.Time) {
	held := j.held
	j.held = nil
	for _, f := range held {
		if failed {
			skipSlot(&j.deps, j.cfg.Name, f.slot, ledger.SkipRedisError, zap.Int64("pending_call_slot", unixOrZero(pending)))
			continue
		}
		j.onFire(ctx, f.slot, f.trigger)
	}
}

// see raises the highest ledger seq and run count seen to a claim
// answer's (docs/protocol.md, R5, R6).
func (j *Job) see(c ledger.Claim) { j.See(c.Seq, c.Runs) }

// See raises the highest ledger seq and run count this node has seen for
// the job (docs/protocol.md, R5, R6). Safe from any goroutine.
func (j *Job) See(seq, runs int64) {
	rose := atomicMax(&j.seenSeq, seq)
	if atomicMax(&j.seenRuns, runs) {
		rose = true
	}
	if k := j.deps.Seen; rose && k != nil {
		k.Saw(j.deps.latest.Load().Name, j.seenSeq.Load(), j.seenRuns.Load())
	}
}

// atomicMax raises a to at least v and reports whether it rose.
func atomicMax(a *atomic.Int64, v int64) bool {
	for {
		cur := a.Load()
		if v <= cur {
			return false
		}
		if a.CompareAndSwap(cur, v) {
			return true
		}
	}
}

// startPending starts the run of a pending slot whose lease the Finish of
// the run before it took (overlap queue or replace). It runs even when
// shutdown has begun: the slot is claimed, and a claimed slot nobody runs
// would be silently missed.
func (j *Job) startPending(ctx context.Context, h *handoff) {
	r := &run{job: j.cfg, env: j.baseEnv(), info: RunInfo{Job: j.cfg.Name, Slot: h.slot, Trigger: ledger.TriggerQueued, RunID: h.runID}, pre: h}
	j.start(ctx, r, nil)
}

// onRunNow starts a manual run. A disabled job is refused unless forced;
// pause and overlap are decided by the claim, as for any run.
func (j *Job) onRunNow(ctx context.Context, m RunNow) {
	switch {
	case !j.cfg.Enabled && !m.Force:
		j.deps.Log.Warn("manual run not started", zap.String("job", j.cfg.Name), zap.String("reason", ledger.SkipDisabled))
		m.Reply <- Ran{Skip: ledger.SkipDisabled}
	case ctx.Err() != nil:
		m.Reply <- Ran{Skip: ledger.SkipShuttingDown}
	case m.Backfill:
		j.start(ctx, &run{job: j.cfg, env: j.baseEnv(), info: RunInfo{Job: j.cfg.Name, Slot: m.Slot, Trigger: ledger.TriggerBackfill},
			force: m.Force}, m.Reply)
	default:
		r := &run{job: j.cfg, env: j.baseEnv(), info: RunInfo{Job: j.cfg.Name, Trigger: ledger.TriggerManual, Requester: m.Requester}, force: m.Force}
		j.start(ctx, r, m.Reply)
	}
}

// onCatchup runs the latest slot S <= now with now−S <= catchup_window,
// at most once per slot from this node; the claim makes it once in the
// cluster, and only when it has no record or is recorded missed
// (docs/protocol.md, R1, R2).
func (j *Job) onCatchup(ctx context.Context, _ Catchup) {
	w := j.cfg.CatchupWindow
	if w <= 0 || !j.cfg.Enabled {
		return
	}
	now := j.deps.Now()
	var latest time.Time
	for t := j.cfg.Sched.Next(now.Add(-w - time.Second)); !t.IsZero() && !t.After(now); t = j.cfg.Sched.Next(t) {
		if now.Sub(t) <= w {
			latest = t
		}
	}
	if latest.IsZero() || !latest.After(j.lastCatchup) {
		return
	}
	j.lastCatchup = latest
	j.deps.Log.Info("catch-up: claiming the latest missed slot", zap.String("job", j.cfg.Name), slotField(latest))
	j.onFire(ctx, latest, ledger.TriggerCatchup)
}

func (j *Job) skip(slot time.Time, reason string) {
	if !slot.IsZero() {
		j.markGap(slot.Unix(), slot.Unix()) // skipped here, before any claim: the ledger may have no record
	}
	skipSlot(&j.deps, j.cfg.Name, slot, reason)
}

// markGap notes slots from..to that got no record-bearing answer here.
func (j *Job) markGap(from, to int64) {
	j.gapMu.Lock()
	defer j.gapMu.Unlock()
	if j.gapMin == 0 || from < j.gapMin {
		j.gapMin = from
	}
	j.gapMax = max(j.gapMax, to)
}

// Undecided reports whether a slot in [first, through] may lack a record
// as far as this node saw: it fired none of its slots yet or fired its
// first after first (it saw nothing before), a slot up to through got no
// record-bearing answer here (since the last audit that covered it), or
// the last slot it saw decided is older than through. Safe from any
// goroutine.
func (j *Job) Undecided(first, through int64) bool {
	if ff := j.firstFire.Load(); ff == 0 || first < ff {
		return true
	}
	j.gapMu.Lock()
	gap := j.gapMin != 0 && j.gapMin <= through
	j.gapMu.Unlock()
	return gap || j.decided.Load() < through
}

// LocalSkip is the latest slot in [first, through] that this node skipped
// on its own (localReasons) and why; 0 and "" when none (it remembers the
// latest such slot only). Safe from any goroutine.
func (j *Job) LocalSkip(first, through int64) (slot int64, reason string) {
	if l := j.deps.lastLocal.Load(); l != nil && l.slot >= first && l.slot <= through {
		return l.slot, l.reason
	}
	return 0, ""
}

// Audited notes an audit that recorded every slot up to to: the gaps it
// covered are closed (all of them, or none while a later one is open).
func (j *Job) Audited(to int64) {
	j.gapMu.Lock()
	defer j.gapMu.Unlock()
	if j.gapMax <= to {
		j.gapMin, j.gapMax = 0, 0
	}
}

// skipSlot logs (info; debug for claimed_elsewhere and disabled, warn for
// overlap_local) and counts one skipped slot (docs/protocol.md, "Skip
// reasons"). fields say more about the cause. overlap_local,
// redis_error and not_replicated repeat on every slot while a long run or
// an outage lasts: their lines are summarised (repeats.go).
func skipSlot(deps *jobDeps, job string, slot time.Time, reason string, fields ...zap.Field) {
	deps.Metrics.Skip(job, reason)
	deps.noteLocal(slot, reason)
	level := zapcore.InfoLevel
	switch reason {
	case ledger.SkipClaimedElsewhere, ledger.SkipDisabled:
		level = zapcore.DebugLevel
	case ledger.SkipOverlapLocal:
		level = zapcore.WarnLevel
	case ledger.SkipMaxRuns:
		if deps.maxRunsTold.Swap(true) {
			level = zapcore.DebugLevel
		} else {
			fields = append(fields, zap.String("cause", "job done: it has made its max_runs successful runs in the cluster"))
		}
	}
	if reason == ledger.SkipOverlapLocal || reason == ledger.SkipRedisError || reason == ledger.SkipNotReplicated {
		deps.repeats.Log(reason, func(extra ...zap.Field) {
			writeSkip(deps.Log, level, job, deps.NodeID, slot, reason, fields, extra...)
		}, func() {
			writeSkip(deps.Log, zapcore.DebugLevel, job, deps.NodeID, slot, reason, fields, zap.Bool("summarised", true))
		})
		return
	}
	writeSkip(deps.Log, level, job, deps.NodeID, slot, reason, fields)
}

// writeSkip writes one "slot skipped" line; at a level that is not
// enabled (claimed_elsewhere at info: two thirds of the slots of a 3-node
// cluster) it builds nothing.
func writeSkip(log *zap.Logger, level zapcore.Level, job, node string, slot time.Time, reason string, fields []zap.Field, extra ...zap.Field) {
	ce := log.Check(level, "slot skipped")
	if ce == nil {
		return
	}
	ce.Write(append(append([]zap.Field{zap.String("job", job), zap.String("node_id", node), slotField(slot),
		zap.String("reason", reason)}, fields...), extra...)...)
}

// start launches r on a goroutine; the actor waits for it in Run/drain.
// reply, when set, receives what happened (1-buffered: never blocks). The
// claim carries the highest slot and fence seen (state repair).
func (j *Job) start(ctx context.Context, r *run, reply chan<- Ran) {
	if !r.localOverlap {
		j.deps.repeats.End(ledger.SkipOverlapLocal) // no run was left in progress
	}
	j.running++
	j.claiming++
	j.deps.Metrics.SetRunning(j.cfg.Name, j.running)
	r.deps = &j.deps
	r.seenSeq, r.seenRuns = j.seenSeq.Load(), j.seenRuns.Load()
	if j.events == nil {
		j.events = make(chan runEvent) // at the first run
	}
	r.events = j.events // the actor receives until running == 0
	go func() {
		defer func() {
			j.events <- runEvent{kind: evEnded, won: r.won, failed: r.releaseFailed, slot: r.info.Slot, next: r.next,
				finished: r.finished}
		}()
		ran := r.execute(ctx)
		if reply != nil {
			reply <- ran
		}
	}()
}

var _ Proc = (*process.Proc)(nil)
