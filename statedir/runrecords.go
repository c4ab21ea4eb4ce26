package statedir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cronlock/cronlock/process"
)

// The run records keep one small record per run in progress in the
// node's state directory (file "runs"): the run's
// process group and the exact lease value it holds. When a daemon dies
// without shutting down (SIGKILL, OOM killer, crash), its next incarnation
// reads the records at start, kills what the runs left and releases their
// leases (docs/architecture.md, "Start-up"). A record is written when a run wins
// its claim with a lease (attempt 0: the lease, no process yet; a run
// without a lease, overlap allow, starts at attempt 1), replaced in place
// (Replace) by each attempt's when its process starts, and removed once
// the run has released its lease.
//
// The records live in fixed slots of one file, each written in place with
// one pwrite(2): creating and deleting a file per run costs more than the
// rest of a run (on ext4, inode allocation scans the recently deleted
// inodes: about 0.7 ms of CPU per run at 20 runs a second).

// fileName is the records' file in the state directory.
const fileName = "runs"

// slotSize is the size in bytes of one record's slot: one page, so that a
// record is written by one pwrite(2) within one page, which a process's
// death cannot tear. A record longer than a slot is refused by Put.
const slotSize = 4096

// Where a record was written: the kernel's random id of the current boot
// and this process's pid namespace (proc(5), pid_namespaces(7)).
const (
	bootIDPath = "/proc/sys/kernel/random/boot_id"
	pidNSPath  = "/proc/self/ns/pid"
)

// Record is what the next incarnation needs to clean up after one run.
type Record struct {
	// RunID is the run's id (CRONLOCK_RUN_ID).
	RunID string
	// Attempt is the attempt (1 + retries) whose process group this is;
	// 0 for a claim record: the run won its slot's claim (Owner holds the
	// lease) and has started no process yet (Group is zero). An early
	// claim is won up to actors.ClaimLead before its process starts.
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
	// Group is the process group of the run's attempt.
	Group process.Group
	// BootID and PIDNamespace say where the record was written (set by
	// Put). After a reboot, or in another pid namespace (a container that
	// was restarted), no recorded process exists or can be reached, and its
	// pids name other processes.
	BootID, PIDNamespace string
}

// stored is a Record as written: one JSON object, durations in
// milliseconds, then a newline and zero bytes up to the slot's end.
type stored struct {
	RunID       string `json:"run_id"`
	Attempt     int    `json:"attempt"`
	Job         string `json:"job"`
	Owner       string `json:"owner"`
	LockTTLMs   int64  `json:"lock_ttl_ms"`
	KillGraceMs int64  `json:"kill_grace_ms"`
	PGID        int    `json:"pgid"`
	Session     int    `json:"session"`
	LeaderStart uint64 `json:"leader_start_ticks"`
	// LeaderStartLast: absent in records written before the leader's
	// start could be a range (process.Group.LeaderStartLast).
	LeaderStartLast uint64 `json:"leader_start_last_ticks,omitempty"`
	BootID          string `json:"boot_id"`
	PIDNS           string `json:"pid_namespace"`
}

type key struct {
	runID   string
	attempt int
}

// RunRecords is the run records of one state directory. Its methods are safe
// for concurrent use.
type RunRecords struct {
	path     string
	hereOnce sync.Once
	bootID   string
	pidNS    string

	mu    sync.Mutex // guards the fields below; never held across a write
	f     *os.File   // opened by the first Load or Put
	slots map[key]int64
	free  []int64 // offsets of free slots below next
	next  int64   // offset of the first slot never used since Clear
}

// NewRunRecords returns the store of state's run records. It does no I/O.
func NewRunRecords(state *Dir) *RunRecords {
	return &RunRecords{path: filepath.Join(state.Path(), fileName), slots: map[key]int64{}}
}

// here returns this boot's id and this process's pid namespace; "" for
// what the kernel does not say (then it matches every record).
func (s *RunRecords) here() (bootID, pidNS string) {
	s.hereOnce.Do(func() {
		if b, err := os.ReadFile(bootIDPath); err == nil {
			s.bootID = strings.TrimSpace(string(b))
		}
		s.pidNS, _ = os.Readlink(pidNSPath)
	})
	return s.bootID, s.pidNS
}

// elsewhere reports whether rec was written in another boot or pid
// namespace.
func (s *RunRecords) elsewhere(rec Record) bool {
	boot, ns := s.here()
	differ := func(a, b string) bool { return a != "" && b != "" && a != b }
	return differ(rec.BootID, boot) || differ(rec.PIDNamespace, ns)
}

// fileLocked opens the records' file once. s.mu must be held.
func (s *RunRecords) fileLocked() (*os.File, error) {
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("run records %s: %w", s.path, err)
		}
		s.f = f
	}
	return s.f, nil
}

// Put writes rec into a free slot with one pwrite(2). It does not fsync:
// the case it serves is the daemon's own death, after which the kernel
// still holds what was written; after a power loss or reboot no recorded
// process exists anyway. It blocks for one system call (a few
// microseconds) and returns its error, or an error when the record does
// not fit a slot.
func (s *RunRecords) Put(rec Record) error { return s.write(rec, -1) }

// Replace writes rec into the slot of the record of rec's run with
// attempt old, with one pwrite(2) within one page: whatever the daemon's
// death, the file holds the old record or the new one, never neither nor
// both (the record of a run's claim, attempt 0, replaced by its first
// attempt's; an attempt's by its retry's). Without a record of old it is
// Put. Errors as Put's; after an error the store still counts the old
// record as written.
func (s *RunRecords) Replace(old int, rec Record) error { return s.write(rec, old) }

// write is Put (old < 0) and Replace.
func (s *RunRecords) write(rec Record, old int) error {
	boot, ns := s.here()
	var enc [512]byte // most records fit: no allocation
	data := appendStored(enc[:0], stored{RunID: rec.RunID, Attempt: rec.Attempt, Job: rec.Job, Owner: rec.Owner,
		LockTTLMs: rec.LockTTL.Milliseconds(), KillGraceMs: rec.KillGrace.Milliseconds(),
		PGID: rec.Group.ID, Session: rec.Group.Session, LeaderStart: rec.Group.LeaderStart, LeaderStartLast: rec.Group.LeaderStartLast,
		BootID: boot, PIDNS: ns})
	if len(data) >= slotSize {
		return fmt.Errorf("run record %s: %d bytes, more than a slot holds (%d); job name or node.id too long",
			rec.RunID, len(data), slotSize-1)
	}
	var buf [slotSize]byte // the caller's own: the write happens outside s.mu
	n := copy(buf[:], data)
	buf[n] = '\n' // the zeros after it end the record on reading
	k := key{rec.RunID, rec.Attempt}
	oldKey := key{rec.RunID, old}
	s.mu.Lock()
	f, err := s.fileLocked()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if _, dup := s.slots[k]; dup {
		s.mu.Unlock()
		return fmt.Errorf("run record %s attempt %d: already written", rec.RunID, rec.Attempt)
	}
	off, replace := s.slots[oldKey] // never for Put: no record has attempt -1
	if !replace {
		off = s.next
		if n := len(s.free); n > 0 {
			off, s.free = s.free[n-1], s.free[:n-1]
		} else {
			s.next += slotSize
		}
	}
	s.mu.Unlock()
	// No lock is held across the write: a hung state directory blocks
	// this run's write only, never another run's (docs/protocol.md, R3).
	// The slot is this run's alone (taken above, or its own old record).
	_, werr := f.WriteAt(buf[:], off)
	s.mu.Lock()
	defer s.mu.Unlock()
	if werr != nil {
		if !replace {
			s.free = append(s.free, off)
		}
		return fmt.Errorf("run record %s: %w", rec.RunID, werr)
	}
	if replace {
		delete(s.slots, oldKey)
	}
	s.slots[k] = off
	return nil
}

// Remove frees the slot of runID's attempt with a one-byte pwrite(2)
// (a zero at the slot's start marks it free); a record never written or
// already removed is not an error.
func (s *RunRecords) Remove(runID string, attempt int) error {
	s.mu.Lock()
	k := key{runID, attempt}
	off, ok := s.slots[k]
	f := s.f
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if _, err := f.WriteAt([]byte{0}, off); err != nil { // outside s.mu, as in write
		return fmt.Errorf("run record %s: %w", runID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.slots, k)
	s.free = append(s.free, off)
	return nil
}

// Left is what Load found.
type Left struct {
	// Records are the records written in this boot and pid namespace.
	Records []Record
	// Elsewhere holds the records written before the machine last booted
	// or in another pid namespace: their processes are gone or out of
	// reach, their leases may not be.
	Elsewhere []Record
	// Bad describes each slot that could not be parsed (named by offset).
	Bad []error
}

// Load returns the records in the file (creating it if needed). Called at
// start before any run, it returns what the previous incarnation left:
// records are removed when their run ends, so any record there belongs to
// a run the daemon did not see to its end. The error is the file's.
func (s *RunRecords) Load() (Left, error) {
	var left Left
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.fileLocked()
	if err != nil {
		return left, err
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		return left, fmt.Errorf("run records %s: %w", s.path, err)
	}
	for off := 0; off < len(data); off += slotSize {
		slot := data[off:min(off+slotSize, len(data))]
		if slot[0] == 0 {
			continue // free
		}
		rec, err := parse(slot)
		switch {
		case err != nil:
			left.Bad = append(left.Bad, fmt.Errorf("run record at offset %d of %s: %w", off, s.path, err))
		case s.elsewhere(rec):
			left.Elsewhere = append(left.Elsewhere, rec)
		default:
			left.Records = append(left.Records, rec)
		}
	}
	return left, nil
}

func parse(slot []byte) (Record, error) {
	if i := bytes.IndexByte(slot, 0); i >= 0 {
		slot = slot[:i]
	}
	var st stored
	if err := json.Unmarshal(slot, &st); err != nil {
		return Record{}, err
	}
	claimOnly := st.Attempt == 0 && st.PGID == 0 && st.Owner != ""
	if !claimOnly && (st.PGID <= 1 || st.Job == "" || st.RunID == "" || st.Attempt < 1) || st.Job == "" || st.RunID == "" {
		return Record{}, fmt.Errorf("incomplete (pgid %d, job %q, run id %q, attempt %d)", st.PGID, st.Job, st.RunID, st.Attempt)
	}
	return Record{RunID: st.RunID, Attempt: st.Attempt, Job: st.Job, Owner: st.Owner,
		LockTTL: time.Duration(st.LockTTLMs) * time.Millisecond, KillGrace: time.Duration(st.KillGraceMs) * time.Millisecond,
		BootID: st.BootID, PIDNamespace: st.PIDNS, Group: process.Group{ID: st.PGID, Session: st.Session, LeaderStart: st.LeaderStart, LeaderStartLast: st.LeaderStartLast}}, nil
}

// Clear empties the file: called at start, once what Load returned has
// been dealt with and before any run starts (records Put since are lost).
func (s *RunRecords) Clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.fileLocked()
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("run records %s: %w", s.path, err)
	}
	clear(s.slots)
	s.free, s.next = nil, 0
	return nil
}

// Close closes the file; the records stay. A later Put opens it again.
func (s *RunRecords) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
