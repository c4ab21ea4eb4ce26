package statedir

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/process"
)

func newStore(t testing.TB) *RunRecords {
	t.Helper()
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := NewRunRecords(d)
	t.Cleanup(func() { s.Close() })
	if left, err := s.Load(); err != nil || len(left.Records)+len(left.Elsewhere)+len(left.Bad) != 0 {
		t.Fatalf("Load of a new directory: %+v, %v; want nothing", left, err)
	}
	return s
}

func record(id string, pgid int) Record {
	return Record{RunID: id, Attempt: 1, Job: "backup", Owner: "n1:" + id, LockTTL: 5 * time.Minute, KillGrace: 10 * time.Second,
		Group: process.Group{ID: pgid, Session: 4242, LeaderStart: 987654, LeaderStartLast: 987655}}
}

// reopen is what the next incarnation sees: a new Store on the same file.
func reopen(t *testing.T, s *RunRecords) Left {
	t.Helper()
	d := &RunRecords{path: s.path, slots: map[key]int64{}}
	defer d.Close()
	left, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	return left
}

func TestPutRemoveLoad(t *testing.T) {
	s := newStore(t)
	a, b := record("a1", 100), record("b2", 200)
	b.Owner = "" // overlap: allow holds no lease
	a2 := a
	a2.Attempt, a2.Group.ID = 2, 101 // a retry: its own record
	for _, r := range []Record{a, b, a2} {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(a); err == nil {
		t.Errorf("Put of the same run and attempt twice: got nil error, want one")
	}
	boot, ns := s.here()
	if boot == "" || !strings.HasPrefix(ns, "pid:[") {
		t.Fatalf("boot id %q from %s, pid namespace %q from %s", boot, bootIDPath, ns, pidNSPath)
	}
	for _, r := range []*Record{&a, &a2, &b} {
		r.BootID, r.PIDNamespace = boot, ns
	}
	if got, want := reopen(t, s).Records, []Record{a, b, a2}; !reflect.DeepEqual(got, want) {
		t.Errorf("Load: got %+v, want %+v", got, want)
	}
	for _, attempt := range []int{1, 1} {
		if err := s.Remove("a1", attempt); err != nil {
			t.Errorf("Remove(a1, %d): %v, want nil (also when already removed)", attempt, err)
		}
	}
	c := record("c3", 300) // reuses the freed slot
	c.BootID, c.PIDNamespace = boot, ns
	if err := s.Put(c); err != nil {
		t.Fatal(err)
	}
	if got, want := reopen(t, s).Records, []Record{c, b, a2}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Remove and Put: got %+v, want %+v", got, want)
	}
	for _, r := range []Record{b, a2, c} {
		if err := s.Remove(r.RunID, r.Attempt); err != nil {
			t.Fatal(err)
		}
	}
	if left := reopen(t, s); len(left.Records) != 0 {
		t.Errorf("after removing all: got %+v, want none", left.Records)
	}
	if fi, _ := os.Stat(s.path); fi.Size() != 3*slotSize {
		t.Errorf("file size %d, want 3 slots (%d): freed slots are reused", fi.Size(), 3*slotSize)
	}
}

func TestLoadSortsOutWhatCannotBeUsed(t *testing.T) {
	s := newStore(t)
	if err := s.Put(record("ok", 300)); err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, slot := range []string{
		"", // free
		`{"run_id":"old","attempt":1,"job":"backup","owner":"n1:old","pgid":400,"session":1,"leader_start_ticks":5,"boot_id":"another-boot"}`,
		`{"run_id":"ns","attempt":1,"job":"backup","owner":"n1:ns","pgid":401,"session":1,"leader_start_ticks":5,"pid_namespace":"pid:[1]"}`,
		"{not json",
		`{"run_id":"pgid1","attempt":1,"job":"backup","pgid":1}`,
		`{"run_id":"noattempt","job":"backup","pgid":500}`,
		`{"run_id":"claim","job":"backup","owner":"n1:claim"}`, // a claim record: the lease, no process yet
		`{"run_id":"claimnoowner","job":"backup"}`,             // nothing to clean up: bad
	} {
		b := make([]byte, slotSize)
		copy(b, slot)
		data = append(data, b...)
	}
	data = append(data, "{torn"...) // a short last slot
	if _, err := s.f.WriteAt(data, slotSize); err != nil {
		t.Fatal(err)
	}
	left := reopen(t, s)
	if len(left.Records) != 2 || left.Records[0].RunID != "ok" || left.Records[1].RunID != "claim" ||
		left.Records[1].Attempt != 0 || left.Records[1].Group.ID != 0 || left.Records[1].Owner != "n1:claim" {
		t.Errorf("records: got %+v, want ok and the claim record", left.Records)
	}
	if len(left.Elsewhere) != 2 || left.Elsewhere[0].Owner != "n1:old" || left.Elsewhere[0].Group.ID != 400 ||
		left.Elsewhere[1].Owner != "n1:ns" {
		t.Errorf("elsewhere: got %+v, want old (another boot, pgid 400) and ns (another pid namespace)", left.Elsewhere)
	}
	if len(left.Bad) != 5 {
		t.Errorf("bad: got %d %v, want 5 (garbage, pgid 1, no attempt, a claim record without owner, torn)", len(left.Bad), left.Bad)
	}
	for _, err := range left.Bad {
		if !strings.Contains(err.Error(), "run record at offset ") {
			t.Errorf("bad record error %q does not say where", err)
		}
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if left := reopen(t, s); len(left.Records)+len(left.Elsewhere)+len(left.Bad) != 0 {
		t.Errorf("after Clear: got %+v, want nothing", left)
	}
}

func TestPutRefusesARecordLongerThanASlot(t *testing.T) {
	s := newStore(t)
	r := record("long", 100)
	r.Owner = strings.Repeat("n", slotSize) + ":long"
	if err := s.Put(r); err == nil || !strings.Contains(err.Error(), "node.id") {
		t.Errorf("got %v, want an error naming the cause", err)
	}
}

// Replace writes a run's next record into its previous record's slot: the
// next incarnation finds only the new one, the file does not grow, and a
// Replace without a previous record is a Put.
func TestReplace(t *testing.T) {
	s := newStore(t)
	claim := record("r1", 0)
	claim.Attempt, claim.Group = 0, process.Group{}
	if err := s.Put(claim); err != nil {
		t.Fatal(err)
	}
	other := record("r2", 300)
	if err := s.Put(other); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(s.path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	first := record("r1", 100)
	if err := s.Replace(0, first); err != nil {
		t.Fatal(err)
	}
	retry := record("r1", 200)
	retry.Attempt = 2
	if err := s.Replace(1, retry); err != nil {
		t.Fatal(err)
	}
	ids := func(recs []Record) map[string]int {
		m := map[string]int{}
		for _, r := range recs {
			m[r.RunID] = r.Group.ID
		}
		return m
	}
	if got := ids(reopen(t, s).Records); !reflect.DeepEqual(got, map[string]int{"r1": 200, "r2": 300}) {
		t.Fatalf("after two replaces: groups %v, want r1's retry (200) and r2 (300)", got)
	}
	if size() != before {
		t.Errorf("file grew from %d to %d bytes: a replace took a new slot", before, size())
	}
	if err := s.Replace(1, retry); err == nil {
		t.Error("Replace with a record already written: nil error, want one")
	}
	lone := record("r3", 400)
	if err := s.Replace(0, lone); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("r1", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("r1", 1); err != nil { // replaced: no record of it left
		t.Fatal(err)
	}
	if got := ids(reopen(t, s).Records); !reflect.DeepEqual(got, map[string]int{"r2": 300, "r3": 400}) {
		t.Fatalf("after a replace without a previous record and a remove: groups %v, want r2 (300) and r3 (400)", got)
	}
}

// BenchmarkPutRemove is the per-run cost of the records: one Put when the
// run's process starts, one Remove when it has ended.
func BenchmarkPutRemove(b *testing.B) {
	s := newStore(b)
	r := record("3f1c0d2e-9a8b-4c7d-8e6f-5a4b3c2d1e0f", 12345)
	for b.Loop() {
		if err := s.Put(r); err != nil {
			b.Fatal(err)
		}
		if err := s.Remove(r.RunID, r.Attempt); err != nil {
			b.Fatal(err)
		}
	}
}
