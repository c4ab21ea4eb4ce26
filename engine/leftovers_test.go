package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/statedir"
)

// orphanGroup makes what a SIGKILLed daemon leaves: a process group (in a
// session of its own) whose leader has exited while a member, sleep 1000,
// runs on, re-parented. It returns the group as a run record holds it and
// the member's pid.
func orphanGroup(t *testing.T) (process.Group, int) {
	t.Helper()
	out, err := exec.Command("setsid", "sh", "-c",
		`sleep 1000 </dev/null >/dev/null 2>&1 & echo $$ $! $(cut -d" " -f22 /proc/$$/stat)`).Output()
	if err != nil {
		t.Fatal(err)
	}
	var n [3]int
	for i, f := range strings.Fields(string(out)) {
		if n[i], err = strconv.Atoi(f); err != nil || i > 2 {
			t.Fatalf("helper printed %q", out)
		}
	}
	t.Cleanup(func() { _ = syscall.Kill(n[1], syscall.SIGKILL) })
	return process.Group{ID: n[0], Session: n[0], LeaderStart: uint64(n[2])}, n[1]
}

// gone reports whether pid has ended (no process, or a zombie).
func gone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// leftoverSetup opens a state directory holding one run record of job a
// (owner "n1:old") for group g, and takes that lease on srv.
func leftoverSetup(t *testing.T, srv *redistest.Server, g process.Group) (*statedir.Dir, *redislock.Redis) {
	t.Helper()
	dir, err := statedir.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	store := statedir.NewRunRecords(dir) // the previous incarnation's
	defer store.Close()
	rec := statedir.Record{RunID: "old", Attempt: 1, Job: "a", Owner: "n1:old", LockTTL: 5 * time.Minute,
		KillGrace: 10 * time.Second, Group: g}
	if err := store.Put(rec); err != nil {
		t.Fatal(err)
	}
	rl, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rl.Close)
	c, err := rl.Claim(t.Context(), ledger.ClaimRequest{Job: "a", Trigger: ledger.TriggerManual, Node: "n1", RunID: "old",
		TTL: 5 * time.Minute, Lease: true})
	if err != nil || c.Outcome != ledger.Claimed {
		t.Fatalf("take the old lease: %+v, %v", c, err)
	}
	return dir, rl
}

func leaseHolder(t *testing.T, rl *redislock.Redis) string {
	t.Helper()
	st, err := rl.State(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	return st.LeaseHolder
}

const leftoverJob = `
node: {id: n1, shutdown_timeout: 5s}
redis: {address: "%s"}
jobs:
  - name: a
    schedule: "* * * * * *"
    command: "exit 0"
`

// Before its first claim the engine kills the process group a previous
// incarnation left and releases that run's lease, so the job runs at its
// next slot instead of after lock_ttl (5 min here).
func TestEngine_KillsLeftoversAndReleasesTheirLeaseBeforeClaiming(t *testing.T) {
	srv := redistest.Start(t)
	g, member := orphanGroup(t)
	dir, rl := leftoverSetup(t, srv, g)
	te := launchEngine(t, t.Context(), parseConfig(t, strings.Replace(leftoverJob, "%s", srv.Addr(), 1)), Options{State: dir})
	if !gone(member) {
		t.Errorf("leftover member %d alive after READY=1", member)
	}
	if h := leaseHolder(t, rl); h == "n1:old" {
		t.Errorf("old lease still held after READY=1")
	}
	deadline := time.Now().Add(5 * time.Second)
	for te.runs(t, "a", "success") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no successful run of a within 5s (lease holder %q)", leaseHolder(t, rl))
		}
		time.Sleep(20 * time.Millisecond) // runs come once a second
	}
	te.stop(t)
	var order []string
	for _, e := range te.logs.AllUntimed() {
		switch e.Message {
		case "leftover process group of the previous daemon killed", "stale lease of the previous daemon released",
			"run started", "slot skipped":
			order = append(order, e.Message)
		}
	}
	if len(order) < 3 || order[0] != "leftover process group of the previous daemon killed" ||
		order[1] != "stale lease of the previous daemon released" || order[2] != "run started" {
		t.Errorf("log order: got %q, want the kill, the release, then the first run", order)
	}
	after := statedir.NewRunRecords(dir)
	defer after.Close()
	if left, err := after.Load(); err != nil || len(left.Records)+len(left.Elsewhere)+len(left.Bad) != 0 {
		t.Errorf("run records after the engine stopped: %+v, %v; want none", left, err)
	}
}

// A claim record (attempt 0: a won claim whose process had not started
// when the daemon died; a daemon before protocol v2 wrote one for its
// early and gated claims, v2 writes none, but the state directory of an
// upgraded node may hold one) has its lease released before the first
// claim, like a run's: the job is not blocked for lock_ttl.
func TestEngine_ReleasesTheLeaseOfAClaimRecord(t *testing.T) {
	srv := redistest.Start(t)
	dir, rl := leftoverSetup(t, srv, process.Group{})
	// The setup's record (attempt 1 without a group) is replaced by the
	// claim record.
	store := statedir.NewRunRecords(dir)
	if err := store.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(statedir.Record{RunID: "old", Job: "a", Owner: "n1:old", LockTTL: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	te := launchEngine(t, t.Context(), parseConfig(t, strings.Replace(leftoverJob, "%s", srv.Addr(), 1)), Options{State: dir})
	if h := leaseHolder(t, rl); h == "n1:old" {
		t.Errorf("the claim record's lease still held after READY=1")
	}
	te.stop(t)
	if n := len(te.logs.FilterMessage("leftover run had won its claim but started no process; releasing its lease").All()); n != 1 {
		t.Errorf("got %d claim-record log lines, want 1", n)
	}
}

// With Redis not answering at start, the stale lease goes to the janitor,
// which releases it once Redis answers.
func TestEngine_LeftoverLeaseGoesToTheJanitorWhileRedisHangs(t *testing.T) {
	srv := redistest.Start(t)
	g, member := orphanGroup(t)
	dir, rl := leftoverSetup(t, srv, g)
	srv.Pause()
	defer srv.Resume()
	// A short dial_timeout: connecting to the hung server at start waits
	// that long (the lazy client's handshake), and is not what is tested.
	cfg := strings.Replace(leftoverJob, `address: "%s"`, `address: "`+srv.Addr()+`", dial_timeout: 1s`, 1)
	te := launchEngine(t, t.Context(), parseConfig(t, cfg), Options{State: dir})
	if !gone(member) {
		t.Errorf("leftover member %d alive after READY=1", member)
	}
	if got := te.logged("stale lease not released yet; the janitor retries"); got != 1 {
		t.Errorf("got %d hand-overs to the janitor, want 1", got)
	}
	srv.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for te.logged("phantom lease released") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the janitor did not release the stale lease within 10s of Redis answering")
		}
		time.Sleep(20 * time.Millisecond) // the janitor retries every 250 ms
	}
	if h := leaseHolder(t, rl); h == "n1:old" {
		t.Errorf("old lease still held after the janitor released it")
	}
	te.stop(t)
}
