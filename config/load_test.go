package config

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, data, format string, opts Options) *Config {
	t.Helper()
	cfg, err := Parse([]byte(data), format, opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func TestLoad_SeedREADMEConfigs(t *testing.T) {
	for _, path := range []string{"../testdata/seed-readme.yaml", "../testdata/seed-readme.toml"} {
		t.Run(path, func(t *testing.T) {
			cfg, err := Load(path, Options{Hostname: "h"})
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Warnings) != 0 {
				t.Errorf("warnings: %v", cfg.Warnings)
			}
			if cfg.Node.ID != "node-1" || cfg.Node.GracePeriod != 5*time.Second {
				t.Errorf("node = %+v", cfg.Node)
			}
			if cfg.Lock.Backend != "redis" || cfg.Redis.Address != "localhost:6379" || cfg.Redis.KeyPrefix != "cronlock:" {
				t.Errorf("backend %q redis %+v", cfg.Lock.Backend, cfg.Redis)
			}
			b := cfg.Jobs[0]
			if b.Name != "backup" || b.Timeout != time.Hour || b.LockTTL != 2*time.Hour || b.WorkDir != "/var/backups" ||
				!b.Enabled || b.Env["KEY"] != "value" || b.OnSuccess != "notify.sh" || b.OnFailure != "alert.sh" {
				t.Errorf("backup = %+v", b)
			}
			if pd := cfg.Jobs[1]; pd.LockTTL != 5*time.Minute {
				t.Errorf("process-data lock_ttl = %v, want timeout+1m = 5m", pd.LockTTL)
			}
			for _, j := range cfg.Jobs {
				if j.Sched == nil || j.Location == nil {
					t.Errorf("job %s: schedule not resolved", j.Name)
				}
			}
		})
	}
}

func TestLoad_ExampleConfigs(t *testing.T) {
	for _, path := range []string{"../testdata/example.yaml", "../testdata/example.toml", "../testdata/example-redis.yaml"} {
		cfg, err := Load(path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want := "memory"
		if strings.Contains(path, "redis") {
			want = "redis"
		}
		if cfg.Lock.Backend != want {
			t.Errorf("%s: backend %q, want %q", path, cfg.Lock.Backend, want)
		}
	}
}

func TestParse_JSON(t *testing.T) {
	cfg := mustParse(t, `{"node":{"grace_period":"2s"},"jobs":[{"name":"a","schedule":"@daily","command":"true","retries":2}]}`, "json", Options{})
	if cfg.Node.GracePeriod != 2*time.Second || cfg.Jobs[0].Retries != 2 {
		t.Errorf("got %+v %+v", cfg.Node, cfg.Jobs[0])
	}
	_, err := Parse([]byte(`{"jobs":[{"name":"a","schedule":"@daily","command":"true","timeout":300}]}`), "json", Options{})
	if err == nil || !strings.Contains(err.Error(), "needs a unit, e.g. 300s") {
		t.Errorf("JSON timeout 300: got %v", err)
	}
}

func TestLoad_UnsupportedExtension(t *testing.T) {
	for _, p := range []string{"c.conf", "c.YAML", "noext"} {
		_, err := Load(p, Options{})
		if err == nil || !strings.Contains(err.Error(), ".yaml, .yml, .toml or .json") {
			t.Errorf("Load(%q) = %v, want an error naming the supported extensions", p, err)
		}
	}
}

func TestLoad_MissingFile(t *testing.T) {
	_, err := Load("does-not-exist.yaml", Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want ErrNotExist", err)
	}
}

func TestDefaults_Applied(t *testing.T) {
	cfg := mustParse(t, "jobs:\n- {name: a, schedule: '@hourly', command: 'true'}\n", "yaml", Options{Hostname: "web1"})
	if !regexp.MustCompile(`^web1-[0-9a-f]{8}$`).MatchString(cfg.Node.ID) {
		t.Errorf("node.id = %q, want web1-<8 hex>", cfg.Node.ID)
	}
	if cfg.Node.ShutdownTimeout != 30*time.Second || cfg.Node.MaxClockSkew != 2*time.Second || cfg.Node.GracePeriod != 0 {
		t.Errorf("node = %+v", cfg.Node)
	}
	if cfg.Lock.Backend != "memory" || cfg.Redis.Address != "" || cfg.Redis.KeyPrefix != "cronlock:" || cfg.Redis.DialTimeout != 5*time.Second {
		t.Errorf("backend %q redis %+v", cfg.Lock.Backend, cfg.Redis)
	}
	if cfg.Log.Level != "info" {
		t.Errorf("log.level = %q", cfg.Log.Level)
	}
	j := cfg.Jobs[0]
	if j.Shell != "/bin/sh" || j.KillGrace != 10*time.Second || !j.Enabled || j.Overlap != "skip" || j.OnLockLost != "kill" ||
		j.RetryBackoff != 10*time.Second || j.HookTimeout != time.Minute || j.LockTTL != 5*time.Minute || j.Timeout != 0 {
		t.Errorf("job defaults = %+v", j)
	}
	if want := HostZone(nil); j.Location.String() != want.String() {
		t.Errorf("location = %v, want the host zone %v", j.Location, want)
	}
}

func TestDefaults_MergedIntoJobs(t *testing.T) {
	cfg := mustParse(t, `
node: {timezone: Asia/Tokyo}
defaults:
  timeout: 10m
  shell: /bin/bash
  enabled: false
  timezone: Europe/Berlin
  env: {A: from-defaults, B: from-defaults}
jobs:
- {name: inherits, schedule: '@hourly', command: x}
- name: overrides
  schedule: 'CRON_TZ=America/New_York 0 1 * * *'
  command: x
  timeout: 1m
  enabled: true
  timezone: UTC
  env: {B: from-job, C: from-job}
`, "yaml", Options{})
	in, ov := cfg.Jobs[0], cfg.Jobs[1]
	if in.Timeout != 10*time.Minute || in.Shell != "/bin/bash" || in.Enabled || in.LockTTL != 11*time.Minute || in.Location.String() != "Europe/Berlin" {
		t.Errorf("inherits = %+v", in)
	}
	if ov.Timeout != time.Minute || !ov.Enabled || ov.LockTTL != 2*time.Minute || ov.Location.String() != "America/New_York" {
		t.Errorf("overrides = %+v (location %v)", ov, ov.Location)
	}
	wantEnv := map[string]string{"A": "from-defaults", "B": "from-job", "C": "from-job"}
	for k, v := range wantEnv {
		if ov.Env[k] != v {
			t.Errorf("env[%s] = %q, want %q", k, ov.Env[k], v)
		}
	}
	if len(in.Env) != 2 {
		t.Errorf("inherits env = %v", in.Env)
	}
}

func TestLocation_NodeTimezoneWhenJobHasNone(t *testing.T) {
	cfg := mustParse(t, "node: {timezone: Asia/Tokyo}\njobs:\n- {name: a, schedule: '0 9 * * *', command: x}\n", "yaml", Options{})
	if got := cfg.Jobs[0].Location.String(); got != "Asia/Tokyo" {
		t.Errorf("location = %s, want Asia/Tokyo", got)
	}
}

const precedenceFile = "log: {level: warn}\nredis: {address: file:1, db: 3}\nnode: {id: file-node}\n"

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name            string
		file            string
		env             []string
		flags           map[string]string
		level, addr, id string
		db              int
	}{
		{"default", "", nil, nil, "info", "", "", 0},
		{"file", precedenceFile, nil, nil, "warn", "file:1", "file-node", 3},
		{"env over file", precedenceFile, []string{"CRONLOCK_LOG_LEVEL=error", "CRONLOCK_REDIS_ADDRESS=env:2", "CRONLOCK_REDIS_DB=5"}, nil, "error", "env:2", "file-node", 5},
		{"env over default", "", []string{"CRONLOCK_NODE_ID=env-node"}, nil, "info", "", "env-node", 0},
		{"flag over env", precedenceFile, []string{"CRONLOCK_LOG_LEVEL=error"}, map[string]string{"log.level": "debug"}, "debug", "file:1", "file-node", 3},
		{"empty env ignored", precedenceFile, []string{"CRONLOCK_LOG_LEVEL="}, nil, "warn", "file:1", "file-node", 3},
		{"unrelated env ignored", precedenceFile, []string{"LOG_LEVEL=debug", "CRONLOCK_JOB=x"}, nil, "warn", "file:1", "file-node", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.file, "yaml", Options{Environ: tt.env, Flags: tt.flags})
			if cfg.Log.Level != tt.level || cfg.Redis.Address != tt.addr || cfg.Redis.DB != tt.db {
				t.Errorf("got level %q addr %q db %d, want %q %q %d", cfg.Log.Level, cfg.Redis.Address, cfg.Redis.DB, tt.level, tt.addr, tt.db)
			}
			if tt.id != "" && cfg.Node.ID != tt.id {
				t.Errorf("node.id = %q, want %q", cfg.Node.ID, tt.id)
			}
		})
	}
}

func TestBackend(t *testing.T) {
	tests := []struct {
		name, file    string
		env           []string
		flags         map[string]string
		backend, addr string
	}{
		{"nothing: memory", "", nil, nil, "memory", ""},
		{"address in file", "redis: {address: r:1}", nil, nil, "redis", "r:1"},
		{"address in env", "", []string{"CRONLOCK_REDIS_ADDRESS=e:1"}, nil, "redis", "e:1"},
		{"address by flag", "", nil, map[string]string{"redis.address": "f:1"}, "redis", "f:1"},
		{"other redis keys only", "redis: {db: 2, key_prefix: 'x:'}", nil, nil, "memory", ""},
		{"explicit redis uses default address", "lock: {backend: redis}", nil, nil, "redis", "localhost:6379"},
		{"explicit memory wins", "lock: {backend: memory}\nredis: {address: r:1}", nil, nil, "memory", "r:1"},
	}
	for _, tt := range tests {
		cfg := mustParse(t, tt.file, "yaml", Options{Environ: tt.env, Flags: tt.flags})
		if cfg.Lock.Backend != tt.backend || cfg.Redis.Address != tt.addr {
			t.Errorf("%s: got %q %q, want %q %q", tt.name, cfg.Lock.Backend, cfg.Redis.Address, tt.backend, tt.addr)
		}
	}
}
