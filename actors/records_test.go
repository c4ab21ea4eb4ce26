package actors_test

import (
	"context"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"sync"
	"testing"
	"time"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// recordingStore is a real statedir.RunRecords that notes each call with the
// lease holder and the records on disk at that moment.
type recordingStore struct {
	store  *statedir.RunRecords
	locker *memory.Memory
	job    string
	mu     sync.Mutex
	calls  []recordCall
}

type recordCall struct {
	op      string // "put 1", "remove 1", …
	holder  string // lease holder after the call
	onDisk  []statedir.Record
	written statedir.Record // for put
}

func (s *recordingStore) note(op string, rec statedir.Record) {
	left, _ := s.store.Load()
	st, _ := s.locker.State(context.Background(), s.job)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, recordCall{op: op, holder: st.LeaseHolder, onDisk: left.Records, written: rec})
}

func (s *recordingStore) Put(rec statedir.Record) error {
	err := s.store.Put(rec)
	s.note(fmt.Sprintf("put %d", rec.Attempt), rec)
	return err
}

func (s *recordingStore) Replace(old int, rec statedir.Record) error {
	err := s.store.Replace(old, rec)
	s.note(fmt.Sprintf("replace %d by %d", old, rec.Attempt), rec)
	return err
}

func (s *recordingStore) Remove(runID string, attempt int) error {
	err := s.store.Remove(runID, attempt)
	s.note(fmt.Sprintf("remove %d", attempt), statedir.Record{})
	return err
}

// A run is recorded from its first process to the release of its lease:
// each attempt's group replaces the previous one, and the last record goes
// only once the lease is released (a crash before leaves it to free). A
// won claim writes no record before its first process (v2 has no early
// claim holding a lease long before its fork).
func TestRun_RecordsItsGroupUntilTheLeaseIsReleased(t *testing.T) {
	dir, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	locker := memory.NewMemory()
	rs := &recordingStore{store: statedir.NewRunRecords(dir), locker: locker, job: "flaky"}
	t.Cleanup(func() { rs.store.Close() })
	cfg := testJob(t, "flaky", "exit 1")
	cfg.Retries, cfg.RetryBackoff = 1, 10*time.Millisecond
	results := make(chan RunFinished, 1)
	job := NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: NewMetrics(nil), Locker: locker, NodeID: "n1",
		Results: results, Phantoms: make(chan Phantom, 1), Kill: make(chan struct{}), Records: rs})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	job.Inbox() <- Fire{Job: "flaky", Slot: time.Now().Truncate(time.Second)}
	var fin RunFinished
	select {
	case fin = <-results:
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	owner := "n1:" + fin.RunID
	// A run's group stays in the daemon's session. The session id is 0 where
	// the session leader lives outside our PID namespace (a container's
	// init started from outside, as in CI), so compare, not test for non-zero.
	ourSession, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range rs.calls {
		ops = append(ops, c.op)
	}
	// Attempt 1's record once it started, replaced in place by attempt
	// 2's, removed after the release.
	if want := "[put 1 replace 1 by 2 remove 2]"; fmt.Sprint(ops) != want {
		t.Fatalf("got calls %v, want %s", ops, want)
	}
	if len(rs.calls[0].onDisk) != 1 || rs.calls[0].onDisk[0].Attempt != 1 {
		t.Errorf("after attempt 1's record: on disk %+v, want attempt 1 only", rs.calls[0].onDisk)
	}
	put1, put2, last := rs.calls[0], rs.calls[1], rs.calls[2]
	for _, c := range []recordCall{put1, put2} {
		w := c.written
		if w.RunID != fin.RunID || w.Job != "flaky" || w.Owner != owner || w.LockTTL != cfg.LockTTL || w.KillGrace != cfg.KillGrace ||
			w.Group.ID <= 1 || w.Group.LeaderStart == 0 || w.Group.Session != ourSession {
			t.Errorf("%s: got record %+v, want run %s, owner %s, a real group", c.op, w, fin.RunID, owner)
		}
		if c.holder != owner || len(c.onDisk) == 0 {
			t.Errorf("%s: lease holder %q, %d records on disk; want %s and the record", c.op, c.holder, len(c.onDisk), owner)
		}
	}
	if put1.written.Group.ID == put2.written.Group.ID {
		t.Errorf("both attempts recorded group %d, want each its own", put1.written.Group.ID)
	}
	if len(rs.calls[1].onDisk) != 1 || rs.calls[1].onDisk[0].Attempt != 2 {
		t.Errorf("after the retry's record replaced the first: on disk %+v, want attempt 2 only", rs.calls[1].onDisk)
	}
	if last.holder != "" || len(last.onDisk) != 0 {
		t.Errorf("last remove: lease holder %q, %d records on disk; want the lease released before, nothing left", last.holder, len(last.onDisk))
	}
}
