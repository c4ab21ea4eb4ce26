//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// chaosJob is one job of the chaos config.
type chaosJob struct {
	spec  JobSpec
	work  time.Duration  // how long each run works
	extra map[string]any // more job keys
}

// chaosJobs is the job mix: every second and every 2 s, each overlap
// policy, max_runs, jitter, and runs longer than their period.
var chaosJobs = []chaosJob{
	{spec: JobSpec{Name: "every-1s", Schedule: "* * * * * *"}, work: 100 * time.Millisecond},
	{spec: JobSpec{Name: "every-2s", Schedule: "*/2 * * * * *"}, work: 200 * time.Millisecond},
	{spec: JobSpec{Name: "queue-1s", Schedule: "* * * * * *", Overlap: "queue"}, work: 1300 * time.Millisecond},
	{spec: JobSpec{Name: "replace-2s", Schedule: "*/2 * * * * *", Overlap: "replace"}, work: 3 * time.Second},
	{spec: JobSpec{Name: "allow-1s", Schedule: "* * * * * *", Overlap: "allow"}, work: 1500 * time.Millisecond,
		extra: map[string]any{"jitter": "1s"}},
	{spec: JobSpec{Name: "max-runs-1", Schedule: "* * * * * *", MaxRuns: 1}, work: 100 * time.Millisecond},
	{spec: JobSpec{Name: "jitter-2s", Schedule: "*/2 * * * * *"}, work: 200 * time.Millisecond,
		extra: map[string]any{"jitter": "1s"}},
	{spec: JobSpec{Name: "long-2s", Schedule: "*/2 * * * * *"}, work: 3 * time.Second},
}

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
	if l, _, _, _ := rb.snapshot(); l.Found || l.Reads != 1 {
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
	l, losses, bad, notes := rb.snapshot()
	if !l.Found || len(losses) != 1 || len(bad) != 0 || len(notes) != 0 {
		t.Fatalf("found %v, %d losses, bad %q, notes %q; want true, 1, none, none", l.Found, len(losses), bad, notes)
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

// Check window: due slots from checkLead after every node is up to
// checkTail before the daemons are stopped (the plan's quiet tail is
// longer, so the last faults' slots are checked); an empty restart may
// erase records of slots from lossBefore before its kill (written after the
// test's last read, or not yet audited) to lossAfter after it answered.
const (
	checkLead  = 2 * time.Second
	checkTail  = 12 * time.Second
	lossBefore = 15 * time.Second
	lossAfter  = 5 * time.Second
	ledgerPoll = 3 * time.Second
	// lockTTL is every job's lock_ttl: 5 s outlasts the longest pause
	// (3 s) after a renewal (every TTL/3), so a paused daemon's run cannot
	// outlive its lease.
	lockTTL = 5 * time.Second
	// earlyStart is how early a start line may be: the node's estimate of
	// Redis time may be off by about a round trip.
	earlyStart = 100 * time.Millisecond
)

func TestChaos(t *testing.T) {
	seconds, err := envInt("CRONLOCK_CHAOS_SECONDS", 120)
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	if v := os.Getenv("CRONLOCK_CHAOS_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CRONLOCK_CHAOS_SEED=%q: %v", v, err)
		}
	}
	plan := NewPlan(seed, seconds)
	replay := fmt.Sprintf("CRONLOCK_CHAOS_SEED=%d CRONLOCK_CHAOS_SECONDS=%d make test-chaos", seed, plan.Seconds)
	dir, err := os.MkdirTemp("", fmt.Sprintf("cronlock-chaos-%d-", seed))
	if err != nil {
		t.Fatal(err)
	}
	out := newLog(filepath.Join(dir, "chaos.log"))
	defer out.close()
	out.say("chaos: seed %d (replay: %s)", seed, replay)
	out.say("%s", plan)
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Printf("chaos: output kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})

	bin := os.Getenv("CRONLOCK_CHAOS_BINARY")
	if bin == "" {
		bin = filepath.Join(dir, "cronlock")
		build := exec.Command("go", "build", "-o", bin, "github.com/cronlock/cronlock/cmd/cronlock")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build cronlock: %v\n%s", err, b)
		}
	}
	seam, err := clockSeam(bin)
	if err != nil {
		t.Fatal(err)
	}
	if seam == "" {
		out.say("chaos: the binary has no clock seam (%s): clock faults are skipped", strings.Join(clockSeams, ", "))
	} else {
		out.say("chaos: clock faults through %s", seam)
	}

	// Redis keeps an AOF synced at every write, so that a restart that is
	// not meant to be empty loses nothing; an empty restart erases it.
	srv := redistest.StartWith(t, "--appendonly", "yes", "--appendfsync", "always")
	redisDir := strings.TrimPrefix(srv.Do("CONFIG", "GET", "dir"), "dir\n")
	rb := &redisBox{srv: srv, dir: redisDir}

	outDir := filepath.Join(dir, "out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeChaosConfig(t, dir, outDir, srv.Addr())
	var jobNames []string
	var specs []JobSpec
	for _, j := range chaosJobs {
		spec := j.spec
		spec.Late = lockTTL + time.Second
		jobNames, specs = append(jobNames, spec.Name), append(specs, spec)
	}

	var probMu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		probMu.Lock()
		defer probMu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	daemons := map[string]*daemon{}
	var order []*daemon
	for _, id := range plan.Nodes {
		d := &daemon{id: id, bin: bin, cfg: cfgPath, seam: seam, report: report,
			stateDir: filepath.Join(dir, "state", id), logPath: filepath.Join(dir, id+".log"),
			proxy: redistest.NewProxy(t, srv.Addr())}
		daemons[id], order = d, append(order, d)
		if err := d.start(0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // whatever happened: no process is left behind
		for _, d := range order {
			if cmd, _ := d.running(); cmd != nil {
				_ = cmd.Process.Signal(syscall.SIGCONT)
				_, _ = d.kill()
			}
		}
		killOpenRuns(outDir)
	})
	for _, d := range order {
		if err := d.waitLog(`"msg":"engine running"`, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	up := time.Now()
	out.mu.Lock()
	out.up = up
	out.mu.Unlock()
	out.say("chaos: %d nodes up at %s; running %d s", len(order), clock(up), plan.Seconds)

	// The ledger is read every few seconds, so that records an empty
	// restart erases were seen (restart reads it once more before the kill).
	stopReads := make(chan struct{})
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		tick := time.NewTicker(ledgerPoll)
		defer tick.Stop()
		for {
			select {
			case <-stopReads:
				return
			case <-tick.C:
				rb.read(jobNames)
			}
		}
	}()

	var killMu sync.Mutex
	var kills []NodeKill
	var wg sync.WaitGroup
	for i, f := range plan.Faults {
		time.Sleep(time.Until(up.Add(f.At)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := fmt.Sprintf("#%d %s %s", i+1, f.Kind, f.Target)
			switch f.Kind {
			case FaultPause:
				d := daemons[f.Target]
				if !d.pause() {
					out.say("%s: not running, skipped", tag)
					return
				}
				out.say("%s: SIGSTOP", tag)
				time.Sleep(f.Dur)
				d.resume()
				out.say("%s: SIGCONT", tag)
			case FaultKill:
				d := daemons[f.Target]
				at, err := d.kill()
				if err != nil {
					out.say("%s: %v, skipped", tag, err)
					return
				}
				killMu.Lock()
				kills = append(kills, NodeKill{Node: d.id, At: at})
				killMu.Unlock()
				out.say("%s: SIGKILL daemon and runs (gone at %s)", tag, clock(at))
				time.Sleep(f.Dur)
				if err := d.start(0); err != nil {
					report("%s: restart: %v", tag, err)
					return
				}
				out.say("%s: started again", tag)
			case FaultPartition:
				d := daemons[f.Target]
				d.proxy.Cut()
				out.say("%s: cut from Redis", tag)
				time.Sleep(f.Dur)
				d.proxy.Restore()
				out.say("%s: reconnected", tag)
			case FaultClock:
				if seam == "" {
					out.say("%s: skipped (no clock seam)", tag)
					return
				}
				d := daemons[f.Target]
				d.term(15*time.Second, "restart with a clock offset")
				if err := d.start(f.Offset); err != nil {
					report("%s: start: %v", tag, err)
					return
				}
				out.say("%s: restarted with clock %+v", tag, f.Offset)
				time.Sleep(f.Dur)
				d.term(15*time.Second, "restart with the right clock")
				if err := d.start(0); err != nil {
					report("%s: start: %v", tag, err)
					return
				}
				out.say("%s: restarted with the right clock", tag)
			case FaultRedisEmpty, FaultRedisAOF:
				empty := f.Kind == FaultRedisEmpty
				killed, back, err := rb.restart(jobNames, empty, f.Dur)
				if err != nil {
					report("%s: %v", tag, err)
					return
				}
				what := "from its AOF"
				if empty {
					what = "EMPTY"
				}
				out.say("%s: Redis killed at %s, answering again %s at %s", tag, clock(killed), what, clock(back))
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(up.Add(time.Duration(plan.Seconds) * time.Second)))

	// Undo anything still on (nothing should be), stop every daemon.
	stopAt := time.Now()
	for _, d := range order {
		d.proxy.Restore()
		d.resume()
	}
	out.say("chaos: SIGTERM to every daemon")
	var stopWG sync.WaitGroup
	for _, d := range order {
		stopWG.Add(1)
		go func() { defer stopWG.Done(); d.term(30*time.Second, "end of the test") }()
	}
	stopWG.Wait()
	waitOpenRuns(outDir, 10*time.Second) // runs a daemon left behind finish their lines
	end := time.Now()
	rb.read(jobNames)
	close(stopReads)
	<-readsDone

	in := Input{Jobs: specs, From: up.Add(checkLead).Truncate(time.Second).Add(time.Second),
		To: stopAt.Add(-checkTail), End: end, LossBefore: lossBefore, LossAfter: lossAfter, Early: earlyStart}
	for _, j := range jobNames {
		name := filepath.Join(outDir, j+".out")
		data, err := os.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		runs, bad := ParseOutput(filepath.Base(name), data)
		in.Runs, in.Bad = append(in.Runs, runs...), append(in.Bad, bad...)
	}
	var ledgerBad, redisNotes []string
	in.Ledger, in.Losses, ledgerBad, redisNotes = rb.snapshot()
	for _, b := range ledgerBad {
		in.Bad = append(in.Bad, "ledger: "+b)
	}
	in.Kills = kills
	probMu.Lock()
	in.DaemonProblems = problems
	probMu.Unlock()
	dumpLedger(t, filepath.Join(dir, "ledger.json"), in.Ledger)

	v := Check(in)
	v.Notes = append(redisNotes, v.Notes...)
	if !in.Ledger.Found {
		v.Notes = append([]string{fmt.Sprintf("no occurrence ledger: no cronlock:occ:* key in %d reads of Redis "+
			"(the daemon does not write protocol v2's ledger); checks 4 and 5 cannot account for slots that did not run", in.Ledger.Reads)}, v.Notes...)
	}
	out.say("chaos: verdict (seed %d, %d s, %d nodes, %d faults, %d empty restarts, %d node kills):\n%s",
		seed, plan.Seconds, len(order), len(plan.Faults), len(in.Losses), len(in.Kills), v.Format(25))
	if err := os.WriteFile(filepath.Join(dir, "verdict.txt"), []byte(v.Format(1<<30)), 0o644); err != nil {
		t.Logf("verdict.txt: %v", err)
	}
	if v.Failed() {
		t.Fatalf("chaos: violations (see the table above); replay with:\n  %s\noutput kept in %s (verdict.txt lists every violation)", replay, dir)
	}
	out.say("chaos: clean; seed %d, %d s", seed, plan.Seconds)
}

// writeChaosConfig writes the daemons' config (JSON spares shell quoting).
// redis.address is each node's proxy, given by CRONLOCK_REDIS_ADDRESS.
func writeChaosConfig(t *testing.T, dir, outDir, redisAddr string) string {
	t.Helper()
	var jobs []map[string]any
	for _, j := range chaosJobs {
		// The daemon expands ${VAR} in config values at load; $${ keeps
		// the shell's ${VAR:--} for the run.
		cmd := strings.ReplaceAll(JobCommand(filepath.Join(outDir, j.spec.Name+".out"), j.work), "${", "$${")
		job := map[string]any{"name": j.spec.Name, "schedule": j.spec.Schedule, "command": cmd}
		if j.spec.Overlap != "" {
			job["overlap"] = j.spec.Overlap
		}
		if j.spec.MaxRuns > 0 {
			job["max_runs"] = j.spec.MaxRuns
		}
		for k, v := range j.extra {
			job[k] = v
		}
		jobs = append(jobs, job)
	}
	cfg := map[string]any{
		"node":     map[string]any{"shutdown_timeout": "5s"},
		"redis":    map[string]any{"address": redisAddr},
		"log":      map[string]any{"level": "info", "format": "json"},
		"defaults": map[string]any{"timezone": "UTC", "timeout": "20s", "kill_grace": "2s", "lock_ttl": lockTTL.String()},
		"jobs":     jobs,
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cronlock.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// openRunPIDs are the pids (= process groups: each run's shell leads its
// own) of the runs with a start line and no end line yet.
func openRunPIDs(outDir string) []int {
	files, _ := filepath.Glob(filepath.Join(outDir, "*.out"))
	var pids []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		runs, _ := ParseOutput(f, data)
		for _, r := range runs {
			if !r.Ended && r.PID > 0 && !processGone(r.PID) {
				pids = append(pids, r.PID)
			}
		}
	}
	return pids
}

// waitOpenRuns waits until no run without an end line is alive.
func waitOpenRuns(outDir string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for len(openRunPIDs(outDir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// killOpenRuns kills the process groups of runs still alive.
func killOpenRuns(outDir string) {
	for _, pid := range openRunPIDs(outDir) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func dumpLedger(t *testing.T, path string, l Ledger) {
	t.Helper()
	data, err := json.MarshalIndent(l, "", " ")
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		t.Logf("ledger dump: %v", err)
	}
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < MinSeconds {
		return 0, fmt.Errorf("%s=%q: want a whole number of seconds, at least %d", name, v, MinSeconds)
	}
	return n, nil
}

// chaosLog prints to stdout at once (go test -v streams it) and keeps a
// copy in the output directory; lines after up carry their offset.
type chaosLog struct {
	mu sync.Mutex
	f  *os.File
	up time.Time
}

func newLog(path string) *chaosLog {
	f, _ := os.Create(path)
	return &chaosLog{f: f}
}

func (l *chaosLog) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if !l.up.IsZero() {
		msg = fmt.Sprintf("+%6.2fs %s", time.Since(l.up).Seconds(), msg)
	}
	msg = strings.TrimRight(msg, "\n") + "\n"
	fmt.Print(msg)
	if l.f != nil {
		_, _ = l.f.WriteString(msg)
	}
}

func (l *chaosLog) close() {
	if l.f != nil {
		_ = l.f.Close()
	}
}
