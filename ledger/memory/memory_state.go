package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// MemoryStateFile is the name of the memory backend's state file in the
// node's state directory (docs/protocol.md, "The memory backend").
const MemoryStateFile = "memory-state.json"

// memStateFormat and memStateVersion identify the state file's layout.
const (
	memStateFormat  = "cronlock memory backend state"
	memStateVersion = 1
)

// maxSlotAhead is how far past the local clock a slot in the state file
// may be: a job whose slot is later would not run again until then (the
// slot is the highest one claimed or skipped), so such a file is refused.
const maxSlotAhead = 366 * 24 * time.Hour

// ErrCorruptState is wrapped by OpenMemory when the state file exists but
// cannot be used.
var ErrCorruptState = errors.New("redislock: memory backend state file unusable")

// StateStore is where a persisted Memory keeps MemoryStateFile: the node's
// state directory, *statedir.Dir. ReadFile of a missing file returns an
// error satisfying errors.Is(err, fs.ErrNotExist); WriteFile replaces the
// file atomically and durably (it returns once the data is on disk);
// Path names the directory in error messages.
type StateStore interface {
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
	Path() string
}

// memStateFile is the JSON layout of MemoryStateFile, e.g.
//
//	{"format":"cronlock memory backend state","version":1,
//	 "jobs":{"backup":{"slot":1767225600,"fence":42,"paused":true,"runs":3}}}
//
// slot is the highest slot claimed or skipped (Unix seconds), fence the
// last fencing token handed out, runs the successful runs counted for
// max_runs (left out when 0); jobs that never claimed are left out.
type memStateFile struct {
	Format  string                `json:"format"`
	Version int                   `json:"version"`
	Jobs    map[string]memDurable `json:"jobs"`
}

// memDurable is what a persisted Memory keeps of a job across restarts.
// Leases and history are not kept: a lease belongs to a run of the
// process that ended, and history is informational.
type memDurable struct {
	Slot   int64 `json:"slot"`
	Fence  int64 `json:"fence"`
	Paused bool  `json:"paused,omitempty"`
	Runs   int64 `json:"runs,omitempty"`
}

// OpenMemory returns a Memory backend whose slots, fencing tokens and pause
// flags survive restarts in store's MemoryStateFile: it loads the file (a
// missing file is an empty state), and from then on Claim, Pause and Resume
// return only after the change they made is written (docs/protocol.md,
// "The memory backend"). A file that cannot be read or decoded is an error
// wrapping ErrCorruptState (or the read error) that names the file and the
// fix; the state is never silently reset.
func OpenMemory(store StateStore) (*Memory, error) {
	m := NewMemory()
	path := filepath.Join(store.Path(), MemoryStateFile)
	data, err := store.ReadFile(MemoryStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.store = store
		return m, nil
	case err != nil:
		return nil, fmt.Errorf("memory backend state file %s: %w; make it readable for the daemon's user", path, err)
	}
	jobs, err := decodeMemState(data, time.Now())
	if err != nil {
		return nil, fmt.Errorf("memory backend state file %s: %w: %w; it holds each job's claimed slot and fencing token: "+
			"restore it from a backup, or delete it to start afresh (the latest slot within a job's catchup_window "+
			"may then run again, and fencing tokens start again at 1)", path, ErrCorruptState, err)
	}
	for name, d := range jobs {
		// since 1: the job's ledger began before this process (its state
		// file), so a catch-up claim is not refused as a new ledger's.
		m.jobs[name] = &memJob{slot: d.Slot, floor: d.Slot, fence: d.Fence, paused: d.Paused, runs: d.Runs, durable: d,
			occ: map[string]ledger.Occurrence{}, inflight: map[string]int64{}, since: 1}
	}
	m.store = store
	return m, nil
}

// decodeMemState parses and checks a state file: the layout of
// memStateFile with its exact key names, no key twice in an object, no
// null, and no slot more than maxSlotAhead after now.
func decodeMemState(data []byte, now time.Time) (map[string]memDurable, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f memStateFile
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	switch {
	case f.Format != memStateFormat:
		return nil, fmt.Errorf("format %q, want %q", f.Format, memStateFormat)
	case f.Version != memStateVersion:
		return nil, fmt.Errorf("version %d, this cronlock reads version %d (written by a newer cronlock?)", f.Version, memStateVersion)
	}
	// The decoder took the shape; it lets a later key win over an earlier
	// one, matches key names case-insensitively and reads null as "no
	// value", none of which the daemon writes.
	if err := checkMemStateKeys(json.NewDecoder(bytes.NewReader(data)), 0, "the top level"); err != nil {
		return nil, err
	}
	if f.Jobs == nil {
		return nil, errors.New(`no "jobs" object`)
	}
	limit := now.Add(maxSlotAhead).Unix()
	for name, d := range f.Jobs {
		switch {
		case name == "" || d.Slot < 0 || d.Fence < 0 || d.Runs < 0:
			return nil, fmt.Errorf("job %q: invalid entry %+v", name, d)
		case d.Slot > limit:
			return nil, fmt.Errorf("job %q: slot %d (%s) is more than a year after the local clock (%s); the job would not run "+
				"before then", name, d.Slot, time.Unix(d.Slot, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
	}
	return f.Jobs, nil
}

// memStateKeys are the key names of the objects at depth 0 (the file) and
// 2 (a job's entry) of a state file; depth 1 (jobs) has job names.
var memStateKeys = [3][]string{{"format", "version", "jobs"}, nil, {"slot", "fence", "paused", "runs"}}

// checkMemStateKeys reads one JSON value at depth (0 for the file) from
// dec, described as where in errors, and reports a null, a key twice in
// one object, or a key other than memStateKeys. It is called on data
// that decoded as memStateFile, so the nesting is at most 3 deep.
func checkMemStateKeys(dec *json.Decoder, depth int, where string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return fmt.Errorf("%s is null", where)
	case json.Delim('['):
		return fmt.Errorf("%s is an array", where) // not reached: the decoder has no array to fill
	case json.Delim('{'):
	default:
		return nil
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch {
		case seen[key]:
			return fmt.Errorf("key %q twice in %s", key, where)
		case depth < len(memStateKeys) && memStateKeys[depth] != nil && !slices.Contains(memStateKeys[depth], key):
			return fmt.Errorf("key %q in %s, want one of %s", key, where, strings.Join(memStateKeys[depth], ", "))
		}
		seen[key] = true
		var inner string
		switch depth {
		case 0:
			inner = fmt.Sprintf("%q", key)
		case 1:
			inner = fmt.Sprintf("job %q", key)
		default:
			inner = fmt.Sprintf("%q in %s", key, where)
		}
		if err := checkMemStateKeys(dec, depth+1, inner); err != nil {
			return err
		}
	}
	_, err = dec.Token() // '}'
	return err
}

// namedDurable is one job's entry in a snapshot.
type namedDurable struct {
	name string
	memDurable
}

// encodeMemState renders a state file: the encoding/json form of
// memStateFile with jobs sorted by name, written by hand because
// encoding/json takes ~9 ms for 10,000 jobs (BenchmarkEncodeMemState10k)
// and a claim waits for it. jobs is sorted in place.
func encodeMemState(jobs []namedDurable) []byte {
	slices.SortFunc(jobs, func(a, b namedDurable) int { return strings.Compare(a.name, b.name) })
	b := make([]byte, 0, 80+len(jobs)*56)
	b = fmt.Appendf(b, `{"format":%q,"version":%d,"jobs":{`, memStateFormat, memStateVersion)
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, j.name)
		b = append(b, `:{"slot":`...)
		b = strconv.AppendInt(b, j.Slot, 10)
		b = append(b, `,"fence":`...)
		b = strconv.AppendInt(b, j.Fence, 10)
		if j.Paused {
			b = append(b, `,"paused":true`...)
		}
		if j.Runs > 0 {
			b = append(b, `,"runs":`...)
			b = strconv.AppendInt(b, j.Runs, 10)
		}
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

// appendJSONString appends s as a JSON string: as is between quotes when it
// holds only printable ASCII without '"', '\' and the characters
// encoding/json escapes for HTML ('<', '>', '&'), else through
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || strings.IndexByte(`"\<>&`, c) >= 0 {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// persisted is the part of the job that a persisted Memory keeps.
func (j *memJob) persisted() memDurable {
	return memDurable{Slot: j.slot, Fence: j.fence, Paused: j.paused, Runs: j.runs}
}

// commit returns once the job's current slot, fence and pause flag are in
// the state file (at once without a store, or when they are already
// there). Concurrent commits share writes (group commit): one caller
// writes a snapshot of every job while the others wait for it, so a burst
// of claims costs a few writes, not one each. It returns an error when
// the write that should have covered the job failed, or when ctx ends
// while waiting; the change stays in memory (the slot counts as claimed,
// the fence is not handed out again) and goes to disk with the next write.
func (m *Memory) commit(ctx context.Context, name string) error {
	if m.store == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[name]
	if j == nil {
		return nil
	}
	cur := j.persisted()
	if cur == j.durable {
		return nil
	}
	target := m.taken + 1 // the next snapshot includes cur
	if cur == j.pending && j.pendingSeq > m.written && j.pendingSeq > m.failed {
		target = j.pendingSeq // the snapshot being written already includes cur
	}
	for m.written < target {
		if m.failed >= target {
			return m.failErr
		}
		if !m.saving {
			m.write()
			continue
		}
		wait := m.saved
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			m.mu.Lock()
			return fmt.Errorf("waiting for the memory backend state file: %w", ctx.Err())
		}
		m.mu.Lock()
	}
	return nil
}

// write writes a snapshot of every job's durable part. It is called with
// m.mu held and !m.saving, releases m.mu during the write, and returns
// with m.mu held and the waiters woken.
func (m *Memory) write() {
	m.saving = true
	m.taken++
	seq := m.taken
	snap := make([]namedDurable, 0, len(m.jobs))
	for name, j := range m.jobs {
		d := j.persisted()
		j.pending, j.pendingSeq = d, seq
		if d != (memDurable{}) {
			snap = append(snap, namedDurable{name, d})
		}
	}
	m.mu.Unlock()
	err := m.store.WriteFile(MemoryStateFile, encodeMemState(snap))
	m.mu.Lock()
	m.saving = false
	if err != nil {
		m.failed = seq
		m.failErr = fmt.Errorf("memory backend state file %s not written: %w", filepath.Join(m.store.Path(), MemoryStateFile), err)
	} else {
		m.written = seq
		for _, j := range m.jobs {
			if j.pendingSeq == seq {
				j.durable = j.pending
			}
		}
	}
	close(m.saved)
	m.saved = make(chan struct{})
}
