package statedir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// SeenCountsName is the file that keeps, for each job, the highest ledger
// seq and run count this node has seen (docs/protocol.md, R5, R6).
const SeenCountsName = "seen-counts.json"

// Seen is one job's highest ledger seq and run count seen by this node.
type Seen struct {
	Seq  int64 `json:"seq"`
	Runs int64 `json:"runs"`
}

// seenFile is SeenCountsName's content. Ledger names the ledger the
// counts were seen in (redis.key_prefix): counts of another ledger would
// "repair" a fresh one: its slots refused state_lost, its max_runs jobs
// refused though they never ran there.
type seenFile struct {
	Version int             `json:"version"`
	Ledger  string          `json:"ledger"`
	Jobs    map[string]Seen `json:"jobs"`
}

// SeenCounts keeps the counts of R5 and R6 across this node's restarts.
// Without them, a node restarted while Redis lost its state claims a job's
// next slot with nothing to detect the loss by: the slot's claim finds the
// lease free though another node's run still goes on (two runs of an
// overlap: skip job at once, chaos seed 16021333915812110740), and a
// max_runs job runs although its count was reached (chaos seed
// 17895812882841228652).
//
// Saw never blocks and never does I/O (it is called from the run path);
// Run writes the file, whole and crash-safe (Dir.WriteFile), one write at
// a time (Flush before an exit shares writeMu with it): within seenEvery
// of a job's first counts or of a rise of runs, and within seenLazy of a
// rise of seq alone. What must hold: every count this node sends with a
// claim after a restart is at least what it had seen before it wrote its
// last file. A seq that lags what the node saw still detects a loss (R5
// compares it with a ledger that starts again from 0); runs, which
// max_runs needs exactly (R6), lag by at most seenEvery plus one write
// (docs/protocol.md, "What stays impossible").
type SeenCounts struct {
	dir    *Dir
	ledger string
	mu     sync.Mutex
	jobs   map[string]Seen
	dirty  bool          // a count rose since the last write
	urgent bool          // of those, a job's first counts or a rise of runs
	wake   chan struct{} // 1-buffered: a count rose
	// writeMu orders whole writes of the file (Run's and a Flush before
	// an exit), so that an older snapshot never replaces a newer one. Saw
	// never takes it.
	writeMu sync.Mutex
}

// seenRetry is how soon Run writes again after a failed write while no
// count rises (a transient full disk must not leave the last count of a
// monthly job in memory until next month).
const seenRetry = 5 * time.Second

// seenEvery is the least time between two writes, and how late a job's
// first counts or a rise of runs is written: it bounds the run count a
// node killed right after a finish can forget.
const seenEvery = 100 * time.Millisecond

// seenLazy is how late a rise of seq alone is written. Every claim raises
// a seq: written at once, the file (with its two fsyncs) cost 200 µs of
// CPU per run at 3 nodes × 50 jobs/s (make bench, against the build that
// wrote max_runs jobs' counts only); a seq that lags still detects a loss.
const seenLazy = 5 * time.Second

// LoadSeenCounts reads the counts dir keeps for ledger (redis.key_prefix).
// A missing file is no error (a new node), nor is one of another ledger
// (its counts are dropped: notice says so); a malformed one is an error
// naming the file, which is kept beside as SeenCountsName.corrupt, and the
// counts start empty.
func LoadSeenCounts(dir *Dir, ledger string) (c *SeenCounts, notice string, err error) {
	c = &SeenCounts{dir: dir, ledger: ledger, jobs: map[string]Seen{}, wake: make(chan struct{}, 1)}
	data, err := dir.ReadFile(SeenCountsName)
	if errors.Is(err, fs.ErrNotExist) {
		return c, "", nil
	}
	if err != nil {
		return c, "", fmt.Errorf("state file %s: %w", SeenCountsName, err)
	}
	var f seenFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != 1 {
		if err == nil {
			err = fmt.Errorf("version %d, want 1", f.Version)
		}
		kept := "kept as " + SeenCountsName + ".corrupt"
		if rerr := os.Rename(filepath.Join(dir.Path(), SeenCountsName), filepath.Join(dir.Path(), SeenCountsName+".corrupt")); rerr != nil {
			kept = "not kept: " + rerr.Error()
		}
		return c, "", fmt.Errorf("state file %s in %s is not readable (%v; %s): the ledger counts this node saw are lost, "+
			"and a loss of Redis's state can only be detected by the other nodes", SeenCountsName, dir.Path(), err, kept)
	}
	if f.Ledger != ledger {
		return c, fmt.Sprintf("ledger counts of %q dropped: this node now uses ledger %q (redis.key_prefix)", f.Ledger, ledger), nil
	}
	for job, s := range f.Jobs {
		if s.Seq >= 0 && s.Runs >= 0 {
			c.jobs[job] = s
		}
	}
	return c, "", nil
}

// Retain forgets the counts of jobs not in names (jobs removed from the
// configuration), at the next write.
func (c *SeenCounts) Retain(names []string) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for job := range c.jobs {
		if !keep[job] {
			delete(c.jobs, job)
			c.dirty = true
		}
	}
}

// Get returns what was kept for job.
func (c *SeenCounts) Get(job string) (Seen, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.jobs[job]
	return s, ok
}

// Saw raises job's kept counts to seq and runs and, when one rose, makes a
// write due. It never blocks.
func (c *SeenCounts) Saw(job string, seq, runs int64) {
	c.mu.Lock()
	s, known := c.jobs[job]
	rose := seq > s.Seq || runs > s.Runs
	if rose {
		c.jobs[job] = Seen{Seq: max(s.Seq, seq), Runs: max(s.Runs, runs)}
		c.dirty = true
		c.urgent = c.urgent || !known || runs > s.Runs
	}
	c.mu.Unlock()
	if rose {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Run writes the file when counts rose (seenEvery, seenLazy), until ctx
// ends, then once more if one rose since; after a failed write it tries
// again after seenRetry. Each write's result goes to report (nil:
// written).
func (c *SeenCounts) Run(ctx context.Context, report func(error)) error {
	later := time.NewTimer(seenRetry) // the next write that is due later
	later.Stop()
	defer later.Stop()
	var last time.Time // the last write's end
	failed := false
	for {
		select {
		case <-ctx.Done():
			if dirty, _ := c.due(); dirty {
				report(c.Flush())
			}
			return nil
		case <-c.wake:
		case <-later.C:
		}
		dirty, urgent := c.due()
		if !dirty {
			continue
		}
		after := seenLazy
		switch {
		case failed:
			after = seenRetry
		case urgent:
			after = seenEvery
		}
		if wait := after - time.Since(last); wait > 0 {
			later.Reset(wait) // an earlier deadline replaces a later one: urgent after lazy
			continue
		}
		err := c.Flush()
		last, failed = time.Now(), err != nil
		if failed {
			later.Reset(seenRetry)
		}
		report(err)
	}
}

// due reports whether a count rose since the last write, and whether one
// of them is urgent (a job's first counts, a rise of runs).
func (c *SeenCounts) due() (dirty, urgent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirty, c.urgent
}

// Flush writes the file if a count rose since the last write. Safe to
// call beside Run (writeMu).
func (c *SeenCounts) Flush() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return nil
	}
	f := seenFile{Version: 1, Ledger: c.ledger, Jobs: maps.Clone(c.jobs)}
	urgent := c.urgent
	c.dirty, c.urgent = false, false
	c.mu.Unlock()
	data, err := json.Marshal(f)
	if err == nil {
		err = c.dir.WriteFile(SeenCountsName, data)
	}
	if err != nil {
		c.mu.Lock()
		c.dirty, c.urgent = true, c.urgent || urgent // written again at the next rise or flush
		c.mu.Unlock()
	}
	return err
}
