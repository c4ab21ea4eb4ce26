// Package runrecords keeps one small record per run in progress in the
// node's state directory (package statedir, subdirectory runs/): the
// run's process group and the exact lease value it holds. When a daemon
// dies without shutting down (SIGKILL, OOM killer, crash), its next
// incarnation reads the records at start, kills what the runs left and
// releases their leases (docs/architecture.md, "Start-up"). A record is
// written when an attempt's process starts and removed when the next
// attempt has its own record, or once the run has released its lease.
package runrecords

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/statedir"
)

// dirName is the records' subdirectory of the state directory.
const dirName = "runs"

// bootIDPath names the kernel's random id of the current boot (proc(5)).
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// Record is what the next incarnation needs to clean up after one run.
type Record struct {
	// RunID is the run's id (CRONLOCK_RUN_ID); with Attempt it names the
	// record.
	RunID string
	// Attempt is the attempt (1 + retries) whose process group this is.
	Attempt int
	Job     string
	// Owner is the exact lease value the run holds ("nodeID:uuid"), for a
	// compare-and-delete; "" when the run holds no lease (overlap: allow).
	Owner string
	// LockTTL is the lease's time to live: the lease ends by itself at most
	// this long after the daemon died.
	LockTTL time.Duration
	// KillGrace is the job's SIGTERM → SIGKILL delay.
	KillGrace time.Duration
	// Group is the process group of the run's current attempt.
	Group process.Group
	// BootID is the boot the record was written in (set by Put): after a
	// reboot no recorded process exists and pids mean nothing.
	BootID string
}

// file is a Record as stored: one JSON object, durations in milliseconds.
type file struct {
	RunID       string `json:"run_id"`
	Attempt     int    `json:"attempt"`
	Job         string `json:"job"`
	Owner       string `json:"owner"`
	LockTTLMs   int64  `json:"lock_ttl_ms"`
	KillGraceMs int64  `json:"kill_grace_ms"`
	PGID        int    `json:"pgid"`
	Session     int    `json:"session"`
	LeaderStart uint64 `json:"leader_start_ticks"`
	BootID      string `json:"boot_id"`
}

// Store is the run records of one state directory. Its methods are safe
// for concurrent use by different runs (each writes only its own record).
type Store struct {
	dir      string
	bootOnce sync.Once
	bootID   string
}

// New returns the store of state's run records. It does no I/O.
func New(state *statedir.Dir) *Store {
	return &Store{dir: filepath.Join(state.Path(), dirName)}
}

// currentBoot returns the id of this boot, or "" when the kernel does not
// say (then every record counts as written in this boot).
func (s *Store) currentBoot() string {
	s.bootOnce.Do(func() {
		b, err := os.ReadFile(bootIDPath)
		if err == nil {
			s.bootID = strings.TrimSpace(string(b))
		}
	})
	return s.bootID
}

// Put writes rec as a new file, with one write(2) and no rename (on ext4 a
// rename costs more than the rest together). A daemon killed between the
// file's creation and its write leaves an empty record, which Load reports
// as bad: a window of microseconds. It does not fsync: the case it serves
// is the daemon's own death, after which the kernel still holds what was
// written; after a power loss or reboot no recorded process exists
// anyway. It blocks for two or three file-system calls (tens of
// microseconds) and returns their error.
func (s *Store) Put(rec Record) error {
	if !validRunID(rec.RunID) || rec.Attempt < 1 {
		return fmt.Errorf("run record: invalid run id %q or attempt %d", rec.RunID, rec.Attempt)
	}
	data, err := json.Marshal(file{RunID: rec.RunID, Attempt: rec.Attempt, Job: rec.Job, Owner: rec.Owner,
		LockTTLMs: rec.LockTTL.Milliseconds(), KillGraceMs: rec.KillGrace.Milliseconds(),
		PGID: rec.Group.ID, Session: rec.Group.Session, LeaderStart: rec.Group.LeaderStart,
		BootID: s.currentBoot()})
	if err != nil {
		return fmt.Errorf("run record %s: %w", rec.RunID, err)
	}
	if err := os.WriteFile(s.path(rec.RunID, rec.Attempt), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("run record %s: %w", rec.RunID, err)
	}
	return nil
}

// Remove deletes the record of runID's attempt; a missing record is not
// an error.
func (s *Store) Remove(runID string, attempt int) error {
	if err := os.Remove(s.path(runID, attempt)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("run record %s: %w", runID, err)
	}
	return nil
}

func (s *Store) path(runID string, attempt int) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s.%d.json", runID, attempt))
}

// Left is what Load found: the records, and the files it could not read.
type Left struct {
	Records []Record
	// OtherBoot holds the records written before the machine last booted:
	// their processes are gone, their leases may not be.
	OtherBoot []Record
	// Bad describes each record file that could not be read or parsed
	// (named in the error); it is removed by Clear like the others.
	Bad []error
}

// Load creates the records' directory if needed and returns the records
// in it. Called at start before any run, it returns what the previous
// incarnation left: records are removed when their run ends, so any
// record there belongs to a run the daemon did not see to its end. The
// error is the directory's.
func (s *Store) Load() (Left, error) {
	var left Left
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return left, fmt.Errorf("run records %s: %w", s.dir, err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return left, fmt.Errorf("run records %s: %w", s.dir, err)
	}
	boot := s.currentBoot()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue // not a record (Clear removes it all the same)
		}
		rec, err := s.read(name)
		switch {
		case err != nil:
			left.Bad = append(left.Bad, err)
		case rec.BootID != boot && rec.BootID != "" && boot != "":
			left.OtherBoot = append(left.OtherBoot, rec)
		default:
			left.Records = append(left.Records, rec)
		}
	}
	return left, nil
}

func (s *Store) read(name string) (Record, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return Record{}, fmt.Errorf("run record %s: %w", name, err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return Record{}, fmt.Errorf("run record %s: %w", name, err)
	}
	if f.PGID <= 1 || f.Job == "" || filepath.Base(s.path(f.RunID, f.Attempt)) != name {
		return Record{}, fmt.Errorf("run record %s: incomplete (pgid %d, job %q, run id %q, attempt %d)",
			name, f.PGID, f.Job, f.RunID, f.Attempt)
	}
	return Record{RunID: f.RunID, Attempt: f.Attempt, Job: f.Job, Owner: f.Owner, LockTTL: time.Duration(f.LockTTLMs) * time.Millisecond,
		KillGrace: time.Duration(f.KillGraceMs) * time.Millisecond, BootID: f.BootID,
		Group: process.Group{ID: f.PGID, Session: f.Session, LeaderStart: f.LeaderStart}}, nil
}

// Clear removes every file in the records' directory: called at start,
// once what Load returned has been dealt with and before any run starts.
func (s *Store) Clear() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("run records %s: %w", s.dir, err)
	}
	var errs []error
	for _, e := range entries {
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validRunID accepts the names a record file may take: non-empty, at most
// 128 bytes of letters, digits, '-' and '_' (run ids are UUIDs).
func validRunID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
