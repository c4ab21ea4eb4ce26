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

// SeenCountsName is the file that keeps, for each job with max_runs, the
// highest ledger seq and run count this node has seen (docs/protocol.md,
// R5, R6).
const SeenCountsName = "seen-counts.json"

// Seen is one job's highest ledger seq and run count seen by this node.
type Seen struct {
	Seq  int64 `json:"seq"`
	Runs int64 `json:"runs"`
}

// seenFile is SeenCountsName's content. Ledger names the ledger the
// counts were seen in (redis.key_prefix): counts of another ledger would
// "repair" a fresh one into refusing max_runs jobs that never ran there.
type seenFile struct {
	Version int             `json:"version"`
	Ledger  string          `json:"ledger"`
	Jobs    map[string]Seen `json:"jobs"`
}

// SeenCounts keeps the counts of R6 across this node's restarts. Without
// it, a node restarted while Redis lost its state claims the next slot of
// a max_runs job with nothing to repair the count from, and the slot runs
// although the count was reached (chaos seed 17895812882841228652).
//
// Saw never blocks and never does I/O (it is called from the run path);
// Run writes the file, whole and crash-safe (Dir.WriteFile), each time a
// count rose since its last write, one write at a time (Flush before an
// exit shares writeMu with it). What must hold:
// every count this node sent with a claim after a restart is at least
// what it had seen and written before it; a count seen less than one
// write (milliseconds) before the node died can be lost (docs/protocol.md,
// "What stays impossible").
type SeenCounts struct {
	dir    *Dir
	ledger string
	mu     sync.Mutex
	jobs   map[string]Seen
	dirty  bool
	wake   chan struct{} // 1-buffered: a write is due
	// writeMu orders whole writes of the file (Run's and a Flush before
	// an exit), so that an older snapshot never replaces a newer one. Saw
	// never takes it.
	writeMu sync.Mutex
}

// seenRetry is how soon Run writes again after a failed write while no
// count rises (a transient full disk must not leave the last count of a
// monthly job in memory until next month).
const seenRetry = 5 * time.Second

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
		return c, "", fmt.Errorf("state file %s in %s is not readable (%v; %s): the max_runs counts this node saw are lost, "+
			"and a count Redis loses can only be repaired by the other nodes", SeenCountsName, dir.Path(), err, kept)
	}
	if f.Ledger != ledger {
		return c, fmt.Sprintf("max_runs counts of ledger %q dropped: this node now uses ledger %q (redis.key_prefix)", f.Ledger, ledger), nil
	}
	for job, s := range f.Jobs {
		if s.Seq >= 0 && s.Runs >= 0 {
			c.jobs[job] = s
		}
	}
	return c, "", nil
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
	s := c.jobs[job]
	rose := seq > s.Seq || runs > s.Runs
	if rose {
		c.jobs[job] = Seen{Seq: max(s.Seq, seq), Runs: max(s.Runs, runs)}
		c.dirty = true
	}
	c.mu.Unlock()
	if rose {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Run writes the file each time a count rose, until ctx ends, then once
// more if one rose since; after a failed write it tries again at the
// next rise or after seenRetry, whichever comes first. Each write's result
// goes to report (nil: written).
func (c *SeenCounts) Run(ctx context.Context, report func(error)) error {
	retry := time.NewTimer(seenRetry)
	retry.Stop()
	defer retry.Stop()
	write := func() {
		err := c.Flush()
		if err != nil {
			retry.Reset(seenRetry)
		}
		report(err)
	}
	for {
		select {
		case <-ctx.Done():
			if c.due() {
				report(c.Flush())
			}
			return nil
		case <-c.wake:
			if c.due() {
				write()
			}
		case <-retry.C:
			if c.due() {
				write()
			}
		}
	}
}

// due reports whether a count rose since the last write.
func (c *SeenCounts) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirty
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
	c.dirty = false
	c.mu.Unlock()
	data, err := json.Marshal(f)
	if err == nil {
		err = c.dir.WriteFile(SeenCountsName, data)
	}
	if err != nil {
		c.mu.Lock()
		c.dirty = true // written again at the next rise or flush
		c.mu.Unlock()
	}
	return err
}
