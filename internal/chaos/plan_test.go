package chaos

// The fault plan: drawn from the seed alone, so that a failing seed
// replays the same faults at the same offsets.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FaultKind is one kind of fault.
type FaultKind string

const (
	// FaultPause: SIGSTOP the daemon, SIGCONT after Dur (its runs go on).
	FaultPause FaultKind = "pause"
	// FaultKill: SIGKILL the daemon and its runs' process groups (the
	// machine crashed); start it again, same state directory, after Dur.
	FaultKill FaultKind = "kill+restart"
	// FaultPartition: the node's proxy drops every byte both ways for Dur.
	FaultPartition FaultKind = "partition"
	// FaultClock: restart the node (SIGTERM) with its clock shifted by
	// Offset; after Dur restart it with the right clock.
	FaultClock FaultKind = "clock"
	// FaultRedisEmpty: SIGKILL Redis, erase its directory, start it after
	// Dur: every key is gone.
	FaultRedisEmpty FaultKind = "redis-empty"
	// FaultRedisAOF: SIGKILL Redis and start it after Dur from its AOF
	// (appendfsync always): nothing acknowledged is lost.
	FaultRedisAOF FaultKind = "redis-aof"
)

// RedisTarget is the target of the Redis faults.
const RedisTarget = "redis"

// Fault is one fault of a plan, At after the cluster is up.
type Fault struct {
	At, Dur time.Duration
	Kind    FaultKind
	Target  string        // a node id or RedisTarget
	Offset  time.Duration // FaultClock: the node's clock offset
}

func (f Fault) String() string {
	s := fmt.Sprintf("+%6.2fs  %-13s %-6s for %5.2fs", f.At.Seconds(), f.Kind, f.Target, f.Dur.Seconds())
	if f.Kind == FaultClock {
		s += fmt.Sprintf("  offset %v", f.Offset)
	}
	return s
}

// Plan is the cluster and the faults of one seed and length.
type Plan struct {
	Seed    uint64
	Seconds int
	Nodes   []string
	Faults  []Fault
	// Faults start no earlier than Warmup and end no later than Seconds −
	// Quiet: the last Quiet seconds let the cluster settle and account for
	// every slot before the daemons are stopped.
	Warmup, Quiet time.Duration
}

// Plan parameters.
const (
	planWarmup = 5 * time.Second
	planQuiet  = 15 * time.Second
	// MinSeconds is the shortest run that leaves room for faults.
	MinSeconds = 40
)

// kinds and their weights in the draw.
var kinds = []struct {
	kind   FaultKind
	weight int
	// dur is the fault's length: min + rand·spread.
	min, spread time.Duration
	// settle is how long the target stays off limits after the fault ends
	// (a restart's start-up, a graceful stop).
	settle time.Duration
}{
	{FaultPause, 22, 500 * time.Millisecond, 2500 * time.Millisecond, time.Second},
	{FaultKill, 15, 500 * time.Millisecond, 2500 * time.Millisecond, 3 * time.Second},
	{FaultPartition, 20, time.Second, 4 * time.Second, time.Second},
	{FaultClock, 13, 4 * time.Second, 6 * time.Second, 8 * time.Second},
	{FaultRedisEmpty, 12, 0, 2 * time.Second, 3 * time.Second},
	{FaultRedisAOF, 18, 0, 2 * time.Second, 3 * time.Second},
}

// clockOffsets are the offsets of FaultClock: within node.max_clock_skew
// (2 s), beyond it, and the hour fast.
var clockOffsets = []time.Duration{-10 * time.Second, -2500 * time.Millisecond, -800 * time.Millisecond,
	800 * time.Millisecond, 2500 * time.Millisecond, 30 * time.Second, time.Hour}

// NewPlan draws the plan of seed for a run of seconds (at least
// MinSeconds): 3–5 nodes, then faults one after the other, 0.5–4 s apart,
// each on a target that is free (no fault on it, nor settling after one),
// never all nodes at once.
func NewPlan(seed uint64, seconds int) Plan {
	seconds = max(seconds, MinSeconds)
	r := rand.New(rand.NewPCG(seed, 0x63726f6e6c6f636b)) // "cronlock"
	p := Plan{Seed: seed, Seconds: seconds, Warmup: planWarmup, Quiet: planQuiet}
	for i := range 3 + r.IntN(3) {
		p.Nodes = append(p.Nodes, fmt.Sprintf("n%d", i+1))
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	end := time.Duration(seconds)*time.Second - p.Quiet
	busy := map[string]time.Duration{} // target → free again at
	for t := p.Warmup; ; {
		t += 500*time.Millisecond + time.Duration(r.Int64N(int64(3500*time.Millisecond)))
		if t >= end {
			break
		}
		w := r.IntN(total)
		k := kinds[0]
		for _, c := range kinds {
			if w < c.weight {
				k = c
				break
			}
			w -= c.weight
		}
		dur := (k.min + time.Duration(r.Int64N(int64(k.spread)+1))).Round(10 * time.Millisecond)
		pick := r.IntN(len(p.Nodes))
		offset := clockOffsets[r.IntN(len(clockOffsets))]
		if t+dur > end {
			continue
		}
		target := RedisTarget
		if k.kind != FaultRedisEmpty && k.kind != FaultRedisAOF {
			faulted := 0
			for _, n := range p.Nodes {
				if busy[n] > t {
					faulted++
				}
			}
			if faulted >= len(p.Nodes)-1 {
				continue
			}
			// The first free node from the drawn one on.
			target = ""
			for i := range p.Nodes {
				if n := p.Nodes[(pick+i)%len(p.Nodes)]; busy[n] <= t {
					target = n
					break
				}
			}
		}
		if target == "" || busy[target] > t {
			continue
		}
		f := Fault{At: t.Round(10 * time.Millisecond), Dur: dur, Kind: k.kind, Target: target}
		if k.kind == FaultClock {
			f.Offset = offset
		}
		busy[target] = f.At + dur + k.settle
		p.Faults = append(p.Faults, f)
	}
	return p
}

// String is the plan as the test prints it first.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d s, nodes %s; faults from +%v to +%v (offsets from when every node is up):\n",
		p.Seed, p.Seconds, strings.Join(p.Nodes, " "), p.Warmup, time.Duration(p.Seconds)*time.Second-p.Quiet)
	for i, f := range p.Faults {
		fmt.Fprintf(&b, "  %3d  %s\n", i+1, f)
	}
	return b.String()
}
