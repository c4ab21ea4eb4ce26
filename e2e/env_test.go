package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestEnv_DaemonKeepsItsOwnVariablesFromJobsAndHooks is issue 9, item 2,
// on a running daemon: started with systemd's variables, its own
// CRONLOCK_REDIS_PASSWORD and a redis.password given as ${MY_REDIS_PW},
// none of them reaches a job or a hook; a `user: nobody` job sees nobody's
// HOME and USER; `inherit_env: false` gives cron's minimal set plus env.
func TestEnv_DaemonKeepsItsOwnVariablesFromJobsAndHooks(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root for the user: nobody job")
	}
	srv := redistest.Start(t)
	srv.Do("CONFIG", "SET", "requirepass", "hunter2")
	dir, err := os.MkdirTemp("", "cronlock-env-") // not under t.TempDir (0700): nobody writes here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	dump := func(name string) string {
		return "env > " + filepath.Join(dir, name) + ".tmp && mv " +
			filepath.Join(dir, name) + ".tmp " + filepath.Join(dir, name)
	}
	jobs := []any{
		map[string]any{"name": "plain", "schedule": "* * * * * *", "command": dump("job"), "on_success": dump("hook")},
		map[string]any{"name": "nobody", "schedule": "* * * * * *", "command": dump("nobody"), "user": "nobody",
			"work_dir": "/"},
		map[string]any{"name": "minimal", "schedule": "* * * * * *", "command": dump("minimal"), "inherit_env": false,
			"env": map[string]any{"EXTRA": "1"}},
	}
	cfg := redisConfig(srv.Addr())
	cfg["jobs"] = jobs
	cfg["redis"] = map[string]any{"address": srv.Addr(), "password": "${MY_REDIS_PW}"}
	secretEnv := []string{"NOTIFY_SOCKET=" + filepath.Join(dir, "no-such-socket"), "WATCHDOG_USEC=30000000",
		"WATCHDOG_PID=1", "LISTEN_FDS=3", "LISTEN_PID=1", "LISTEN_FDNAMES=x", "INVOCATION_ID=abc",
		"CRONLOCK_REDIS_PASSWORD=hunter2", "MY_REDIS_PW=hunter2", "KEEP_ME=1"}
	n := startNode(t, writeConfig(t, cfg), withEnv(secretEnv...))
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range n.Logs() {
				if e.Str("level") != "debug" {
					t.Logf("%v", e)
				}
			}
		}
	})
	waitFor(t, 8*time.Second, "every job and the hook to dump its environment", func() bool {
		for _, f := range []string{"job", "hook", "nobody", "minimal"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return false
			}
		}
		return true
	})
	stopAll(t, 10*time.Second, n)

	env := func(name string) map[string]string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			out[k] = v
		}
		return out
	}
	for _, name := range []string{"job", "hook", "nobody", "minimal"} {
		got := env(name)
		for _, kv := range secretEnv[:len(secretEnv)-1] {
			k, _, _ := strings.Cut(kv, "=")
			if _, ok := got[k]; ok {
				t.Errorf("%s environment has %s, want it dropped", name, k)
			}
		}
		for k, v := range got {
			if strings.Contains(v, "hunter2") {
				t.Errorf("%s environment: %s holds the Redis password", name, k)
			}
		}
		if got["CRONLOCK_JOB"] == "" {
			t.Errorf("%s environment lacks its run variables (CRONLOCK_JOB)", name)
		}
	}
	if got := env("job"); got["KEEP_ME"] != "1" {
		t.Errorf("job environment lacks KEEP_ME=1 (inherit_env true keeps the rest)")
	}
	if got := env("nobody"); got["USER"] != "nobody" || got["LOGNAME"] != "nobody" || got["HOME"] == os.Getenv("HOME") {
		t.Errorf("user: nobody job: got USER=%q LOGNAME=%q HOME=%q, want nobody's", got["USER"], got["LOGNAME"], got["HOME"])
	}
	got := env("minimal")
	if got["PATH"] != "/usr/bin:/bin" || got["EXTRA"] != "1" || got["KEEP_ME"] != "" {
		t.Errorf("inherit_env false: got PATH=%q EXTRA=%q KEEP_ME=%q, want cron's minimal PATH, env's EXTRA, nothing inherited",
			got["PATH"], got["EXTRA"], got["KEEP_ME"])
	}
	if got["LOGNAME"] != "root" || got["USER"] != "root" || got["HOME"] != "/root" {
		t.Errorf("inherit_env false: got LOGNAME=%q USER=%q HOME=%q, want the daemon's user's passwd entry (root, root, /root), as cron sets them",
			got["LOGNAME"], got["USER"], got["HOME"])
	}
}
