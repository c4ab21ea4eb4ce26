package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// WarmupRead is how often a starting node reads the other nodes' records
// between its beats, during its first TTL (Heartbeat.Run).
const WarmupRead = time.Second

// Defaults of Options.Every and Options.TTL.
const (
	DefaultHeartbeatEvery = 5 * time.Second
	DefaultTTL            = 3 * DefaultHeartbeatEvery
)

// beatTimeout bounds one beat's round trip (as the health monitor's ping
// is bounded); dropTimeout the deletion of the record at shutdown.
const (
	beatTimeout = time.Second
	dropTimeout = time.Second
	// maxUnsure bounds Heartbeat.unsure: the failed swaps since the last
	// successful one whose values the drop at shutdown also compares (in a
	// longer outage the older ones have expired by then).
	maxUnsure = 4
)

// Record is one daemon process's heartbeat record, the JSON value of
// P node:ID (docs/protocol.md, "The node heartbeat record"), with Jobs
// filled in by a reader (JobsCache.Fill) when the record leaves them out.
type Record struct {
	NodeID    string    `json:"node_id"`
	Instance  string    `json:"instance"` // random UUID, one per daemon process
	Hostname  string    `json:"hostname"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StateDir  string    `json:"state_dir,omitempty"`
	Started   time.Time `json:"started"`   // process start, UTC
	Heartbeat time.Time `json:"heartbeat"` // this write, UTC, by the writer's clock
	// EveryMs is the writer's beat interval and TTLMs how long after
	// Heartbeat the record counts as live, in milliseconds. The key
	// itself expires 2 × TTLMs after the write: in between the node is
	// listed as gone.
	EveryMs int64 `json:"every_ms"`
	TTLMs   int64 `json:"ttl_ms"`
	// ConfigHash digests the whole job configuration (config.ConfigHash of
	// Jobs); Jobs maps every configured job to its config.JobHash.
	// JobsKey says the hashes are in the node's job hashes key
	// P node-jobs:ID (JobHashes): this version writes the record without
	// Jobs, unless a live node of an older cronlock, whose records hold
	// the hashes inline and have no JobsKey, needs to read them there.
	ConfigHash string            `json:"config_hash"`
	Jobs       map[string]string `json:"jobs,omitempty"`
	JobsKey    bool              `json:"jobs_key,omitempty"`
	// Running counts the runs in progress on the node, by job (jobs
	// without runs are absent).
	Running map[string]int64 `json:"running,omitempty"`
	// Tags are the node's node.tags; other nodes read them to tell whether
	// a job's nodes: matches a live node (package cluster).
	Tags map[string]string `json:"tags,omitempty"`
	// Duplicates are the other live daemons found writing this record
	// within the last TTL: the node id is used twice (node.id is not
	// unique). Readers (`cronlock nodes`) flag the node; absent when none.
	Duplicates []Duplicate `json:"duplicates,omitempty"`
}

// Duplicate is another live daemon that wrote a node's heartbeat record:
// what its record said, and when the writer last found it there.
type Duplicate struct {
	Instance string    `json:"instance"`
	Hostname string    `json:"hostname"`
	PID      int       `json:"pid"`
	StateDir string    `json:"state_dir,omitempty"`
	Seen     time.Time `json:"seen"` // UTC, by the writer's clock
}

// Live reports whether the record was written within its TTL before now.
// A record without a TTL (written by an older cronlock) is live for
// DefaultTTL.
func (r Record) Live(now time.Time) bool {
	ttl := time.Duration(r.TTLMs) * time.Millisecond
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return now.Sub(r.Heartbeat) <= ttl
}

// HeartbeatStore keeps heartbeat records, job hashes and the node index;
// implemented by *redislock.Redis (keys P node:ID, P node-jobs:ID and
// P nodes:index).
type HeartbeatStore interface {
	// SwapNode sets node id's record to value with a TTL and returns the
	// value it replaced (nil when none), atomically; with it, it sets the
	// node's job hashes key to jobs with the same TTL, or, when jobs is
	// empty, only extends that key's TTL. kept reports whether the job
	// hashes key holds a value afterwards.
	SwapNode(ctx context.Context, id string, value, jobs []byte, ttl time.Duration) (old []byte, kept bool, err error)
	// DropNode deletes node id's record and job hashes if the record holds
	// exactly one of values.
	DropNode(ctx context.Context, id string, values [][]byte) (bool, error)
	// IndexNode records node id in the node index, written at at.
	IndexNode(ctx context.Context, id string, at time.Time) error
	// UnindexNode removes node id from the node index.
	UnindexNode(ctx context.Context, id string) error
	// Nodes returns every indexed node's record that still exists.
	Nodes(ctx context.Context) ([][]byte, error)
	JobsReader
}

// HeartbeatOptions configure NewHeartbeat. Log, Store and Self (NodeID, Instance) are
// required.
type HeartbeatOptions struct {
	Log   *zap.Logger
	Store HeartbeatStore
	// Registry receives cronlock_node_id_conflict; nil = not registered.
	Registry prometheus.Registerer
	// Self is this process's record; Heartbeat is set on every beat.
	// Self.ConfigHash must be config.ConfigHash(Self.Jobs); "" = computed.
	Self Record
	// Every is the beat interval (default DefaultEvery); TTL the record's
	// time to live (default 3 × Every).
	Every, TTL time.Duration
	// Now is the clock of Record.Heartbeat and of conflict ageing; nil =
	// time.Now.
	Now func() time.Time
	// Running returns the runs in progress on this node by job, read at
	// every beat; nil = none.
	Running func() map[string]int64
	// Peers receives, at every beat whose read of the node list succeeds,
	// the records of the other live nodes (Record.Live) and how long that
	// view stays valid (two beat intervals: one failed read keeps it);
	// nil = not told. It must not block.
	Peers func(others []Record, validFor time.Duration)
}

// Heartbeat is the actor that keeps the record. Create it with New, then
// call Run once.
type Heartbeat struct {
	log        *zap.Logger
	store      HeartbeatStore
	self       Record
	every, ttl time.Duration
	now        func() time.Time
	conflict   prometheus.Gauge
	running    func() map[string]int64
	peers      func([]Record, time.Duration)
	drift      *Detector
	jobs       chan jobsUpdate
	watch      *nodeWatch // the node channel (Announcer)

	// Owned by the Run goroutine.
	written []byte // the value of our last successful swap; nil before the first
	// unsure are the values of the swaps since written that failed: a
	// swap cut off by its timeout or by the stop may still have been
	// applied (the last maxUnsure).
	unsure   [][]byte
	reported map[string]bool      // other instances already logged
	seen     map[string]Duplicate // other live instances → their record, when last found
	// jobsValue is self's JobHashes, encoded once per change; jobsDirty
	// says the next beat writes it (at the start, after SetJobs, after a
	// failed beat that should have, after another instance wrote the
	// record and perhaps the key).
	jobsValue []byte
	jobsDirty bool
	cache     *JobsCache // the other nodes' job hashes, by config hash
	// inline: a live node of an older cronlock reads job hashes only in
	// the records, so ours carry them too (Record.JobsKey); true until
	// listed, the first successful read of the node list (noteInline).
	inline, listed bool
}

// NewHeartbeat returns the actor; it does no I/O.
func NewHeartbeat(o HeartbeatOptions) *Heartbeat {
	if o.Every <= 0 {
		o.Every = DefaultHeartbeatEvery
	}
	if o.TTL <= 0 {
		o.TTL = 3 * o.Every
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Running == nil {
		o.Running = func() map[string]int64 { return nil }
	}
	if o.Peers == nil {
		o.Peers = func([]Record, time.Duration) {}
	}
	o.Self.EveryMs, o.Self.TTLMs = o.Every.Milliseconds(), o.TTL.Milliseconds()
	log := o.Log.With(zap.String("node_id", o.Self.NodeID))
	h := &Heartbeat{log: log, store: o.Store, self: o.Self, running: o.Running, peers: o.Peers, drift: NewDetector(log, o.Registry),
		jobs: make(chan jobsUpdate), every: o.Every, ttl: o.TTL, now: o.Now, reported: map[string]bool{}, seen: map[string]Duplicate{},
		cache: NewJobsCache(), inline: true, watch: &nodeWatch{heard: make(chan struct{}, 1)},
		conflict: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_node_id_conflict",
			Help: "1 while another live daemon writes this node's heartbeat record (node.id is not unique), else 0."})}
	if o.Registry != nil {
		o.Registry.MustRegister(h.conflict)
	}
	h.setJobs(o.Self.Jobs, o.Self.ConfigHash)
	return h
}

// setJobs makes jobs (config hash hash; "" = computed) self's job hashes,
// encodes them for the job hashes key once and marks them to be written.
func (h *Heartbeat) setJobs(jobs map[string]string, hash string) {
	if jobs == nil {
		jobs = map[string]string{}
	}
	if hash == "" {
		hash = config.ConfigHash(jobs)
	}
	h.self.Jobs, h.self.ConfigHash, h.self.JobsKey = jobs, hash, true
	v, err := json.Marshal(JobHashes{ConfigHash: hash, Jobs: jobs})
	if err != nil {
		panic(err) // cannot happen: a map of strings
	}
	h.jobsValue, h.jobsDirty = v, true
	h.cache.Own(hash, jobs)
}

// Run beats at once and then every Every until ctx ends; then it deletes
// the record if it still holds one of our writes (a clean stop leaves no
// record for the next start to wonder about) and returns nil. A failed
// beat is logged at debug (the health monitor reports Redis outages) and
// retried at the next tick.
//
// With an Announcer store it announces the node after its first record
// is written and after the record's deletion, and reads the other nodes'
// records (between beats, without writing) when another node announces
// itself, so that a node started together with others sees them for the
// claim order (Options.Peers) within a round trip instead of a beat.
// While it is not subscribed to the announcements (another store, Redis
// refused or lost the subscription) it reads them every WarmupRead during
// its first TTL instead.
func (h *Heartbeat) Run(ctx context.Context) error {
	if a, ok := h.store.(Announcer); ok {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); h.watchNodes(wctx, a) }()
		defer func() { stop(); <-done }()
	}
	t := time.NewTicker(h.every)
	defer t.Stop()
	// The warm-up reads, every WarmupRead until warmEnd while not
	// subscribed (warm is nil while subscribed and after warmEnd).
	var warm *time.Ticker
	var warmC <-chan time.Time
	warmEnd := time.After(h.ttl)
	setWarm := func() {
		switch on := warmEnd != nil && !h.watch.subscribed.Load(); {
		case on && warm == nil:
			warm = time.NewTicker(WarmupRead)
			warmC = warm.C
		case !on && warm != nil:
			warm.Stop()
			warm, warmC = nil, nil
		}
	}
	setWarm()
	defer func() {
		if warm != nil {
			warm.Stop()
		}
	}()
	for {
		h.beat(ctx)
		for next := false; !next; {
			select {
			case <-ctx.Done():
				h.drop(ctx)
				return nil
			case <-t.C:
				next = true
			case u := <-h.jobs:
				h.setJobs(u.jobs, u.hash)
				t.Reset(h.every)
				next = true
			case <-warmC:
				h.readPeers(ctx)
			case <-h.watch.heard:
				setWarm()
				if h.watch.subscribed.Load() {
					h.readPeers(ctx) // an announcement, or the subscription confirmed
				}
			case <-warmEnd:
				warmEnd = nil
				setWarm()
			}
		}
	}
}

// jobsUpdate is SetJobs' message: the new job configuration.
type jobsUpdate struct {
	jobs map[string]string
	hash string
}

// SetJobs replaces the record's job hashes (job name → config.JobHash) and
// config hash (config.ConfigHash of jobs; "" = computed) after a reload;
// the actor writes the record and the job hashes key and compares them
// with the other nodes at once. It blocks until the actor took the
// update or ctx ends (then it returns ctx.Err()). jobs must not be
// modified afterwards.
func (h *Heartbeat) SetJobs(ctx context.Context, jobs map[string]string, hash string) error {
	select {
	case h.jobs <- jobsUpdate{jobs: jobs, hash: hash}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beat swaps the record (and writes the job hashes key when they are
// dirty, or extends its TTL) and checks the record it replaced.
func (h *Heartbeat) beat(ctx context.Context) {
	if !h.listed {
		h.listOlder(ctx)
	}
	rec := h.self
	rec.Heartbeat = h.now().UTC()
	rec.Running = h.running()
	rec.Duplicates = h.duplicates()
	if !h.inline {
		rec.Jobs = nil // in P node-jobs:ID
	}
	value, err := json.Marshal(rec)
	if err != nil {
		h.log.Error("heartbeat record not encodable", zap.Error(err)) // cannot happen: plain fields
		return
	}
	cctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	// The key outlives the TTL by one more TTL: in between, the node list
	// shows the node as gone.
	var jobs []byte
	if h.jobsDirty {
		jobs = h.jobsValue
	}
	old, kept, err := h.store.SwapNode(cctx, h.self.NodeID, value, jobs, 2*h.ttl)
	if err != nil {
		h.log.Debug("heartbeat not written", zap.Error(err))
		if len(h.unsure) == maxUnsure {
			h.unsure = h.unsure[1:]
		}
		h.unsure = append(h.unsure, value)
		return
	}
	h.jobsDirty, h.unsure = false, nil
	if !kept {
		// The job hashes key was gone (expired while Redis was out of
		// reach, flushed, lost in a failover, dropped by another instance
		// of this node id): write it again now, with the record.
		if _, _, err := h.store.SwapNode(cctx, h.self.NodeID, value, h.jobsValue, 2*h.ttl); err != nil {
			h.jobsDirty = true
			h.log.Debug("node job hashes not written", zap.Error(err))
		} else {
			h.log.Debug("node job hashes written again: the key was gone")
		}
	}
	first, prev := h.written == nil, h.written
	h.written = value
	if !first && bytes.Equal(old, prev) {
		// It replaced our own last write: nothing to check, and no need to
		// decode it.
		h.log.Debug("heartbeat")
	} else {
		h.check(old, first)
	}
	h.age()
	h.compare(cctx, rec.Heartbeat)
	if first {
		h.announce(cctx) // written and indexed: the others read it now
	}
}

// check reports the record we replaced when another live instance wrote
// it (any beat after our first successful one).
func (h *Heartbeat) check(old []byte, first bool) {
	var o Record
	if old != nil {
		if err := json.Unmarshal(old, &o); err != nil || o.Instance == "" {
			h.log.Warn("replaced an unreadable node heartbeat record; another program or cronlock version "+
				"writes this key", zap.ByteString("value", old))
			return
		}
	}
	other := old != nil && o.Instance != h.self.Instance
	switch {
	case first && other:
		h.log.Info("node heartbeat record written; it replaced the record of another instance, usually this "+
			"node's previous run: a live one is reported at the next beat", zap.String("instance", h.self.Instance),
			zap.String("previous_instance", o.Instance), zap.String("previous_hostname", o.Hostname),
			zap.Int("previous_pid", o.PID), zap.Time("previous_heartbeat", o.Heartbeat))
	case first:
		h.log.Info("node heartbeat record written", zap.String("instance", h.self.Instance))
	case other:
		h.conflictWith(o)
		h.jobsDirty = true // it may have written its own job hashes too
	default:
		h.log.Debug("heartbeat")
	}
}

// conflictWith records a live other instance o; it is logged the first
// time.
func (h *Heartbeat) conflictWith(o Record) {
	h.seen[o.Instance] = Duplicate{Instance: o.Instance, Hostname: o.Hostname, PID: o.PID, StateDir: o.StateDir, Seen: h.now().UTC()}
	h.conflict.Set(1)
	if h.reported[o.Instance] {
		return
	}
	h.reported[o.Instance] = true
	h.log.Error("duplicate node id: another live cronlock daemon uses this node.id; node.id must be unique "+
		"per daemon: set a different node.id on one of them (or leave node.id unset on both for the per-machine default)",
		zap.String("instance", h.self.Instance), zap.String("other_instance", o.Instance),
		zap.String("other_hostname", o.Hostname), zap.Int("other_pid", o.PID),
		zap.String("other_state_dir", o.StateDir), zap.String("other_version", o.Version),
		zap.Time("other_started", o.Started))
}

// age forgets other instances not found for a TTL; when none is left the
// conflict is over.
func (h *Heartbeat) age() {
	if len(h.seen) == 0 {
		return
	}
	for inst, d := range h.seen {
		if h.now().Sub(d.Seen) > h.ttl {
			delete(h.seen, inst)
			delete(h.reported, inst) // a later conflict with it is a new one
			h.log.Info("duplicate node id: the other instance has not written the heartbeat record for a TTL; "+
				"conflict over", zap.String("other_instance", inst), zap.Duration("ttl", h.ttl))
		}
	}
	if len(h.seen) == 0 {
		h.conflict.Set(0)
	}
}

// duplicates lists the other live instances found writing the record
// within a TTL (h.seen), by instance; nil when none.
func (h *Heartbeat) duplicates() []Duplicate {
	if len(h.seen) == 0 {
		return nil
	}
	out := make([]Duplicate, 0, len(h.seen))
	for _, d := range h.seen {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Duplicate) int { return strings.Compare(a.Instance, b.Instance) })
	return out
}

// drop deletes our record at shutdown if it still holds our last
// successful write or one of the failed ones after it: a beat cut off by
// the stop (or its timeout) after Redis applied it leaves a value the
// last successful write is not, and the node would be listed live for a
// TTL after a clean stop.
func (h *Heartbeat) drop(ctx context.Context) {
	values := h.unsure
	if h.written != nil {
		values = append(values, h.written)
	}
	if len(values) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	dropped, err := h.store.DropNode(cctx, h.self.NodeID, values)
	if err != nil {
		h.log.Debug("heartbeat record not deleted; it expires by its TTL", zap.Error(err), zap.Duration("ttl", h.ttl))
		return
	}
	if dropped {
		if err := h.store.UnindexNode(cctx, h.self.NodeID); err != nil {
			h.log.Debug("node not removed from the node index; readers skip its missing record", zap.Error(err))
		}
		h.announce(cctx) // the others drop it from the claim order now
	}
}
