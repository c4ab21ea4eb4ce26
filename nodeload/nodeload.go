// Package nodeload counts the runs in progress on this node, enforces
// node.max_parallel, and orders the nodes' claims without coordination
// (docs/protocol.md, "Who sends first"). For every (job, slot) each node
// ranks the live nodes that may run the job (Rank): every node computes
// the same ranking from the same view of the live nodes (short jobs, whose
// last recorded run was short, share rank 0 by blocks: RunTook, ShortRun).
// Rank 0 sends its claim at once, rank 1 after LeadStep, rank k after
// LeadStep + (k−1) × RankStep (plus PerBurstClaim per rank for every claim
// of the same slot this node sent before), at most MaxDelay. So each node
// wins about 1/N of the slots, and the winning claim of an idle rank-0
// node waits nothing.
// A node with excess load yields a share of its claims: they wait
// YieldDelay, so that the next in rank wins them. It yields YieldPerRun of
// them per run in progress beyond an even share at the instants of the
// peers' heartbeat records (beyond a slack), or per slot it took from the
// order (won at rank ≥ 1, less its rank-0 slots another node won;
// Answered) beyond a slack, YieldPerTaken per slot for its claims at rank
// ≥ 1: the larger of the two. The view of the other
// nodes (SetPeers) comes from their heartbeat records (package registry),
// refreshed every beat; without a view (memory backend, or Redis not read
// yet) a node ranks itself 0 and never waits.
package nodeload

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cronlock/cronlock/config"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxDelay bounds the claim delay of a claim that does not yield.
const MaxDelay = 20 * time.Millisecond

// YieldDelay is the delay of a yielded claim (Enter): after every rank's
// claim of the nodes that do not yield, and after the wake-up lateness of
// a loaded node. 3 nodes on 2 cores with two busy loops woke up to 45 ms
// late for a whole burst (one 102 ms); with yields that waited MaxDelay
// (a build before this one) the node with excess load kept winning the
// late nodes' rank-0 slots and ran 65% of the runs in one run
// (docs/protocol.md, "Who sends first"). Below
// actors.busyWait (100 ms), so that a node at its limit that looks for the
// slot's claim finds a yielded claim that was sent.
const YieldDelay = 50 * time.Millisecond

// LeadStep is the rank-1 claim's delay: the head start of the rank-0
// node. It must exceed how much later one node wakes for a slot than
// another on a loaded host, or the rank-1 node wins the late node's
// slots: 3 nodes on 2 cores with two busy loops woke up to 14 ms apart
// for a whole burst of due jobs (and that node lost a third of its rank-0
// slots with a 5 ms head start); docs/protocol.md, "Who sends first".
const LeadStep = 15 * time.Millisecond

// RankStep is the claim delay of each rank after the first: rank k ≥ 1
// waits LeadStep + (k−1) × RankStep, so ranks 2 and up wait MaxDelay.
// The order among them only matters when ranks 0 and 1 both do not claim.
const RankStep = 5 * time.Millisecond

// PerBurstClaim is the claim delay per rank for every claim of the same
// slot this node sent before (a burst: many jobs due at one instant). The
// rank-0 claims of a burst of b claims per node reach Redis over about b
// × the server's cost of a claim script (34–60 µs on the development
// machine): a rank-k claim waits for them, so that a node that sends its
// burst faster than the others does not win their slots with its rank-1
// claims. Only ranks above 0 wait it.
const PerBurstClaim = 40 * time.Microsecond

// YieldPerRun is the share of its claims a node yields per run of excess
// load (Enter): a yielded claim waits YieldDelay, so that the next node in
// rank wins it. A share, not a longer delay for every claim: all of a
// node's rank-0 claims of a burst would then pass LeadStep together and
// the node would yield the whole burst (and be the least loaded at the
// next one). At 20 rank-0 claims per node and burst it gives back half
// an excess per burst: at 5% per run, with both excess terms added (a
// build before this one), a node yielded all 60 claims of a burst.
const YieldPerRun = 0.025

// LoadSlack is the excess of runs in progress that yields nothing: 1 run
// plus LoadSlackShare of the ranking peers' mean, so that the jitter of an
// even spread yields nothing.
const LoadSlack = 1

// LoadSlackShare is the part of the peers' mean runs in progress that
// LoadSlack adds.
const LoadSlackShare = 0.1

// TakeSlack is the net of taken slots (Answered: claims won at rank ≥ 1
// less rank-0 slots another node's claim came first for) that yields
// nothing, YieldPerTaken the share of its claims at rank ≥ 1 a node yields
// per taken slot beyond it (its rank-0 claims yield YieldPerRun per slot),
// and TakeDecay the time constant over which the net fades. A node that
// woke on time while another woke late took the late node's rank-0 slots
// of a burst; at the next bursts its rank-1 claims wait YieldDelay, so
// that the late node has that long to claim its own, and it gives some of
// its own rank-0 slots to the next in rank. A node at max_parallel that
// does not claim its rank-0 slot gives it too (when another node claimed
// it), so that nodes that take each other's slots in turn are even.
const (
	TakeSlack     = 2
	YieldPerTaken = 0.1
	TakeDecay     = time.Minute
)

// historyMinSpacing and historyMaxSamples bound the history: changes of
// the count closer together than max(historyMinSpacing, its span /
// historyMaxSamples) keep only the later count.
const (
	historyMinSpacing = 10 * time.Millisecond
	historyMaxSamples = 4096
)

// historyKeep is how long this node keeps the record of its runs in
// progress (at least; more when the view of the peers is valid longer):
// a peer's record is compared with this node's count at the instant the
// peer wrote it, and records are up to two beats old.
const historyKeep = 30 * time.Second

// Peer is another live node as the load order sees it: its id, its
// node.tags (which jobs it may run, package targeting) and its runs in
// progress, all jobs together, at At (the write of its last heartbeat
// record, by its clock; zero = now).
type Peer struct {
	ID      string
	Tags    map[string]string
	Running int
	At      time.Time
}

// sample is the node's runs in progress from at on.
type sample struct {
	at time.Time
	n  int
}

// view is the set of live other nodes, sorted by id.
type view struct {
	self  string
	peers []Peer
	until time.Time
}

// Load is the node's run count. It is a small leaf type shared by every
// job actor's run goroutines: its methods are safe for concurrent use and
// never block.
type Load struct {
	max     int  // node.max_parallel; 0 = unlimited
	ordered bool // claims race other nodes' (Redis backend): delay them
	mu      sync.Mutex
	held    int            // reservations: claims in flight plus runs in progress
	running int            // of them, claims won: runs in progress
	view    view           // the other live nodes (SetPeers); zero = unknown
	history []sample       // running since New, oldest first (record)
	jobs    map[string]int // job name → its place among the sorted job names (SetJobs)
	// short holds the jobs whose last recorded run was short (RunTook):
	// their rank-0 claims go by blocks of ShortBlock (ShortTurn).
	short   map[string]struct{}
	scratch []string // Enter's list of the peers that may run the job
	// burstSlot is the slot of the latest ordered Enter and burst how many
	// Enters had that slot (in a row) before it.
	burstSlot int64
	burst     int
	freed     chan struct{} // closed by the next Release; nil until a Freed caller waits
	keepFor   time.Duration // how long the history must reach back: twice the view's validity
	// taken is the net of slots taken from the claim order (Answered),
	// decayed with TakeDecay from takenAt on, within ±takenBound.
	taken   float64
	takenAt time.Time
	gauge   prometheus.Gauge
}

// New returns the load of a node that may have at most maxParallel runs in
// progress (0 = unlimited). ordered turns the claim delay on: claims race
// other nodes' (the Redis backend); a lone node (memory backend) has no
// race to order and never waits (SetPeers is then ignored). reg receives
// cronlock_node_runs_in_progress (nil = not registered).
func New(maxParallel int, ordered bool, reg prometheus.Registerer) *Load {
	l := &Load{max: max(maxParallel, 0), ordered: ordered, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cronlock_node_runs_in_progress",
		Help: "Runs in progress on this node (claims won, not yet released), all jobs together."})}
	l.history = []sample{{at: time.Now()}}
	if reg != nil {
		reg.MustRegister(l.gauge)
	}
	return l
}

// Max is node.max_parallel (0 = unlimited).
func (l *Load) Max() int { return l.max }

// Reserve takes one place for a claim about to be sent and reports whether
// there was one: false when the node holds max_parallel reservations
// already (its runs in progress and the claims in flight), so that a node
// at its limit does not claim. Each true must be followed by one Release.
func (l *Load) Reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserveLocked()
}

// reserveLocked is Reserve with l.mu held.
func (l *Load) reserveLocked() bool {
	if l.max > 0 && l.held >= l.max {
		return false
	}
	l.held++
	return true
}

// Hold takes a place that is a run in progress at once, even at
// max_parallel: for a run whose slot is claimed already and must run (a
// pending slot handed on by a run that held no place). It is followed by
// one Release(true).
func (l *Load) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
	l.running++
	l.record()
}

// TryReserve is Reserve that, when it finds no place, also returns the
// channel the next Release closes, taken under the same lock: a place
// given back between a refused Reserve and a later Freed would wake
// nobody, and the caller would wait for the release after it.
func (l *Load) TryReserve() (ok bool, freed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserveLocked() {
		return true, nil
	}
	return false, l.freedLocked()
}

// Freed returns a channel that is closed by the next Release (TryReserve
// returns it with its refusal).
func (l *Load) Freed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freedLocked()
}

// freedLocked is Freed with l.mu held: the channel is made at its first
// waiter (most releases wake nobody).
func (l *Load) freedLocked() <-chan struct{} {
	if l.freed == nil {
		l.freed = make(chan struct{})
	}
	return l.freed
}

// Won marks a reservation whose claim was won: a run in progress until its
// Release.
func (l *Load) Won() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running++
	l.record()
}

// Release gives back a reservation; won says whether Won was called for it.
// It wakes every Freed waiter.
func (l *Load) Release(won bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
	if l.freed != nil { // made only when waited on: most releases wake nobody
		close(l.freed)
		l.freed = nil
	}
	if won {
		l.running--
		l.record()
	}
}

// record sets the gauge and appends the new count to the history (l.mu
// held). Samples closer than the spacing to the last one replace it, and
// samples older than historyKeep (or the view's validity) go, except the
// newest of them: it holds the count at the start of what is kept.
func (l *Load) record() {
	l.gauge.Set(float64(l.running))
	now := time.Now()
	keep := max(historyKeep, l.keepFor)
	spacing := max(historyMinSpacing, keep/historyMaxSamples)
	if last := &l.history[len(l.history)-1]; len(l.history) > 1 && now.Sub(last.at) < spacing {
		last.n = l.running
	} else {
		l.history = append(l.history, sample{at: now, n: l.running})
	}
	// i is the newest sample at or before the cut.
	if i := l.after(now.Add(-keep)) - 1; i > 0 && i >= len(l.history)/2 { // drop in batches: amortised O(1)
		l.history = append(l.history[:0], l.history[i:]...)
	}
}

// after is the index of the first sample of the history later than t
// (len when none; l.mu held).
func (l *Load) after(t time.Time) int {
	i, _ := slices.BinarySearchFunc(l.history, t, func(s sample, t time.Time) int {
		if s.at.After(t) {
			return 1
		}
		return -1
	})
	return i
}

// countAt is the node's runs in progress at t by its history (l.mu held):
// the current count for t from now on, the oldest kept for t before it
// (0 before New).
func (l *Load) countAt(t time.Time) int {
	if i := l.after(t); i > 0 {
		return l.history[i-1].n
	}
	return l.history[0].n
}

// InProgress is the number of runs in progress (claims won, not released).
func (l *Load) InProgress() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// SetPeers replaces the view of the other live nodes: self is this node's
// id, peers the others (an entry with id self is left out), valid for
// validFor from now (after it the view is unknown again: a node whose
// reads of the heartbeat records keep failing stops waiting on a stale
// view). It is called at every heartbeat (package registry) and never
// blocks. peers must not be modified afterwards.
func (l *Load) SetPeers(self string, peers []Peer, validFor time.Duration) {
	v := view{self: self, until: time.Now().Add(validFor)}
	for _, p := range peers {
		if p.ID != self && p.ID != "" {
			v.peers = append(v.peers, p)
		}
	}
	slices.SortFunc(v.peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.view = v
	l.keepFor = 2 * validFor
}

// Enter returns how long to wait before sending the claim of job's slot
// (Unix seconds) and this node's rank in the slot's claim order (-1 when
// there is no order: then the delay is 0); selectors is the job's nodes:
// (package targeting), which decides which peers rank. It never blocks.
//
// This is the one spreading rule (docs/protocol.md): every node ranks the
// live nodes that may run the job by a rendezvous hash of (job, slot,
// node), the same ranking everywhere, and waits RankStep per rank, at most
// MaxDelay. So each node wins about 1/N of the slots while every node is
// up, and a slot whose rank-0 node is down is claimed RankStep later. It
// carries no guarantee: the claim decides (R1). Enter returns 0 and -1
// without ordering (New), without a valid view of the peers (SetPeers) and
// when no peer may run the job.
func (l *Load) Enter(job string, slot int64, selectors []string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := &l.view
	if !l.ordered || len(v.peers) == 0 || !time.Now().Before(v.until) {
		return 0, -1
	}
	l.scratch = l.scratch[:0]
	for _, p := range v.peers {
		if config.SelectorsMatch(selectors, p.Tags) {
			l.scratch = append(l.scratch, p.ID)
		}
	}
	if len(l.scratch) == 0 {
		return 0, -1
	}
	idx, ok := l.jobs[job]
	if !ok {
		idx = int(xxhash.Sum64String(job) >> 1)
	}
	rank := rankOf(job, idx, slot, v.self, l.scratch)
	return min(MaxDelay, RankStep*time.Duration(rank)), rank
}

// Answered reports the answer to a claim sent after Enter, or that one
// was not sent: rank is what Enter returned, won whether the claim won,
// elsewhere whether another node's claim of the slot had come first
// (ClaimedElsewhere; also for a claim this node did not send, at
// max_parallel, when the slot's record shows another node's). A win at
// rank ≥ 1 is a slot taken from the order (+1: the rank-0 node's claim
// was late or not sent), another node's claim first for a rank-0 slot one
// given (−1); other answers (the job's lease held, paused, ...) count
// nothing. Rank -1 is ignored. It never blocks.
func (l *Load) Answered(rank int, won, elsewhere bool) {
	var delta float64
	switch {
	case rank < 0:
		return
	case won && rank > 0:
		delta = 1
	case elsewhere && rank == 0:
		delta = -1
	default:
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.taken = min(takenBound, max(-takenBound, l.takenNow(now)+delta))
	l.takenAt = now
}

// Taken is the net of slots this node took from the claim order
// (Answered), decayed to now: what Enter's second excess term counts
// before TakeSlack. It never blocks.
func (l *Load) Taken() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takenNow(time.Now())
}

// takenBound bounds the net of taken slots either way: past it a node
// yields every claim, and a node that gave that many for a while (it woke
// late) is not owed more than that when it wakes on time again.
const takenBound = TakeSlack + 1/YieldPerTaken

// takenNow is the net of taken slots decayed to now (l.mu held).
func (l *Load) takenNow(now time.Time) float64 {
	if l.taken == 0 {
		return 0
	}
	return l.taken * math.Exp(-float64(now.Sub(l.takenAt))/float64(TakeDecay))
}

// yieldDraw is a uniform number in [0, 1) drawn from job, slot and node:
// whether the node yields this claim (Enter). Successive slots and jobs
// draw independently, so that a node yields the share it should of any
// burst.
func yieldDraw(job string, slot int64, node string) float64 {
	return float64(score(keyHash(job, slot), mix(xxhash.Sum64String(node)))>>11) / (1 << 53)
}

// SetJobs sets the job names of the configuration (all jobs, also those
// this node's node.tags leave out): a job's place among them, sorted, is
// its index in the claim order (Rank). It is called at the start and at
// every reload and never blocks; a job it does not know is indexed by a
// hash of its name.
func (l *Load) SetJobs(names []string) {
	sorted := slices.Sorted(slices.Values(names))
	m := make(map[string]int, len(sorted))
	for _, n := range slices.Compact(sorted) {
		m[n] = len(m)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = m
	maps.DeleteFunc(l.short, func(job string, _ struct{}) bool { _, ok := m[job]; return !ok })
}

// Short runs share their rank-0 node by blocks (docs/protocol.md, "Short
// runs"). A run that took less than ShortRun (from exec to exit) makes
// its job short, one that took LongRun or more makes it long again
// (RunTook, fed with the job's last recorded run as each claim's answer
// reads it, so that the nodes agree); in between it stays what it was,
// and a job with no run recorded is long. The claims of the short jobs
// whose indexes fall in one block of ShortBlock take rank 0 on the same
// node at each slot (ShortTurn), so that most of an instant's short runs
// start on one node and the others only claim: a node's cost per run is
// mostly the wake-ups of its threads (for the claims' answers, each fork,
// each exit and each finish), and runs that come together share them
// (measured in docs/protocol.md, "Short runs"). The blocks rotate with the
// slot like the jobs' turns, so each node still takes rank 0 for its share
// of the short runs over time; long runs (a node's load while they run)
// are split evenly at every instant, as are jobs with no run recorded.
// Nodes that disagree for a slot (a record written between their claims)
// cost a refused claim or a rank delay, never a second run.
const (
	ShortRun = 250 * time.Millisecond
	LongRun  = time.Second
	// ShortBlock is 100, not 200: with blocks of 200, 3 nodes × 300
	// short jobs every second put 200 forks of one instant on one node of
	// the 2-core development machine, whose runs then outlasted the next
	// slot, and the whole block was skipped overlap (the Cluster topology
	// test, e2e/topology_cluster_test.go, failed 2 of 3 runs). A node
	// forks at most ⌈blocks / nodes⌉ × 100 of an instant's short runs: up
	// to 300 short jobs, no more than the even split's share. Blocks of 50
	// cost 15% more CPU per run at 3 × 200/s (4 sequential pairs), blocks
	// of 100 the same as 200 within the noise.
	ShortBlock = 100
)

// ShortTurn is the turn (Rank's index) of a short job of index idx: its
// block's, offset so that block 0 does not always share the rank-0 node of
// the long job of index 0.
func ShortTurn(idx int) int { return idx/ShortBlock + shortTurnOffset }

// shortTurnOffset is an arbitrary offset of the short jobs' turns (see
// ShortTurn): any value works, every node uses the same.
const shortTurnOffset = 1 << 20

// RunTook reports that the last recorded run of job took d from exec to
// the leader's exit (actors.Claim.LastRun): below ShortRun the job's later
// claims are short (its rank-0 node is its block's), from LongRun on they
// are long again. It never blocks.
func (l *Load) RunTook(job string, d time.Duration) {
	short := d < ShortRun
	if !short && d < LongRun {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !short:
		delete(l.short, job)
	case l.short == nil:
		l.short = map[string]struct{}{job: {}}
	default:
		l.short[job] = struct{}{}
	}
}

// Rank is the place of node in the claim order of job's slot (Unix
// seconds) among nodes (ids; node is counted in whether listed or not):
// 0 claims first. index is the job's turn: its place among the sorted job
// names of the configuration (SetJobs), or ShortTurn of it for a short job
// (RunTook). Every node computes the same ranking from
// the same ids, job names and slot:
//
//   - rank 0 is the node at position (index + h(slot)) mod N in the
//     sorted ids, h a 64-bit mix: the jobs due at one instant take turns
//     through the nodes, so a burst of them is split evenly, and each job's
//     slots go to the nodes in a random order;
//   - the other nodes follow by rendezvous hashing of the job, the slot
//     and the node id (highest score first, ties to the lower id), so that
//     the slots of a node that does not claim spread over all the others.
func Rank(job string, index int, slot int64, node string, nodes []string) int {
	others := make([]string, 0, len(nodes))
	for _, id := range nodes {
		if id != node && !slices.Contains(others, id) {
			others = append(others, id)
		}
	}
	slices.Sort(others)
	return rankOf(job, index, slot, node, others)
}

// rankOf is Rank with others: the other nodes' ids, sorted, without self.
func rankOf(job string, index int, slot int64, self string, others []string) int {
	m := uint64(len(others) + 1)
	first := (uint64(index) + mix(uint64(slot))%m) % m // the rank-0 node's position
	pos := uint64(0)                                   // self's position
	for _, id := range others {
		if id < self {
			pos++
		}
	}
	if pos == first {
		return 0
	}
	// The rank-0 node is others[first] when it comes before self, else
	// others[first-1].
	r0 := others[first-min(first, 1)]
	if first < pos {
		r0 = others[first]
	}
	key := keyHash(job, slot)
	mine := score(key, xxhash.Sum64String(self))
	rank := 1
	for _, id := range others {
		if id != r0 && outranks(key, mine, self, id, xxhash.Sum64String(id)) {
			rank++
		}
	}
	return rank
}

// keyHash digests a (job, slot) pair.
func keyHash(job string, slot int64) uint64 {
	return mix(xxhash.Sum64String(job) ^ mix(uint64(slot)))
}

// outranks reports whether node other (id hash otherH) comes before this
// node (id self, score mine) in the claim order of key: a higher score,
// or the same score and a lower id.
func outranks(key, mine uint64, self, other string, otherH uint64) bool {
	s := score(key, otherH)
	return s > mine || s == mine && other < self
}

// score is a node's rendezvous weight for a (job, slot) key: a bijective
// mix of both hashes, so that the order of the nodes is independent from
// one key to the next.
func score(key, node uint64) uint64 {
	return mix(key ^ node)
}

// mix is the 64-bit finalizer of SplitMix64: every input bit changes each
// output bit with probability about 1/2.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
