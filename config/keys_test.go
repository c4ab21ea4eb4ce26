package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// scalarKeys is the expected key set outside `jobs`/`defaults`, written out
// by hand on purpose: keyTable derives it from the struct tags, and this
// table pins it. Each key has a value (as an environment variable or flag
// would carry it, and as the file would), the field it must land in, and
// that field's expected value. The values are distinct so that two keys
// wired to one field show up. alone marks a key that conflicts with another
// one (redis.address vs redis.addresses) and is set in a run of its own.
var scalarKeys = []struct {
	key   string
	str   string // environment / flag value
	file  any    // the same value, typed as in a file
	field func(*Config) any
	want  any
	alone bool
}{
	{"node.id", "env-node", "env-node", func(c *Config) any { return c.Node.ID }, "env-node", false},
	{"node.grace_period", "3s", "3s", func(c *Config) any { return c.Node.GracePeriod }, 3 * time.Second, false},
	{"node.timezone", "Europe/Berlin", "Europe/Berlin", func(c *Config) any { return c.Node.Timezone }, "Europe/Berlin", false},
	{"node.shutdown_timeout", "4s", "4s", func(c *Config) any { return c.Node.ShutdownTimeout }, 4 * time.Second, false},
	{"node.max_clock_skew", "5s", "5s", func(c *Config) any { return c.Node.MaxClockSkew }, 5 * time.Second, false},
	{"node.heartbeat_interval", "2s", "2s", func(c *Config) any { return c.Node.HeartbeatInterval }, 2 * time.Second, false},
	{"node.state_dir", "/env/state", "/env/state", func(c *Config) any { return c.Node.StateDir }, "/env/state", false},
	{"node.tags", "role=db,zone=a", map[string]any{"role": "db", "zone": "a"}, func(c *Config) any { return c.Node.Tags }, map[string]string{"role": "db", "zone": "a"}, false},
	{"node.max_parallel", "7", 7, func(c *Config) any { return c.Node.MaxParallel }, 7, false},
	{"lock.backend", "redis", "redis", func(c *Config) any { return c.Lock.Backend }, "redis", false},
	{"ledger.retention", "72h", "72h", func(c *Config) any { return c.Ledger.Retention }, 72 * time.Hour, false},
	{"ledger.max_occurrences", "50", 50, func(c *Config) any { return c.Ledger.MaxOccurrences }, 50, false},
	{"redis.address", "single:1", "single:1", func(c *Config) any { return c.Redis.Address }, "single:1", true},
	{"redis.addresses", "s1:26379, s2:26379", []any{"s1:26379", "s2:26379"}, func(c *Config) any { return c.Redis.Addresses }, []string{"s1:26379", "s2:26379"}, false},
	{"redis.username", "env-user", "env-user", func(c *Config) any { return c.Redis.Username }, "env-user", false},
	{"redis.password", "env-pass", "env-pass", func(c *Config) any { return c.Redis.Password }, "env-pass", false},
	{"redis.db", "7", 7, func(c *Config) any { return c.Redis.DB }, 7, false},
	{"redis.key_prefix", "{env}:", "{env}:", func(c *Config) any { return c.Redis.KeyPrefix }, "{env}:", false},
	{"redis.sentinel_master", "env-master", "env-master", func(c *Config) any { return c.Redis.SentinelMaster }, "env-master", false},
	{"redis.tls.enabled", "true", true, func(c *Config) any { return c.Redis.TLS.Enabled }, true, false},
	{"redis.tls.ca_file", "/env/ca.pem", "/env/ca.pem", func(c *Config) any { return c.Redis.TLS.CAFile }, "/env/ca.pem", false},
	{"redis.tls.cert_file", "/env/cert.pem", "/env/cert.pem", func(c *Config) any { return c.Redis.TLS.CertFile }, "/env/cert.pem", false},
	{"redis.tls.key_file", "/env/key.pem", "/env/key.pem", func(c *Config) any { return c.Redis.TLS.KeyFile }, "/env/key.pem", false},
	{"redis.tls.server_name", "env.example", "env.example", func(c *Config) any { return c.Redis.TLS.ServerName }, "env.example", false},
	{"redis.tls.insecure_skip_verify", "true", true, func(c *Config) any { return c.Redis.TLS.InsecureSkipVerify }, true, false},
	{"redis.dial_timeout", "6s", "6s", func(c *Config) any { return c.Redis.DialTimeout }, 6 * time.Second, false},
	{"redis.allow_eviction", "true", true, func(c *Config) any { return c.Redis.AllowEviction }, true, false},
	{"redis.mode", "sentinel", "sentinel", func(c *Config) any { return c.Redis.Mode }, "sentinel", false},
	{"redis.min_replicas_acked", "2", 2, func(c *Config) any { return c.Redis.MinReplicasAcked }, 2, false},
	{"redis.replica_ack_timeout", "750ms", "750ms", func(c *Config) any { return c.Redis.ReplicaAckTimeout }, 750 * time.Millisecond, false},
	{"log.level", "debug", "debug", func(c *Config) any { return c.Log.Level }, "debug", false},
	{"log.format", "json", "json", func(c *Config) any { return c.Log.Format }, "json", false},
	{"http.listen", "127.0.0.1:9999", "127.0.0.1:9999", func(c *Config) any { return c.HTTP.Listen }, "127.0.0.1:9999", false},
	{"http.token_file", "/env/token", "/env/token", func(c *Config) any { return c.HTTP.TokenFile }, "/env/token", false},
	{"http.auth", "writes", "writes", func(c *Config) any { return c.HTTP.Auth }, "writes", false},
	{"output.max_bytes", "4096", 4096, func(c *Config) any { return c.Output.MaxBytes }, 4096, false},
	{"output.redact", "tok-[0-9]+, pw=\\S+", []any{"tok-[0-9]+", "pw=\\S+"}, func(c *Config) any { return c.Output.Redact }, []string{"tok-[0-9]+", "pw=\\S+"}, false},
}

func TestKeys_DerivedFromStructTags(t *testing.T) {
	var want []string
	for _, k := range scalarKeys {
		want = append(want, k.key)
	}
	if got := Keys(); !slices.Equal(got, want) {
		t.Errorf("Keys() =\n  %q\nwant\n  %q", got, want)
	}
	var fromFields []string
	for _, f := range new(Config).fields() {
		fromFields = append(fromFields, f.key)
	}
	if !slices.Equal(fromFields, want) {
		t.Errorf("fields() keys = %q, want %q", fromFields, want)
	}
	if want := []string{"node", "lock", "ledger", "redis", "redis.tls", "log", "http", "output"}; !slices.Equal(sections, want) {
		t.Errorf("sections = %q, want %q", sections, want)
	}
	children := map[string][]string{
		"":           {"node", "lock", "ledger", "redis", "log", "http", "output", "defaults", "jobs", "notify"},
		"output.":    {"max_bytes", "redact"},
		"ledger.":    {"retention", "max_occurrences"},
		"node.":      {"id", "grace_period", "timezone", "shutdown_timeout", "max_clock_skew", "heartbeat_interval", "state_dir", "tags", "max_parallel"},
		"lock.":      {"backend"},
		"redis.":     {"address", "addresses", "username", "password", "db", "key_prefix", "sentinel_master", "tls", "dial_timeout", "allow_eviction", "mode", "min_replicas_acked", "replica_ack_timeout"},
		"redis.tls.": {"enabled", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"},
		"log.":       {"level", "format"},
		"http.":      {"listen", "token_file", "auth"},
	}
	for prefix, want := range children {
		if got := knownChildren(prefix); !slices.Equal(got, want) {
			t.Errorf("knownChildren(%q) = %q, want %q", prefix, got, want)
		}
	}
	for k := range builtinDefaults() {
		if !slices.Contains(want, k) {
			t.Errorf("builtinDefaults has %q, which is not a key", k)
		}
	}
}

// TestKeys_EverySourceSetsEveryKey sets every key from the environment
// (CRONLOCK_…), from flags and from the file, and checks that each lands in
// its own field.
func TestKeys_EverySourceSetsEveryKey(t *testing.T) {
	for _, alone := range []bool{false, true} {
		var environ []string
		flags := map[string]string{}
		file := map[string]any{}
		for _, k := range scalarKeys {
			if k.alone != alone {
				continue
			}
			name := EnvName(k.key)
			if name != "CRONLOCK_"+strings.ToUpper(strings.ReplaceAll(k.key, ".", "_")) {
				t.Errorf("EnvName(%q) = %q", k.key, name)
			}
			environ = append(environ, name+"="+k.str)
			flags[k.key] = k.str
			m := file
			parts := strings.Split(k.key, ".")
			for _, p := range parts[:len(parts)-1] {
				if m[p] == nil {
					m[p] = map[string]any{}
				}
				m = m[p].(map[string]any)
			}
			m[parts[len(parts)-1]] = k.file
		}
		data, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		sources := []struct {
			name string
			data string
			opts Options
		}{
			{"env", "", Options{Environ: environ}},
			{"flags", "", Options{Flags: flags}},
			{"file", string(data), Options{}},
		}
		for _, src := range sources {
			cfg, err := Parse([]byte(src.data), "json", src.opts)
			if err != nil {
				t.Errorf("%s (alone=%v): %v", src.name, alone, err)
				continue
			}
			for _, k := range scalarKeys {
				if k.alone != alone {
					continue
				}
				if got := k.field(cfg); !reflect.DeepEqual(got, k.want) {
					t.Errorf("%s: %s = %#v, want %#v", src.name, k.key, got, k.want)
				}
			}
		}
	}
}

// Redis.Where names the addresses, topology, db and key prefix (never the
// password), and marks the built-in default address (issue 33: the CLI
// read localhost:6379 without saying so).
func TestRedis_Where(t *testing.T) {
	job := "jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"
	for _, c := range []struct{ yaml, want string }{
		{"redis: {address: 10.0.0.5:6379, password: hunter2, db: 3, key_prefix: 'x:'}\n", `redis 10.0.0.5:6379, db 3, key prefix "x:"`},
		{"lock: {backend: redis}\n", `redis localhost:6379 (the default address: lock.backend is redis and no redis.address is set), db 0, key prefix "cronlock:"`},
		{"redis: {addresses: [a:7000, b:7000]}\n", `redis cluster a:7000, b:7000, key prefix "cronlock:"`},
		{"redis: {addresses: [s1:26379], sentinel_master: m, db: 1}\n", `redis sentinel master "m" via s1:26379, db 1, key prefix "cronlock:"`},
	} {
		cfg := mustParse(t, c.yaml+job, "yaml", Options{Environ: []string{"CRONLOCK_NODE_STATE_DIR=/tmp/x", "CRONLOCK_NODE_ID=n"}})
		if got := cfg.Redis.Where(); got != c.want || strings.Contains(got, "hunter2") {
			t.Errorf("%s: got %s, want %s", c.yaml, got, c.want)
		}
	}
}
