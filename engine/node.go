package engine

import (
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"os"
	"path/filepath"
	"time"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/statedir"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// What the engine keeps about the node itself: the memory backend's state
// file in the state directory, and the node's heartbeat record in Redis
// (package cluster).

var (
	_ memory.StateStore      = (*statedir.Dir)(nil)
	_ cluster.HeartbeatStore = (*redislock.Redis)(nil)
	_ cluster.HeartbeatStore = (*redislock.Backend)(nil)
)

// persistMemory replaces a fresh memory backend by one persisted in state
// (memory.OpenMemory), so that a restart never re-runs a slot nor
// reuses a fencing token. Other backends, and a nil state (engine tests),
// are returned unchanged. A state file that cannot be used is an error.
func persistMemory(b backend, state *statedir.Dir, log *zap.Logger) (backend, error) {
	if b.kind != "memory" || state == nil {
		return b, nil
	}
	m, err := memory.OpenMemory(state)
	if err != nil {
		return backend{}, err
	}
	b.Backend = m
	log.Info("memory backend state loaded", zap.String("state_file", filepath.Join(state.Path(), memory.MemoryStateFile)))
	return b, nil
}

// newHeartbeat returns the heartbeat actor of this node's record in Redis,
// or nil for the memory backend (one process: no other daemon to clash
// with). Every beat hands the other live nodes to load (the claim order).
func newHeartbeat(cfg *config.Config, b backend, opts Options, reg prometheus.Registerer, running func() map[string]int64,
	load *cluster.Load) (*cluster.Heartbeat, error) {
	if b.kind != "redis" {
		return nil, nil
	}
	store, ok := b.Backend.(cluster.HeartbeatStore)
	if !ok {
		return nil, fmt.Errorf("engine: redis backend %T does not keep node records", b.Backend)
	}
	host, _ := os.Hostname()
	jobs := config.JobHashes(cfg.Jobs)
	self := cluster.Record{NodeID: cfg.Node.ID, Instance: uuid.NewString(), Hostname: host, PID: os.Getpid(),
		Version: opts.Version, Started: time.Now().UTC(), Jobs: jobs, ConfigHash: config.ConfigHash(jobs),
		Tags: cfg.Node.Tags}
	if opts.State != nil {
		self.StateDir = opts.State.Path()
	}
	return cluster.NewHeartbeat(cluster.HeartbeatOptions{Log: opts.Log, Store: store, Registry: reg, Self: self,
		Every: cfg.Node.HeartbeatInterval, Running: running, Peers: func(others []cluster.Record, validFor time.Duration) {
			load.SetPeers(cfg.Node.ID, loadPeers(others), validFor)
		}}), nil
}

// loadPeers turns heartbeat records into the claim order's peers: id,
// node.tags and runs in progress, all jobs together, at the record's write.
func loadPeers(recs []cluster.Record) []cluster.Peer {
	out := make([]cluster.Peer, 0, len(recs))
	for _, r := range recs {
		n := 0
		for _, c := range r.Running {
			n += int(c)
		}
		out = append(out, cluster.Peer{ID: r.NodeID, Tags: r.Tags, Running: n, At: r.Heartbeat})
	}
	return out
}
