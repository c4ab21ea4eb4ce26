// Package nodeload counts the runs in progress on this node, enforces
// node.max_parallel, and orders the nodes' claims without coordination
// (docs/protocol.md, "Who sends first"). For every (job, slot) each node
// ranks the live nodes that may run the job by rendezvous hashing of the
// job name, the slot and the node id (Rank): every node computes the same
// ranking from the same view of the live nodes. Rank 0 sends its claim at
// once, rank k after k × (RankStep + PerBurstClaim per claim of the same
// slot this node sent before), plus PerRun for every run in progress
// it has beyond the other nodes' mean (with a slack), at most MaxDelay in
// all. So each node wins about 1/N of the slots, a busy node yields its
// slots to the next in rank, and the winning claim of an idle rank-0 node
// waits nothing. The view of the other nodes (SetPeers) comes from their
// heartbeat records (package registry), refreshed every beat; without a
// view (memory backend, or Redis not read yet) a node ranks itself 0 and
// never waits.
package nodeload

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cronlock/cronlock/config"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxDelay bounds the claim delay.
const MaxDelay = 20 * time.Millisecond

// RankStep is the claim delay per rank: more than a claim's round trip to
// a loaded Redis on loopback plus the fire jitter of a loaded node, so
// that the rank-0 node's claim arrives first when it is sent (at 3 ms, on
// 2 loaded cores, the rank-1 node won about 5% of the slots that ran).
// Ranks 4 and up all wait MaxDelay.
const RankStep = 5 * time.Millisecond

// PerBurstClaim is the claim delay per rank for every claim of the same
// slot this node sent before (a burst: many jobs due at one instant). The
// rank-0 claims of a burst of b claims per node reach Redis over about b
// × the server's cost of a claim script (34–60 µs on the development
// machine): a rank-k claim waits for them, so that a node that sends its
// burst faster than the others does not win their slots with its rank-1
// claims. Only ranks above 0 wait it.
const PerBurstClaim = 40 * time.Microsecond

// PerRun is the claim delay per run in progress beyond the other nodes'
// mean plus LoadSlack: a node 4 runs over the slack yields its rank-0
// slots to the rank-1 node (if that one is not over too).
const PerRun = time.Millisecond

// LoadSlack is the excess of runs in progress that costs no delay: 2 runs
// plus a quarter of the other nodes' mean, so that the usual jitter of an
// even spread (and heartbeat records up to a beat old) delays nothing.
const LoadSlack = 2

// Peer is another live node as the load order sees it: its id, its
// node.tags (which jobs it may run, package targeting) and its runs in
// progress, all jobs together, from its last heartbeat record.
type Peer struct {
	ID      string
	Tags    map[string]string
	Running int
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
	jobs    map[string]int // job name → its place among the sorted job names (SetJobs)
	scratch []string       // Enter's list of the peers that may run the job
	// burstSlot is the slot of the latest ordered Enter and burst how many
	// Enters had that slot (in a row) before it.
	burstSlot    int64
	burst        int
	burstRunning int           // running when the burst's first Enter came
	freed        chan struct{} // closed (and replaced) by the next Release
	gauge        prometheus.Gauge
}

// New returns the load of a node that may have at most maxParallel runs in
// progress (0 = unlimited). ordered turns the claim delay on: claims race
// other nodes' (the Redis backend); a lone node (memory backend) has no
// race to order and never waits (SetPeers is then ignored). reg receives
// cronlock_node_runs_in_progress (nil = not registered).
func New(maxParallel int, ordered bool, reg prometheus.Registerer) *Load {
	l := &Load{max: max(maxParallel, 0), ordered: ordered, freed: make(chan struct{}), gauge: prometheus.NewGauge(prometheus.GaugeOpts{
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
	l.gauge.Set(float64(l.running))
}

// Freed returns a channel that is closed by the next Release: a caller
// that Reserve refused waits on it, then tries again.
func (l *Load) Freed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freed
}

// Won marks a reservation whose claim was won: a run in progress until its
// Release.
func (l *Load) Won() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running++
	l.gauge.Set(float64(l.running))
}

// Release gives back a reservation; won says whether Won was called for it.
// It wakes every Freed waiter.
func (l *Load) Release(won bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
	close(l.freed)
	l.freed = make(chan struct{})
	if won {
		l.running--
		l.gauge.Set(float64(l.running))
	}
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
}

// Enter returns how long to wait before sending the claim of job's slot
// (Unix seconds); selectors is the job's nodes: (package targeting), which
// decides which peers rank. The delay is rank × (RankStep + PerBurstClaim
// × the claims of the same slot that entered before it) plus PerRun per
// run in progress beyond the ranking peers' mean plus the slack (LoadSlack
// + mean/4), at most MaxDelay: 0 for the rank-0 node when it is not
// busier than the others. It is 0 without ordering (New), without a valid view
// of the peers (SetPeers) and when no peer may run the job.
func (l *Load) Enter(job string, slot int64, selectors []string) time.Duration {
	d, _ := l.EnterRanked(job, slot, selectors)
	return d
}

// EnterRanked is Enter that also returns this node's rank in the slot's
// claim order (0 = first; also 0 whenever Enter does not rank: without
// ordering, without a valid view of the peers, when no peer may run the
// job). package actors counts the rank-0 claims of an instant in a Burst.
func (l *Load) EnterRanked(job string, slot int64, selectors []string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := &l.view
	if !l.ordered || len(v.peers) == 0 || !time.Now().Before(v.until) {
		return 0, 0
	}
	n, sum := 0, 0
	l.scratch = l.scratch[:0]
	for _, p := range v.peers {
		if config.SelectorsMatch(selectors, p.Tags) {
			n++
			sum += p.Running
			l.scratch = append(l.scratch, p.ID)
		}
	}
	if n == 0 {
		return 0, 0
	}
	idx, ok := l.jobs[job]
	if !ok {
		idx = int(xxhash.Sum64String(job) >> 1)
	}
	rank := rankOf(job, idx, slot, v.self, l.scratch)
	if slot != l.burstSlot {
		l.burstSlot, l.burst = slot, 0
	}
	d := (RankStep + PerBurstClaim*time.Duration(l.burst)) * time.Duration(rank)
	l.burst++
	mean := float64(sum) / float64(n)
	if excess := float64(l.running) - mean - LoadSlack - mean/4; excess > 0 {
		d += time.Duration(excess * float64(PerRun))
	}
	return min(MaxDelay, d), rank
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
}

// Rank is the place of node in the claim order of job's slot (Unix
// seconds) among nodes (ids; node is counted in whether listed or not):
// 0 claims first. index is the job's place among the sorted job names of
// the configuration (SetJobs). Every node computes the same ranking from
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
