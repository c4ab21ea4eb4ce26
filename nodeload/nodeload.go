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

// PerWin is the claim delay per claim won beyond this node's fair share
// plus WinSlack. The fair share is 1/n of the recent slots that some node
// won for a run among the n nodes that ranked (Decided: the claims this
// node won, and those it lost to another node's run), over about the last
// WinWindow of them: a node 4 wins ahead yields its rank-0 slots to the
// rank-1 node. The ranks alone spread the runs evenly only at random
// (±3.5% per node over 180 runs); this evens the counts out.
const PerWin = time.Millisecond

// WinSlack is the excess of claims won that costs no delay.
const WinSlack = 1

// WinWindow is about how many of the latest decided claims the excess
// covers: both counts decay by 1 - 1/WinWindow at each.
const WinWindow = 256

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

// view is the set of live other nodes, with their ids' hashes.
type view struct {
	self   string
	selfH  uint64
	peers  []Peer
	hashes []uint64
	until  time.Time
}

// Load is the node's run count. It is a small leaf type shared by every
// job actor's run goroutines: its methods are safe for concurrent use and
// never block.
type Load struct {
	max     int  // node.max_parallel; 0 = unlimited
	ordered bool // claims race other nodes' (Redis backend): delay them
	mu      sync.Mutex
	held    int           // reservations: claims in flight plus runs in progress
	running int           // of them, claims won: runs in progress
	view    view          // the other live nodes (SetPeers); zero = unknown
	// burstSlot is the slot of the latest ordered Enter and burst how many
	// Enters had that slot (in a row) before it.
	burstSlot int64
	burst     int
	// wins and fair (Decided) decay by 1 - 1/WinWindow at each decided
	// claim: wins counts the claims won, fair adds 1/n per decided claim
	// ranked among n nodes. wins - fair is the excess of claims won.
	wins, fair float64
	freed   chan struct{} // closed (and replaced) by the next Release
	gauge   prometheus.Gauge
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
	v := view{self: self, selfH: xxhash.Sum64String(self), until: time.Now().Add(validFor)}
	for _, p := range peers {
		if p.ID != self && p.ID != "" {
			v.peers = append(v.peers, p)
			v.hashes = append(v.hashes, xxhash.Sum64String(p.ID))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.view = v
}

// Enter returns how long to wait before sending the claim of job's slot
// (Unix seconds); selectors is the job's nodes: (package targeting), which
// decides which peers rank. The delay is rank × (RankStep + PerBurstClaim
// × the claims of the same slot that entered before it) plus PerRun per
// run in progress beyond the ranking peers' mean plus the slack (LoadSlack
// + mean/4), plus PerWin per claim won beyond the fair share plus
// WinSlack (Decided), at most MaxDelay: 0 for the rank-0 node when it is
// neither busier than the others nor ahead of its share. It is 0 without ordering (New), without a valid view
// of the peers (SetPeers) and when no peer may run the job.
func (l *Load) Enter(job string, slot int64, selectors []string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := &l.view
	if !l.ordered || len(v.peers) == 0 || !time.Now().Before(v.until) {
		return 0
	}
	key := keyHash(job, slot)
	mine := score(key, v.selfH)
	rank, n, sum := 0, 0, 0
	for i, p := range v.peers {
		if !config.SelectorsMatch(selectors, p.Tags) {
			continue
		}
		n++
		sum += p.Running
		if outranks(key, mine, v.self, p.ID, v.hashes[i]) {
			rank++
		}
	}
	if n == 0 {
		return 0
	}
	if slot != l.burstSlot {
		l.burstSlot, l.burst = slot, 0
	}
	d := (RankStep + PerBurstClaim*time.Duration(l.burst)) * time.Duration(rank)
	l.burst++
	if ahead := l.wins - l.fair - WinSlack; ahead > 0 {
		d += time.Duration(ahead * float64(PerWin))
	}
	mean := float64(sum) / float64(n)
	if excess := float64(l.running) - mean - LoadSlack - mean/4; excess > 0 {
		d += time.Duration(excess * float64(PerRun))
	}
	return min(MaxDelay, d)
}

// Decided counts a claim of a job with selectors (its nodes:) whose slot
// some node won for a run: won true when this node won it, false when
// another node did (the claim found the slot claimed and the job's fencing
// token raised). It feeds the excess of claims won (PerWin). It does
// nothing without ordering or without a valid view of the peers, or when
// no peer may run the job.
func (l *Load) Decided(won bool, selectors []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := &l.view
	if !l.ordered || len(v.peers) == 0 || !time.Now().Before(v.until) {
		return
	}
	n := 1
	for _, p := range v.peers {
		if config.SelectorsMatch(selectors, p.Tags) {
			n++
		}
	}
	if n == 1 {
		return
	}
	const decay = 1 - 1.0/WinWindow
	l.wins, l.fair = l.wins*decay, l.fair*decay+1/float64(n)
	if won {
		l.wins++
	}
}

// Rank is the place of node among nodes (ids; node is counted in whether
// listed or not) in the claim order of job's slot (Unix seconds): 0 for
// the node with the highest rendezvous score, which claims first. Every
// node computes the same ranking from the same ids.
func Rank(job string, slot int64, node string, nodes []string) int {
	key := keyHash(job, slot)
	mine := score(key, xxhash.Sum64String(node))
	rank := 0
	for _, id := range nodes {
		if id == node {
			continue
		}
		if outranks(key, mine, node, id, xxhash.Sum64String(id)) {
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
