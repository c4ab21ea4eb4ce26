package runrecords

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/statedir"
)

func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	d, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := New(d)
	if left, err := s.Load(); err != nil || len(left.Records)+len(left.OtherBoot)+len(left.Bad) != 0 {
		t.Fatalf("Load of a new directory: %+v, %v; want nothing", left, err)
	}
	return s, filepath.Join(d.Path(), dirName)
}

func record(id string, pgid int) Record {
	return Record{RunID: id, Attempt: 1, Job: "backup", Owner: "n1:" + id, LockTTL: 5 * time.Minute, KillGrace: 10 * time.Second,
		Group: process.Group{ID: pgid, Session: 4242, LeaderStart: 987654}}
}

func TestPutLoadRemove(t *testing.T) {
	s, _ := newStore(t)
	a, b := record("a1", 100), record("b2", 200)
	b.Owner = "" // overlap: allow holds no lease
	for _, r := range []Record{a, b} {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	a2 := a
	a2.Attempt, a2.Group.ID = 2, 101 // a retry: its own record
	if err := s.Put(a2); err != nil {
		t.Fatal(err)
	}
	left, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	boot := s.currentBoot()
	if boot == "" {
		t.Fatalf("no boot id from %s", bootIDPath)
	}
	a.BootID, a2.BootID, b.BootID = boot, boot, boot
	if want := []Record{a, a2, b}; !reflect.DeepEqual(left.Records, want) {
		t.Errorf("Load: got %+v, want %+v", left.Records, want)
	}
	for _, attempt := range []int{1, 2, 2} {
		if err := s.Remove("a1", attempt); err != nil {
			t.Errorf("Remove(a1, %d): %v, want nil (also when missing)", attempt, err)
		}
	}
	if left, _ := s.Load(); len(left.Records) != 1 || left.Records[0].RunID != "b2" {
		t.Errorf("after Remove: got %+v, want only b2", left.Records)
	}
}

func TestLoadSortsOutWhatCannotBeUsed(t *testing.T) {
	s, dir := newStore(t)
	if err := s.Put(record("ok", 300)); err != nil {
		t.Fatal(err)
	}
	other := `{"run_id":"old","attempt":1,"job":"backup","owner":"n1:old","pgid":400,"session":1,"leader_start_ticks":5,"boot_id":"another-boot"}`
	for name, data := range map[string]string{
		"old.1.json":     other,
		"garbage.1.json": "{not json",
		"empty.1.json":   "", // the daemon died between create and write
		"pgid1.1.json":   `{"run_id":"pgid1","attempt":1,"job":"backup","pgid":1}`,
		"renamed.1.json": `{"run_id":"x","attempt":1,"job":"backup","pgid":500}`,
		"notes.txt":      "not a record",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	left, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Records) != 1 || left.Records[0].RunID != "ok" {
		t.Errorf("records: got %+v, want only ok", left.Records)
	}
	if len(left.OtherBoot) != 1 || left.OtherBoot[0].Owner != "n1:old" || left.OtherBoot[0].Group.ID != 400 {
		t.Errorf("other boot: got %+v, want old (pgid 400)", left.OtherBoot)
	}
	if len(left.Bad) != 4 {
		t.Errorf("bad: got %d %v, want 4 (garbage, empty, pgid 1, renamed)", len(left.Bad), left.Bad)
	}
	for _, err := range left.Bad {
		if !strings.Contains(err.Error(), "run record ") || !strings.Contains(err.Error(), ".json") {
			t.Errorf("bad record error %q does not name the file", err)
		}
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("after Clear: %d files left, want 0", len(ents))
	}
}

func TestPutRefusesBadRunID(t *testing.T) {
	s, dir := newStore(t)
	for _, id := range []string{"", "../escape", "a/b", ".hidden", strings.Repeat("x", 129)} {
		if err := s.Put(record(id, 100)); err == nil {
			t.Errorf("Put(run id %q): got nil error, want one", id)
		}
	}
	r := record("ok", 100)
	r.Attempt = 0
	if err := s.Put(r); err == nil {
		t.Errorf("Put(attempt 0): got nil error, want one")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files written, want 0", len(ents))
	}
}

// BenchmarkPutRemove is the per-run cost of the records: one Put when the
// run's process starts, one Remove when it has ended.
func BenchmarkPutRemove(b *testing.B) {
	s, _ := newStore(b)
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
