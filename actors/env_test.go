package actors

import (
	"maps"
	"os/user"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
)

// envMap reads a KEY=VALUE list the way exec does: the last entry wins.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// The daemon's systemd interface and its own CRONLOCK_* configuration never
// reach a job; everything else does, and the run variables are set.
func TestCommandEnv_DropsDaemonVariables(t *testing.T) {
	daemon := []string{"PATH=/x", "HOME=/root", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000",
		"WATCHDOG_PID=1", "LISTEN_FDS=1", "LISTEN_PID=1", "LISTEN_FDNAMES=x", "INVOCATION_ID=abc",
		"CRONLOCK_REDIS_PASSWORD=secret", "CRONLOCK_NODE_ID=n", "CRONLOCK_INTERNAL_CLOCK_OFFSET=1s", "KEEP=1", "GOMAXPROCS=8"}
	job := config.Job{Name: "j", Shell: "/bin/sh", InheritEnv: true, Env: map[string]string{"A": "b"}}
	info := RunInfo{Job: "j", RunID: "r", Node: "n1", Slot: time.Unix(60, 0), Trigger: ledger.TriggerSchedule, Fence: 3}
	env := envMap(commandEnv(JobEnviron(daemon), job, info, 2))
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
		"LISTEN_FDNAMES", "INVOCATION_ID", "CRONLOCK_REDIS_PASSWORD", "CRONLOCK_INTERNAL_CLOCK_OFFSET", "GOMAXPROCS"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s=%q reached the job, want it dropped", k, v)
		}
	}
	want := map[string]string{"PATH": "/x", "HOME": "/root", "KEEP": "1", "A": "b", "CRONLOCK_JOB": "j",
		"CRONLOCK_NODE_ID": "n1", "CRONLOCK_RUN_ID": "r", "CRONLOCK_SCHEDULED_TIME": "1970-01-01T00:01:00Z",
		"CRONLOCK_FENCING_TOKEN": "3", "CRONLOCK_ATTEMPT": "2", "CRONLOCK_TRIGGER": "schedule"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s: got %q, want %q", k, env[k], v)
		}
	}
}

// inherit_env: false starts from cron's minimal environment plus env.
func TestCommandEnv_MinimalWithoutInherit(t *testing.T) {
	daemon := []string{"PATH=/opt/bin", "HOME=/root", "USER=root", "LOGNAME=root", "LANG=C.UTF-8", "TZ=UTC", "EDITOR=vi"}
	job := config.Job{Name: "j", Shell: "/bin/bash", Env: map[string]string{"A": "b"}}
	got := commandEnv(JobEnviron(daemon), job, RunInfo{Job: "j", Trigger: ledger.TriggerManual}, 1)
	var names []string
	for k := range envMap(got) {
		if !strings.HasPrefix(k, "CRONLOCK_") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if want := []string{"A", "HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TZ", "USER"}; !slices.Equal(names, want) {
		t.Errorf("variables: got %v, want %v", names, want)
	}
	if m := envMap(got); m["PATH"] != "/usr/bin:/bin" || m["SHELL"] != "/bin/bash" || m["CRONLOCK_SCHEDULED_TIME"] != "" {
		t.Errorf("got PATH %q SHELL %q scheduled %q, want /usr/bin:/bin, /bin/bash, empty", m["PATH"], m["SHELL"], m["CRONLOCK_SCHEDULED_TIME"])
	}
}

// inherit_env: false without a user: LOGNAME, USER and HOME come from the
// passwd entry of the daemon's own user, as cron sets them from the
// crontab owner's (crontab(5)), whether or not the daemon's environment
// has them; the job's env still wins.
func TestCommandEnv_MinimalHasOwnerIdentity(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Skipf("no passwd entry for this process's user: %v", err)
	}
	for _, daemon := range [][]string{
		{"PATH=/opt/bin"}, // no identity at all (a container, a bare systemd unit)
		{"HOME=/elsewhere", "USER=someone", "LOGNAME=someone"},
	} {
		job := config.Job{Name: "j", Shell: "/bin/sh"}
		m := envMap(commandEnv(JobEnviron(daemon), job, RunInfo{Job: "j"}, 1))
		if m["LOGNAME"] != u.Username || m["USER"] != u.Username || m["HOME"] != u.HomeDir || m["SHELL"] != "/bin/sh" {
			t.Errorf("daemon env %v: got LOGNAME %q USER %q HOME %q SHELL %q, want %s %s %s /bin/sh",
				daemon, m["LOGNAME"], m["USER"], m["HOME"], m["SHELL"], u.Username, u.Username, u.HomeDir)
		}
		job.Env = map[string]string{"HOME": "/srv"}
		if m := envMap(commandEnv(JobEnviron(daemon), job, RunInfo{Job: "j"}, 1)); m["HOME"] != "/srv" {
			t.Errorf("job env HOME: got %q, want /srv (env wins)", m["HOME"])
		}
	}
	// inherit_env: true passes the daemon's environment as it is.
	m := envMap(commandEnv(JobEnviron([]string{"PATH=/opt/bin"}), config.Job{Name: "j", Shell: "/bin/sh", InheritEnv: true}, RunInfo{Job: "j"}, 1))
	if _, ok := m["LOGNAME"]; ok {
		t.Errorf("inherit_env true: LOGNAME %q added, want the daemon's environment unchanged", m["LOGNAME"])
	}
}

// A job with a user gets that user's HOME, USER and LOGNAME (not the
// daemon's); the job's env still wins.
func TestCommandEnv_UserIdentity(t *testing.T) {
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody on this machine: %v", err)
	}
	daemon := []string{"HOME=/root", "USER=root", "LOGNAME=root"}
	job := config.Job{Name: "j", Shell: "/bin/sh", User: "nobody", InheritEnv: true}
	m := envMap(commandEnv(JobEnviron(daemon), job, RunInfo{Job: "j"}, 1))
	if m["HOME"] != u.HomeDir || m["USER"] != "nobody" || m["LOGNAME"] != "nobody" || m["SHELL"] != "/bin/sh" {
		t.Errorf("got HOME %q USER %q LOGNAME %q SHELL %q, want %q nobody nobody /bin/sh", m["HOME"], m["USER"], m["LOGNAME"], m["SHELL"], u.HomeDir)
	}
	job.Env = map[string]string{"HOME": "/srv"}
	if m := envMap(commandEnv(nil, job, RunInfo{Job: "j"}, 1)); m["HOME"] != "/srv" {
		t.Errorf("job env HOME: got %q, want /srv (env wins)", m["HOME"])
	}
}

// The base environment built once per configuration gives every run the
// same environment as building it per run, and runs never share a slice.
func TestRunEnv_BaseBuiltOnceMatchesPerRun(t *testing.T) {
	daemon := JobEnviron([]string{"PATH=/opt/bin", "HOME=/root", "EDITOR=vi", "CRONLOCK_REDIS_PASSWORD=x"})
	for _, inherit := range []bool{true, false} {
		job := config.Job{Name: "j", Shell: "/bin/sh", InheritEnv: inherit, Env: map[string]string{"A": "b", "EDITOR": "ed"}}
		base := jobBaseEnv(daemon, job)
		if base == nil {
			t.Fatalf("inherit %v: no base for a job without a user", inherit)
		}
		for attempt, info := range []RunInfo{{Job: "j", RunID: "r1", Slot: time.Unix(60, 0), Fence: 3}, {Job: "j", RunID: "r2", Fence: 4}} {
			got, want := runEnv(base, daemon, job, info, attempt+1), commandEnv(daemon, job, info, attempt+1)
			if !maps.Equal(envMap(got), envMap(want)) || len(got) != len(want) {
				t.Errorf("inherit %v, run %s: got %v, want %v", inherit, info.RunID, got, want)
			}
		}
		a := runEnv(base, daemon, job, RunInfo{Job: "j", RunID: "a"}, 1)
		b := runEnv(base, daemon, job, RunInfo{Job: "j", RunID: "b"}, 1)
		if envMap(a)["CRONLOCK_RUN_ID"] != "a" || envMap(b)["CRONLOCK_RUN_ID"] != "b" {
			t.Errorf("inherit %v: runs share their environment: %v, %v", inherit, a, b)
		}
	}
	if base := jobBaseEnv(daemon, config.Job{Name: "j", User: "nobody"}); base != nil {
		t.Errorf("a job with a user: got base %v, want nil (HOME etc. looked up per run)", base)
	}
}
