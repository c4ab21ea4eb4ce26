package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
)

// The memory backend's control state (docs/architecture.md, "Control
// plane"): what `cronlock status`, `history`, `pause`, `resume` and
// `nodes` and the HTTP API read and change on a daemon without Redis. The
// backend (memory.Memory) keeps each job's paused flag, which its claims
// obey, in its state file; memControl keeps over it what Redis keeps in a
// job's pause key and event stream: who paused, when, why and until (the
// pause lifts itself at its end, by a timer), in the state file
// MemoryPausesFile, and the job's recent events in this process only.

// MemoryPausesFile is the file in the node's state directory that keeps
// the memory backend's pause records (memControl).
const MemoryPausesFile = "memory-pauses.json"

// memEventsLen is how many events memControl keeps per job.
const memEventsLen = 100

// memPausesFile is the JSON layout of MemoryPausesFile.
type memPausesFile struct {
	Pauses map[string]ledger.Pause `json:"pauses"`
}

// memControl is the memory backend's side of the control plane; it
// implements api.Store. Safe for concurrent use.
type memControl struct {
	m     *memory.Memory
	state *statedir.Dir // nil: pause records are not kept (engine tests)
	log   *zap.Logger
	now   func() time.Time
	self  func() cluster.Record // this daemon's node record (Nodes)

	mu     sync.Mutex
	pauses map[string]ledger.Pause // jobs paused through memControl
	timers map[string]*time.Timer  // the end of each pause that has one
	events map[string][]redislock.Event
	closed bool
}

var (
	_ api.Store   = (*memControl)(nil)
	_ eventWriter = (*memControl)(nil)
)

// newMemControl returns the control state over m: the pause records kept
// in state are loaded; a pause whose end has passed is lifted, and the
// others get their timer. A file that cannot be read or decoded is an
// error naming it.
func newMemControl(m *memory.Memory, state *statedir.Dir, log *zap.Logger, now func() time.Time,
	self func() cluster.Record) (*memControl, error) {
	c := &memControl{m: m, state: state, log: log, now: now, self: self, pauses: map[string]ledger.Pause{},
		timers: map[string]*time.Timer{}, events: map[string][]redislock.Event{}}
	if state == nil {
		return c, nil
	}
	data, err := state.ReadFile(MemoryPausesFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("memory backend pause file: %w", err)
	}
	var f memPausesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("memory backend pause file %s: %w; it holds who paused which job and until when: "+
			"fix it, or delete it (paused jobs then stay paused, without their details and end, until resumed)",
			filepath.Join(state.Path(), MemoryPausesFile), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	for job, p := range f.Pauses {
		if !p.Until.IsZero() && !p.Until.After(now()) {
			if err := m.Resume(ctx, job); err != nil {
				return nil, err
			}
			log.Info("pause ended while the daemon was stopped: lifted", zap.String("job", job), zap.Time("until", p.Until))
			continue
		}
		if err := m.Pause(ctx, job); err != nil { // the flag is written after the record: make sure
			return nil, err
		}
		c.pauses[job] = p
		c.arm(job, p)
	}
	if len(c.pauses) != len(f.Pauses) {
		if err := c.save(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ApplyMemoryPauses brings m, a memory backend opened on state by another
// process than the daemon (`cronlock run` while no daemon runs), up to
// date with the pause records the daemon keeps there: a pause whose end
// passed while the daemon was stopped is lifted, as the daemon would at
// its start.
func ApplyMemoryPauses(m *memory.Memory, state *statedir.Dir) error {
	c, err := newMemControl(m, state, zap.NewNop(), time.Now, func() cluster.Record { return cluster.Record{} })
	if err != nil {
		return err
	}
	c.close()
	return nil
}

// close stops the pause timers.
func (c *memControl) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, t := range c.timers {
		t.Stop()
	}
}

// save writes the pause records to the state directory. c.mu must be held.
func (c *memControl) save() error {
	if c.state == nil {
		return nil
	}
	data, _ := json.Marshal(memPausesFile{Pauses: c.pauses}) // plain fields: cannot fail
	if err := c.state.WriteFile(MemoryPausesFile, data); err != nil {
		return fmt.Errorf("memory backend pause file: %w", err)
	}
	return nil
}

// arm starts the timer that lifts job's pause p at its end (none without
// one), replacing any earlier timer. c.mu must be held.
func (c *memControl) arm(job string, p ledger.Pause) {
	if t := c.timers[job]; t != nil {
		t.Stop()
		delete(c.timers, job)
	}
	if p.Until.IsZero() {
		return
	}
	c.timers[job] = time.AfterFunc(p.Until.Sub(c.now()), func() { c.lift(job, p) })
}

// lift ends job's pause p at its end, unless it was replaced or resumed
// meanwhile. No event is written: api.Events derives the
// auto_resume row from the pause event, as for Redis, whose pause key
// expires by itself.
func (c *memControl) lift(job string, p ledger.Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.pauses[job]; !ok || c.closed || !cur.At.Equal(p.At) || !cur.Until.Equal(p.Until) {
		return
	}
	delete(c.pauses, job)
	delete(c.timers, job)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.m.Resume(ctx, job)
	if err == nil {
		err = c.save()
	}
	if err != nil {
		c.log.Error("pause end: could not lift the pause; cronlock resume lifts it", zap.String("job", job), zap.Error(err))
		return
	}
	c.log.Info("pause ended", zap.String("job", job), zap.Time("until", p.Until))
}

// State returns the backend's state of job with its pause record (an
// empty one for a job paused without one).
func (c *memControl) State(ctx context.Context, job string) (ledger.JobState, error) {
	st, err := c.m.State(ctx, job)
	if err != nil || !st.Paused {
		return st, err
	}
	c.mu.Lock()
	p := c.pauses[job]
	c.mu.Unlock()
	st.Pause = &p
	return st, nil
}

// Occurrences returns the backend's ledger records of job.
func (c *memControl) Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	return c.m.Occurrences(ctx, job, from, to)
}

// History returns the backend's run records of job.
func (c *memControl) History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error) {
	return c.m.History(ctx, job, n)
}

// Events returns job's last n events, newest first.
func (c *memControl) Events(ctx context.Context, job string, n int) ([]redislock.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	evs := c.events[job]
	out := make([]redislock.Event, 0, min(n, len(evs)))
	for i := len(evs) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, evs[i])
	}
	return out, nil
}

// AddEvents appends events (a reload's) to their jobs' trails.
func (c *memControl) AddEvents(_ context.Context, events map[string][]redislock.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for job, evs := range events {
		for _, e := range evs {
			c.addEvent(job, e)
		}
	}
	return nil
}

// addEvent appends e to job's trail, keeping the last memEventsLen; its ID
// is its time in milliseconds and a sequence number, as Redis stream ids.
// c.mu must be held.
func (c *memControl) addEvent(job string, e redislock.Event) {
	evs := c.events[job]
	seq := 0
	ms := e.At.UnixMilli()
	if len(evs) > 0 {
		var lastMs int64
		var lastSeq int
		if _, err := fmt.Sscanf(evs[len(evs)-1].ID, "%d-%d", &lastMs, &lastSeq); err == nil && lastMs >= ms {
			ms, seq = lastMs, lastSeq+1
		}
	}
	e.ID = fmt.Sprintf("%d-%d", ms, seq)
	if len(evs) == memEventsLen {
		evs = slices.Delete(evs, 0, 1)
	}
	c.events[job] = append(evs, e)
}

// PauseFor pauses job with p as its record (who, when, why, until) and
// appends a pause event, as Redis.PauseFor: the record is written to the
// state directory first, then the backend's paused flag; a pause with an
// end lifts itself then. A new pause replaces the previous one.
func (c *memControl) PauseFor(ctx context.Context, job string, p ledger.Pause) error {
	if !p.Until.IsZero() && !p.Until.After(p.At) {
		return fmt.Errorf("pause %q: end %s is not after %s", job, p.Until.Format(time.RFC3339), p.At.Format(time.RFC3339))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.pauses[job]
	c.pauses[job] = p
	if err := c.save(); err != nil {
		if had {
			c.pauses[job] = old
		} else {
			delete(c.pauses, job)
		}
		return fmt.Errorf("pause %q: %w", job, err)
	}
	if err := c.m.Pause(ctx, job); err != nil {
		return err
	}
	c.arm(job, p)
	c.addEvent(job, redislock.Event{Type: redislock.EventPause, At: p.At, By: p.By, Note: p.Note, Until: p.Until})
	return nil
}

// ResumeBy lifts job's pause and appends a resume event naming by, as
// Redis.ResumeBy: it returns the pause it lifted (an empty record for a
// job paused without one), nil when the job was not paused. The record is
// deleted from the state directory first, then the backend's flag.
func (c *memControl) ResumeBy(ctx context.Context, job, by string, at time.Time) (*ledger.Pause, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.m.State(ctx, job)
	if err != nil {
		return nil, err
	}
	old, had := c.pauses[job]
	if had {
		delete(c.pauses, job)
		if err := c.save(); err != nil {
			c.pauses[job] = old
			return nil, fmt.Errorf("resume %q: %w", job, err)
		}
	}
	if err := c.m.Resume(ctx, job); err != nil {
		return nil, err
	}
	c.arm(job, ledger.Pause{})
	c.addEvent(job, redislock.Event{Type: redislock.EventResume, At: at, By: by})
	if !st.Paused && !had {
		return nil, nil
	}
	return &old, nil
}

// Nodes returns this daemon's node record, the only node of the memory
// backend.
func (c *memControl) Nodes(ctx context.Context) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := json.Marshal(c.self())
	if err != nil {
		return nil, err
	}
	return [][]byte{v}, nil
}

// NodeJobs returns nothing: the node record holds its job hashes.
func (c *memControl) NodeJobs(context.Context, []string) ([][]byte, error) { return nil, nil }
