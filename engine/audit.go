package engine

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// eventWriter appends to the jobs' event streams (docs/protocol.md,
// "Audited pauses and the event stream"); implemented by the Redis
// backends, and by memControl for the memory backend.
type eventWriter interface {
	AddEvents(ctx context.Context, events map[string][]redislock.Event) error
}

var (
	_ eventWriter = (*redislock.Redis)(nil)
	_ eventWriter = (*redislock.Backend)(nil)
)

// recordTimeout bounds the write of a reload's events.
const recordTimeout = 2 * time.Second

// recordReload appends a reload event (this node, the job's new hash; ""
// for a removed job) to the stream of every job the reload added, changed
// or removed, in one round trip. A failure is logged at warn: the reload
// itself stands.
func (e *Engine) recordReload(ctx context.Context, before, after map[string]string) {
	w, ok := e.backend.Backend.(eventWriter)
	if e.mem != nil {
		w, ok = e.mem, true // the memory backend's trails, in this process
	}
	if !ok {
		return
	}
	now := e.opts.Now().UTC()
	events := map[string][]redislock.Event{}
	for job, h := range after {
		if before[job] != h {
			events[job] = []redislock.Event{{Type: redislock.EventReload, At: now, Node: e.cfg.Node.ID, ConfigHash: h}}
		}
	}
	for job := range before {
		if _, ok := after[job]; !ok {
			events[job] = []redislock.Event{{Type: redislock.EventReload, At: now, Node: e.cfg.Node.ID}}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	if err := w.AddEvents(cctx, events); err != nil {
		e.log.Warn("reload not recorded in the jobs' event streams (cronlock history -events)", zap.Error(err),
			zap.Int("jobs", len(events)))
	}
}

// jobHashes is config.JobHashes of the running configuration.
func (e *Engine) jobHashes() map[string]string { return config.JobHashes(e.cfg.Jobs) }
