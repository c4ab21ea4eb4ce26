package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/redislock"
	"github.com/redis/rueidis"
)

// opsConfig writes a config with a Redis backend at addr (memory backend
// when addr is "") and two jobs, and returns its path.
func opsConfig(t *testing.T, addr, command string) string {
	t.Helper()
	var b strings.Builder
	if addr != "" {
		b.WriteString("redis:\n  address: \"" + addr + "\"\n")
	}
	b.WriteString("node:\n  id: node-1\n")
	b.WriteString("jobs:\n")
	b.WriteString("  - name: backup\n    schedule: \"0 2 * * *\"\n    timezone: Europe/Paris\n")
	b.WriteString("    timeout: 30s\n    kill_grace: 1s\n    command: '" + command + "'\n")
	b.WriteString("  - name: report\n    schedule: \"@every 1h\"\n    command: \"true\"\n")
	path := filepath.Join(t.TempDir(), "cronlock.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// opsRedis starts a real redis-server and returns it, a config path using
// it and a redislock client on it.
func opsRedis(t *testing.T, command string) (string, *redislock.Redis, string) {
	t.Helper()
	srv := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return opsConfig(t, srv.Addr(), command), r, srv.Addr()
}

// record appends a run of job with the given start to history.
func record(t *testing.T, r *redislock.Redis, job, node string, start time.Time, exit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	result := "success"
	if exit != 0 {
		result = "failure"
	}
	rec := ledger.RunRecord{RunID: node + start.Format("150405"), Slot: start.Truncate(time.Minute).Unix(),
		Node: node, Start: start, End: start.Add(1500 * time.Millisecond), Attempts: 1, Result: result,
		ExitCode: exit, Fence: 7, OutputTail: "out of " + node}
	if _, err := r.Finish(ctx, ledger.FinishRequest{Job: job, Record: rec}); err != nil {
		t.Fatal(err)
	}
}

func statusJSON(t *testing.T, cfg string) map[string]api.JobStatus {
	t.Helper()
	code, out, errs := runCLI(t, nil, "status", "-config", cfg, "-json")
	if code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errs)
	}
	var rows []api.JobStatus
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("status -json: %v in %q", err, out)
	}
	m := map[string]api.JobStatus{}
	for _, r := range rows {
		m[r.Job] = r
	}
	return m
}

func TestStatus_ShowsLastRun(t *testing.T) {
	cfg, r, _ := opsRedis(t, "true")
	start := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	record(t, r, "backup", "node-2", start, 0)

	rows := statusJSON(t, cfg)
	got := rows["backup"]
	if len(rows) != 2 || got.Last == nil {
		t.Fatalf("got rows %+v, want backup and report, backup with a last run", rows)
	}
	if got.Last.Node != "node-2" || got.Last.Result != "success" || got.Last.Start != "2026-03-01T02:00:00Z" {
		t.Errorf("got last %+v, want node-2 success at 2026-03-01T02:00:00Z", got.Last)
	}
	if got.Last.OutputTail != "" {
		t.Errorf("got output tail %q in status, want none", got.Last.OutputTail)
	}
	if !strings.HasSuffix(got.Next, ":00+01:00") && !strings.HasSuffix(got.Next, ":00+02:00") {
		t.Errorf("got next %q, want a Europe/Paris time", got.Next)
	}
	if rows["report"].Last != nil {
		t.Errorf("got report last %+v, want nil (never ran)", rows["report"].Last)
	}

	code, out, errs := runCLI(t, nil, "status", "-config", cfg)
	if code != 0 || !strings.Contains(out, "JOB") || !strings.Contains(out, "node-2") || !strings.Contains(out, "never") {
		t.Errorf("status table: exit %d, out %q, stderr %q; want a table with node-2 and never", code, out, errs)
	}
}

func TestPauseResume_ShownInStatus(t *testing.T) {
	cfg, _, _ := opsRedis(t, "true")
	env := []string{"USER=ops"}
	code, out, errs := runCLI(t, env, "pause", "-config", cfg, "-for", "1h", "-note", "db migration", "backup")
	host, _ := os.Hostname()
	if code != 0 || !strings.HasPrefix(out, "paused backup by ops@"+host+" at ") || !strings.HasSuffix(out, ": db migration\n") {
		t.Fatalf("pause: got exit %d, out %q, stderr %q; want 0, \"paused backup by ops@%s at …, until …: db migration\"", code, out, errs, host)
	}
	rows := statusJSON(t, cfg)
	if p := rows["backup"].Pause; !rows["backup"].Paused || rows["report"].Paused || p == nil || p.By != "ops@"+host ||
		p.Note != "db migration" || p.Until.Sub(p.At) != time.Hour {
		t.Fatalf("after pause: got paused backup=%v (%+v) report=%v, want backup paused by ops for 1h with the note",
			rows["backup"].Paused, rows["backup"].Pause, rows["report"].Paused)
	}
	if _, out, _ := runCLI(t, env, "status", "-config", cfg); !strings.Contains(out, ": db migration") {
		t.Errorf("status table does not show the note:\n%s", out)
	}
	code, out, _ = runCLI(t, []string{"USER=dev"}, "resume", "backup", "-config", cfg)
	if code != 0 || !strings.HasPrefix(out, "resumed backup (paused by ops@") {
		t.Fatalf("resume: got exit %d, out %q; want 0, \"resumed backup (paused by ops@…\"", code, out)
	}
	if rows := statusJSON(t, cfg); rows["backup"].Paused {
		t.Errorf("after resume: got paused, want not paused")
	}
	code, out, _ = runCLI(t, nil, "history", "-events", "-json", "-config", cfg, "backup")
	var evs []api.Event
	if err := json.Unmarshal([]byte(out), &evs); code != 0 || err != nil || len(evs) != 2 ||
		evs[0].Type != "resume" || evs[0].By != "dev@"+host || evs[1].Type != "pause" || evs[1].Note != "db migration" {
		t.Errorf("history -events: exit %d, %v, %+v; want resume by dev, then pause with the note", code, err, evs)
	}
	for _, bad := range [][]string{{"-for", "1h", "-until", "2099-01-01T00:00:00Z"}, {"-for", "-1h"}, {"-until", "tomorrow"},
		{"-until", "2001-01-01T00:00:00Z"}} {
		if code, _, errs := runCLI(t, nil, append(append([]string{"pause", "-config", cfg}, bad...), "backup")...); code != 2 ||
			!strings.Contains(errs, bad[len(bad)-2]) {
			t.Errorf("pause %q: exit %d, stderr %q; want 2 naming the flag", bad, code, errs)
		}
	}
}

// history lists the job's ledger newest first: each occurrence with its
// status (ran with its result, skipped with its reason); -missed keeps
// those that did not run; -runs lists the finished runs as before; -n
// bounds the table.
func TestHistory_NewestFirstJSON(t *testing.T) {
	cfg, r, _ := opsRedis(t, "true")
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	record(t, r, "backup", "node-1", t0, 0)
	record(t, r, "backup", "node-2", t0.Add(time.Hour), 4)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lost := ledger.RunRecord{RunID: "node-3", Slot: t0.Add(2 * time.Hour).Unix(), Trigger: ledger.TriggerSchedule,
		Node: "node-3", Fence: 8, Skip: ledger.SkipLockLost}
	if _, err := r.Finish(ctx, ledger.FinishRequest{Job: "backup", Record: lost}); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runCLI(t, nil, "history", "-config", cfg, "-json", "backup")
	if code != 0 {
		t.Fatalf("history: exit %d, stderr %q", code, errs)
	}
	var occ []ledger.Occurrence
	if err := json.Unmarshal([]byte(out), &occ); err != nil {
		t.Fatalf("history -json: %v in %q", err, out)
	}
	if len(occ) != 3 || occ[0].Node != "node-3" || occ[1].Node != "node-2" || occ[2].Node != "node-1" {
		t.Fatalf("got %+v, want node-3, node-2, node-1", occ)
	}
	if o := occ[0]; o.Status != "skipped" || o.Reason != ledger.SkipLockLost || o.Slot != t0.Add(2*time.Hour).Unix() {
		t.Errorf("got newest %+v, want skipped lock_lost at 04:00Z", o)
	}
	if o := occ[1]; o.Status != "ran" || o.Result != "failure" || o.ExitCode != 4 || o.Slot != t0.Add(time.Hour).Unix() ||
		o.Finished-o.Started != 1500 || o.Token != 7 || o.Attempts != 1 || o.Output != "out of node-2" {
		t.Errorf("got %+v, want ran: failure, exit 4, slot 03:00Z, 1500ms, token 7, tail", o)
	}

	code, out, _ = runCLI(t, nil, "history", "-config", cfg, "-missed", "-json", "backup")
	occ = nil
	if err := json.Unmarshal([]byte(out), &occ); code != 0 || err != nil || len(occ) != 1 || occ[0].Node != "node-3" {
		t.Errorf("history -missed: exit %d, %v, %+v; want only the skipped slot", code, err, occ)
	}

	code, out, errs = runCLI(t, nil, "history", "-config", cfg, "-runs", "-json", "backup")
	var rows []api.Run
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("history -runs -json: exit %d, %v in %q (stderr %q)", code, err, out, errs)
	}
	if len(rows) != 2 || rows[0].Node != "node-2" || rows[1].Node != "node-1" {
		t.Fatalf("runs: got %+v, want node-2 then node-1", rows)
	}
	if h := rows[0]; h.Result != "failure" || h.ExitCode != 4 || h.Slot != "2026-03-01T03:00:00Z" || h.DurationMs != 1500 ||
		h.Fence != 7 || h.Attempts != 1 || h.OutputTail != "out of node-2" {
		t.Errorf("got newest run %+v, want failure, exit 4, slot 03:00Z, 1500ms, fence 7, tail", h)
	}

	code, out, _ = runCLI(t, nil, "history", "-config", cfg, "-n", "1", "backup")
	if code != 0 || !strings.Contains(out, "node-3") || strings.Contains(out, "node-2") || !strings.Contains(out, "lock_lost") {
		t.Errorf("history -n 1 table: exit %d, out %q; want only node-3's skipped slot", code, out)
	}
}

func TestOps_UnknownJob(t *testing.T) {
	cfg, _, _ := opsRedis(t, "true")
	for _, cmd := range []string{"pause", "resume", "history", "run", "status"} {
		code, _, errs := runCLI(t, nil, cmd, "-config", cfg, "nosuch")
		if code != 1 || !strings.Contains(errs, `unknown job "nosuch"`) || !strings.Contains(errs, "backup, report") ||
			strings.Count(errs, "\n") != 1 {
			t.Errorf("%s nosuch: got exit %d, stderr %q; want 1 and one line naming it and the jobs", cmd, code, errs)
		}
	}
}

// On the memory backend the commands talk to the running daemon; without
// one they say so in one line, naming the config file, its control socket
// and what to do (the e2e test TestMemoryMode_CLIAndAPI runs them against
// a daemon).
func TestOps_MemoryBackendWithoutDaemon(t *testing.T) {
	cfg := opsConfig(t, "", "true")
	for _, args := range [][]string{{"status"}, {"history", "backup"}, {"history", "-events", "backup"}, {"pause", "backup"},
		{"resume", "backup"}, {"nodes"}} {
		code, out, errs := runCLI(t, nil, append([]string{args[0], "-config", cfg}, args[1:]...)...)
		if code != 1 || out != "" || !strings.Contains(errs, "cronlock "+args[0]+": no cronlock daemon is running with "+cfg) ||
			!strings.Contains(errs, api.SocketName(cfg)) || !strings.Contains(errs, "start the daemon with this file (cronlock -config "+cfg+")") ||
			strings.Count(errs, "\n") != 1 {
			t.Errorf("%v on memory: got exit %d, out %q, stderr %q; want 1 and one line saying no daemon runs with the file", args, code, out, errs)
		}
	}
}

// The tables say which Redis they read (address, db, key prefix) in their
// first line; errors name it too; and a status that finds no trace of
// any daemon there says to check the address, db and prefix (issue 33:
// the command read a Redis silently and showed every job as never run).
func TestOps_NamesTheRedisItReads(t *testing.T) {
	cfg, r, addr := opsRedis(t, "true")
	where := "redis " + addr + `, db 0, key prefix "cronlock:" (from ` + cfg + ")"
	code, out, errs := runCLI(t, nil, "status", "-config", cfg)
	if code != 0 || !strings.HasPrefix(out, where+"\n") || !strings.Contains(errs, "holds no state of these jobs and no live daemon's heartbeat") {
		t.Errorf("status on an empty Redis: exit %d\n%s%s\nwant a first line %q and a note on stderr", code, out, errs, where)
	}
	record(t, r, "backup", "node-2", time.Now().Add(-time.Hour), 0)
	for _, args := range [][]string{{"status"}, {"history", "backup"}, {"history", "-events", "backup"}, {"nodes"}} {
		code, out, errs := runCLI(t, nil, append([]string{args[0], "-config", cfg}, args[1:]...)...)
		if code != 0 || !strings.HasPrefix(out, where+"\n") || errs != "" {
			t.Errorf("%v: exit %d\n%s%s\nwant the first line %q, nothing on stderr", args, code, out, errs, where)
		}
	}
	// Nothing listens here: the error names the Redis it tried.
	dead := opsConfig(t, "127.0.0.1:1", "true")
	code, _, errs = runCLI(t, nil, "status", "-config", dead)
	if code != 1 || !strings.Contains(errs, `reading redis 127.0.0.1:1, db 0, key prefix "cronlock:": is it reachable`) {
		t.Errorf("status with Redis down: exit %d, stderr %q; want it named", code, errs)
	}
	// lock.backend redis without an address: the default is named as such.
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("lock: {backend: redis}\nredis: {key_prefix: 'cronlock-test-never-used:'}\n"+
		"node: {id: n}\njobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, errs = runCLI(t, nil, "status", "-config", path)
	if !strings.Contains(out+errs, "redis localhost:6379 (the default address: lock.backend is redis and no redis.address is set)") {
		t.Errorf("status with the default address: %s%s; want the default named as such", out, errs)
	}
	if _, out, _ := runCLI(t, nil, "-validate", path); !strings.Contains(out, "Redis: localhost:6379 (the default address: ") {
		t.Errorf("-validate with the default address: %s; want the default named as such", out)
	}
}

// Without -config and without cronlock.yaml in the working directory, the
// error says where the file goes.
func TestOps_NoConfigFileSaysWhere(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errs := runCLI(t, nil, "status")
	if code != 1 || !strings.Contains(errs, "open cronlock.yaml: no such file or directory; give the config file with -config FILE") {
		t.Errorf("status without a config file: exit %d %q", code, errs)
	}
}

func TestOps_Usage(t *testing.T) {
	cfg := opsConfig(t, "", "true")
	for _, args := range [][]string{{"pause"}, {"history", "a", "b"}, {"run"}, {"status", "-bogus"}} {
		if code, _, _ := runCLI(t, nil, append(args, "-config", cfg)...); code != 2 {
			t.Errorf("%v: got exit %d, want 2", args, code)
		}
	}
	code, _, errs := runCLI(t, nil, "history", "-config", cfg, "-n", "0", "backup")
	if code != 2 || !strings.Contains(errs, "-n 0: want 1..1000") {
		t.Errorf("history -n 0: got exit %d, stderr %q", code, errs)
	}
}

// leaseExists reports whether the lease key of job exists in Redis.
func leaseExists(t *testing.T, addr, job string) bool {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.Do(ctx, c.B().Exists().Key("cronlock:job:"+job).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}
