package cluster

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cronlock/cronlock/config"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxDelay bounds the claim delay (Enter): ranks 4 and up wait it.
const MaxDelay = 4 * RankStep

// RankStep is the claim delay per rank: rank k waits k × RankStep, at
// most MaxDelay. A slot whose rank-0 node does not claim (down, paused,
// at max_parallel) is claimed RankStep later by the next in rank. It must
// exceed how late a loaded node's rank-0 claim leaves after the fire
// (scheduling, the fire of the other jobs due at the same instant), or the
// next in rank wins the slot and the spread drifts toward the least loaded
// node; it costs nothing to a slot whose rank-0 node claims.
const RankStep = 20 * time.Millisecond

// Peer is another live node as the claim order sees it: its id and its
// node.tags (which jobs it may run, package cluster). Running and At
// (its runs in progress at the write of its last heartbeat record) are
// carried from the record; the claim order does not use them.
type Peer struct {
	ID      string
	Tags    map[string]string
	Running int
	At      time.Time
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
	held    int                    // reservations: claims in flight plus runs in progress
	running int                    // of them, claims won: runs in progress
	view    view                   // the other live nodes (SetPeers); zero = unknown
	jobs    map[string]int         // job name → its place among the sorted job names (SetJobs)
	scratch []string               // Enter's list of the peers that may run the job
	freed   chan struct{}          // closed by the next Release; nil until a Freed caller waits
	firsts  map[int64]*firstClaims // slot → this node's rank-0 claims of it in flight (FirstSent)
	gauge   prometheus.Gauge
}

// NewLoad returns the load of a node that may have at most maxParallel runs in
// progress (0 = unlimited). ordered turns the claim delay on: claims race
// other nodes' (the Redis backend); a lone node (memory backend) has no
// race to order and never waits (SetPeers is then ignored). reg receives
// cronlock_node_runs_in_progress (nil = not registered).
func NewLoad(maxParallel int, ordered bool, reg prometheus.Registerer) *Load {
	l := &Load{max: max(maxParallel, 0), ordered: ordered, gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cronlock_node_runs_in_progress",
		Help: "Runs in progress on this node (claims won, not yet released), all jobs together."})}
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

// record sets the gauge to the runs in progress (l.mu held).
func (l *Load) record() { l.gauge.Set(float64(l.running)) }

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
// view). It is called at every heartbeat (package cluster) and never
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
}

// Enter returns how long to wait before sending the claim of job's slot
// (Unix seconds) and this node's rank in the slot's claim order (-1 when
// there is no order: then the delay is 0); selectors is the job's nodes:
// (package cluster), which decides which peers rank. It never blocks.
//
// This is the one spreading rule (protocol v2, issue 32): every node
// ranks the live nodes that may run the job (Rank), the same ranking
// everywhere, and waits RankStep per rank, at most MaxDelay. So each node wins about 1/N of the slots while every node is
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

// firstClaims are this node's rank-0 claims of one slot in flight: n of
// them; done is closed when the last is answered.
type firstClaims struct {
	n    int
	done chan struct{}
	last time.Time // the latest FirstSent or FirstAnswered of the slot
}

// FirstSent notes that this node sends a rank-0 claim of slot (Unix
// seconds); FirstAnswered, called once for each, that it was answered or
// failed.
func (l *Load) FirstSent(slot int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.firsts[slot]
	if f == nil {
		if l.firsts == nil {
			l.firsts = map[int64]*firstClaims{}
		}
		f = &firstClaims{done: make(chan struct{})}
		l.firsts[slot] = f
	}
	f.n++
	f.last = time.Now()
}

// FirstAnswered ends one FirstSent of slot.
func (l *Load) FirstAnswered(slot int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.firsts[slot]; f != nil {
		f.last = time.Now()
		if f.n--; f.n == 0 {
			close(f.done)
			delete(l.firsts, slot)
		}
	}
}

// SettleStall is how long a wait on Settled goes on while none of the
// node's rank-0 claims of the slot is sent or answered: Redis is then not
// answering this node (an outage, not a herd, whose answers keep coming),
// and waiting longer would only move the lower-ranked claim later.
const SettleStall = 10 * RankStep

// StallIn is how long until this node's rank-0 claims of slot in flight
// count as stalled (SettleStall after the latest was sent or answered; 0
// or less: stalled now); ok is false when none is in flight.
func (l *Load) StallIn(slot int64) (in time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.firsts[slot]
	if f == nil {
		return 0, false
	}
	return SettleStall - time.Since(f.last), true
}

// Settled returns a channel that is closed once this node has no rank-0
// claim of slot in flight (closed already when it has none).
//
// What it is for: at one instant every node sends its rank-0 claims at
// once, over the same Redis, and its lower-ranked claims RankStep later.
// When Redis answers more slowly than that (a herd of jobs due at one
// instant), the lower-ranked claims reach Redis among the rank-0 claims
// and each costs Redis a script call that loses (about half a won claim's
// cost, docs/protocol.md) while the won claims wait behind it. A
// lower-ranked claim therefore waits until this node's own rank-0 claims
// of the slot are answered: the other nodes sent theirs at the same time,
// so by then Redis has mostly answered those too, and the lower-ranked
// claim reads the record (ledger.Peeker) instead of losing a script call.
// It carries no guarantee (the claim decides, R1); the caller bounds the
// wait so that its claim still reaches Redis within the slot's answer
// window (actors, run.peek; docs/protocol.md, "Claim order").
func (l *Load) Settled(slot int64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.firsts[slot]; f != nil {
		return f.done
	}
	return closedChan
}

// closedChan is a closed channel (Settled with nothing to wait for).
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
}

// Rank is the place of node in the claim order of job's slot (Unix
// seconds) among nodes (ids; node is counted in whether listed or not):
// 0 claims first. index is the job's turn: its place among the sorted job
// names of the configuration (SetJobs). Every node computes the same ranking from
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
