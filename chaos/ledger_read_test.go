//go:build chaos

package chaos

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestLedgerRead: records written as protocol v2 lays them out
// (cronlock:occ:J, field slot → JSON) are read; an empty restart between
// two reads keeps what the first read saw and is recorded as a loss; a
// restart from the AOF keeps the records.
func TestLedgerRead(t *testing.T) {
	srv := redistest.StartWith(t, "--appendonly", "yes", "--appendfsync", "always")
	dir := srv.Do("CONFIG", "GET", "dir")
	rb := &redisBox{srv: srv, dir: dir[len("dir\n"):]}
	jobs := []string{"a", "b"}
	rb.read(jobs)
	if l, _, _ := rb.snapshot(); l.Found || l.Reads != 1 {
		t.Fatalf("empty Redis: found %v after %d reads, want false after 1", l.Found, l.Reads)
	}
	srv.Do("HSET", "cronlock:occ:a", "1893553445", `{"slot":1893553445,"status":"ran","node":"n1","token":1893553444123456}`,
		"1893553446", `{"slot":1893553446,"status":"skipped","reason":"overlap","node":"n2"}`)
	if _, _, err := rb.restart(jobs, false, 0); err != nil { // reads, then restarts from the AOF
		t.Fatal(err)
	}
	if got := srv.Do("HLEN", "cronlock:occ:a"); got != "2" {
		t.Fatalf("after the AOF restart: HLEN %s, want 2", got)
	}
	srv.Do("HSET", "cronlock:occ:{b}", "1893553447", `{"slot":1893553447,"status":"missed","reason":"no_live_node"}`)
	if _, _, err := rb.restart(jobs, true, 10*time.Millisecond); err != nil { // reads, then erases
		t.Fatal(err)
	}
	if got := srv.Do("EXISTS", "cronlock:occ:a"); got != "0" {
		t.Fatalf("after the empty restart: EXISTS %s, want 0", got)
	}
	rb.read(jobs)
	l, losses, bad := rb.snapshot()
	if !l.Found || len(losses) != 1 || len(bad) != 0 {
		t.Fatalf("found %v, %d losses, bad %q; want true, 1, none", l.Found, len(losses), bad)
	}
	if r, ok := l.last("a", 1893553445); !ok || r.Status != "ran" || r.Token != "1893553444123456" {
		t.Errorf("a/1893553445: %+v %v", r, ok)
	}
	if r, ok := l.last("a", 1893553446); !ok || r.Reason != "overlap" {
		t.Errorf("a/1893553446: %+v %v", r, ok)
	}
	if r, ok := l.last("b", 1893553447); !ok || r.Status != "missed" {
		t.Errorf("b/1893553447 (tagged key): %+v %v", r, ok)
	}
}
