package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// job wraps one job's extra YAML lines into a valid config.
func job(extra string) string {
	return "jobs:\n- name: j\n  schedule: '0 2 * * *'\n  command: 'true'\n" + extra
}

func TestValidate_Rules(t *testing.T) {
	tests := []struct {
		name, yaml, format string
		opts               Options
		want               string // substring of one problem line
	}{
		{"unknown top-level key", "nod: {}\n", "", Options{}, `nod: unknown key "nod" (did you mean "node"?)`},
		{"unknown nested key", "redis: {adress: x}\n", "", Options{}, `redis.adress: unknown key "adress" (did you mean "address"?)`},
		{"unknown tls key", "redis: {tls: {enable: true}}\n", "", Options{}, `redis.tls.enable: unknown key "enable" (did you mean "enabled"?)`},
		{"unknown job key", job("  comand: x\n"), "", Options{}, `jobs[0] "j": comand: unknown key "comand" (did you mean "command"?)`},
		{"unknown defaults key", "defaults: {timout: 1m}\n", "", Options{}, `defaults.timout: unknown key "timout" (did you mean "timeout"?)`},
		{"name not allowed in defaults", "defaults: {name: x}\n", "", Options{}, `defaults.name: unknown key "name"`},
		{"job field at top level", "timeout: 1m\n", "", Options{}, `timeout: unknown key "timeout": job fields go under`},
		{"unknown key, no close match", "zzzzzz: 1\n", "", Options{}, `zzzzzz: unknown key "zzzzzz"`},
		{"missing name", "jobs:\n- {schedule: '@daily', command: x}\n", "", Options{}, `jobs[0]: missing name`},
		{"missing schedule", "jobs:\n- {name: a, command: x}\n", "", Options{}, `jobs[0] "a": schedule: missing schedule`},
		{"missing command", "jobs:\n- {name: a, schedule: '@daily'}\n", "", Options{}, `jobs[0] "a": command: missing command`},
		{"ill-formed name", "jobs:\n- {name: 'a b', schedule: '@daily', command: x}\n", "", Options{}, `name: "a b" is not a valid name`},
		{"name too long", "jobs:\n- {name: " + strings.Repeat("x", 129) + ", schedule: '@daily', command: x}\n", "", Options{}, `is not a valid name`},
		{"duplicate name", "jobs:\n- {name: a, schedule: '@daily', command: x}\n- {name: a, schedule: '@daily', command: x}\n", "", Options{}, `jobs[1] "a": name: duplicate name "a" (also jobs[0] "a")`},
		{"4 fields", "jobs:\n- {name: a, schedule: '0 2 * *', command: x}\n", "", Options{}, `jobs[0] "a": schedule "0 2 * *": want 5 or 6 fields`},
		{"7 fields", "jobs:\n- {name: a, schedule: '0 0 2 * * * 2027', command: x}\n", "", Options{}, `got 7`},
		{"bad field", "jobs:\n- {name: a, schedule: '61 * * * *', command: x}\n", "", Options{}, `jobs[0] "a": schedule "61 * * * *": `},
		{"never fires", "jobs:\n- {name: a, schedule: '0 0 31 2 *', command: x}\n", "", Options{}, `never fires`},
		{"@reboot", "jobs:\n- {name: a, schedule: '@reboot', command: x}\n", "", Options{}, `jobs[0] "a": schedule "@reboot": @reboot is not supported`},
		{"unknown job zone", job("  timezone: Mars/Base\n"), "", Options{}, `jobs[0] "j": timezone: unknown time zone "Mars/Base"`},
		{"unknown node zone", "node: {timezone: Nowhere}\n", "", Options{}, `node.timezone: unknown time zone "Nowhere"`},
		{"unitless yaml", job("  timeout: 300\n"), "", Options{}, `jobs[0] "j": timeout: 300 needs a unit, e.g. 300s`},
		{"unitless float", job("  timeout: 1.5\n"), "", Options{}, `timeout: 1.5 needs a unit, e.g. 1.5s`},
		{"unitless string", job("  kill_grace: '30'\n"), "", Options{}, `kill_grace: "30" needs a unit, e.g. 30s`},
		{"unitless toml", "[[jobs]]\nname='j'\nschedule='@daily'\ncommand='x'\nlock_ttl=600\n", "toml", Options{}, `lock_ttl: 600 needs a unit, e.g. 600s`},
		{"unitless node", "node: {grace_period: 5}\n", "", Options{}, `node.grace_period: 5 needs a unit`},
		{"unitless env", "", "", Options{Environ: []string{"CRONLOCK_REDIS_DIAL_TIMEOUT=5"}}, `redis.dial_timeout (from CRONLOCK_REDIS_DIAL_TIMEOUT): "5" needs a unit, e.g. 5s`},
		{"not a duration", job("  jitter: soon\n"), "", Options{}, `jitter: "soon" is not a duration`},
		{"negative duration", job("  catchup_window: -5m\n"), "", Options{}, `catchup_window: -5m0s is negative`},
		{"timeout under 100ms", job("  timeout: 50ms\n"), "", Options{}, `timeout: 50ms is under 100ms`},
		{"lock_ttl under 1s", job("  lock_ttl: 10ms\n"), "", Options{}, `lock_ttl: 10ms is under 1s`},
		{"redis.db 16", "redis: {db: 16}\n", "", Options{}, `redis.db: 16 is out of range; Redis databases are 0..15`},
		{"redis.db -1", "redis: {db: -1}\n", "", Options{}, `redis.db: -1 is out of range`},
		{"redis.db not a number", "redis: {db: one}\n", "", Options{}, `redis.db: want a whole number, got "one"`},
		{"overlap enum", job("  overlap: buffer\n"), "", Options{}, `overlap: unknown value "buffer"; want one of skip, allow, queue, replace`},
		{"max_runs negative", job("  max_runs: -1\n"), "", Options{}, `max_runs: -1 is negative; use 0 for no limit`},
		{"on_lock_lost enum", job("  on_lock_lost: ignore\n"), "", Options{}, `on_lock_lost: unknown value "ignore"; want one of kill, continue`},
		{"backend enum", "lock: {backend: etcd}\n", "", Options{}, `lock.backend: unknown value "etcd"`},
		{"log.level enum", "log: {level: verbose}\n", "", Options{}, `log.level: unknown value "verbose"`},
		{"log.format enum", "log: {format: xml}\n", "", Options{}, `log.format: unknown value "xml"`},
		{"log.level flag", "", "", Options{Flags: map[string]string{"log.level": "loud"}}, `log.level (from flag): unknown value "loud"`},
		{"user not root at start", job("  user: nobody\n"), "", Options{Euid: 1000, Purpose: ForStart}, `jobs[0] "j": user: user "nobody" needs root`},
		{"mode enum", "redis: {address: a:1, mode: replicated}\n", "", Options{}, `redis.mode: unknown value "replicated"; want one of standalone, sentinel, cluster`},
		{"sentinel mode without master", "redis: {addresses: [a:1], mode: sentinel}\n", "", Options{}, `redis.sentinel_master: redis.mode is sentinel but sentinel_master is empty`},
		{"cluster mode with master", "redis: {addresses: [a:1], mode: cluster, sentinel_master: m}\n", "", Options{}, `redis.sentinel_master: is set, but redis.mode is cluster`},
		{"cluster with db", "redis: {addresses: [a:1, b:2], db: 2}\n", "", Options{}, `redis.db: 2: Redis Cluster has only database 0`},
		{"standalone with two addresses", "redis: {addresses: [a:1, b:2], mode: standalone}\n", "", Options{}, `redis.addresses: 2 addresses, but redis.mode is standalone`},
		{"min_replicas_acked negative", "redis: {address: a:1, min_replicas_acked: -1}\n", "", Options{}, `redis.min_replicas_acked: -1 is negative`},
		{"replica_ack_timeout zero", "redis: {address: a:1, replica_ack_timeout: 0}\n", "", Options{}, `redis.replica_ack_timeout: 0s is below 1ms`},
		{"enabled not bool", job("  enabled: maybe\n"), "", Options{}, `enabled: want true or false, got "maybe"`},
		{"retries negative", job("  retries: -1\n"), "", Options{}, `retries: -1 is negative`},
		{"env not a map", job("  env: [A]\n"), "", Options{}, `env: want a mapping of NAME: value, got a list`},
		{"section not a map", "redis: localhost\n", "", Options{}, `redis: want a mapping of settings`},
		{"jobs not a list", "jobs: {name: a}\n", "", Options{}, `jobs: want a list of jobs, got a mapping`},
		{"job not a map", "jobs: [hello]\n", "", Options{}, `jobs[0]: want a mapping`},
		{"bad listen", "http: {listen: nope}\n", "", Options{}, `http.listen: "nope" is not host:port`},
		{"address and addresses", "redis: {address: a:1, addresses: [b:1]}\n", "", Options{}, `set either redis.address or redis.addresses`},
		{"cert without key", "redis: {address: a:1, tls: {cert_file: c.pem}}\n", "", Options{}, `cert_file and key_file must be given together`},
		{"empty shell", job("  shell: ''\n"), "", Options{}, `shell: must not be empty`},
		{"unknown flag key", "", "", Options{Flags: map[string]string{"nope": "x"}}, `flag: unknown config key "nope"`},
		{"syntax error", "jobs: [\n", "", Options{}, `invalid YAML: line 1: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			format := tt.format
			if format == "" {
				format = "yaml"
			}
			_, err := Parse([]byte(tt.yaml), format, tt.opts)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a ValidationError", err)
			}
			for _, p := range ve.Problems {
				if strings.Contains(p.String(), tt.want) {
					return
				}
			}
			t.Errorf("no problem contains %q; got:\n%v", tt.want, err)
		})
	}
}

func TestValidate_Valid(t *testing.T) {
	tests := []struct{ name, yaml string }{
		{"cluster without hash tag", "redis: {addresses: [a:1, b:2]}\n"},
		{"cluster with one seed address", "redis: {address: a:1, mode: cluster}\n"},
		{"cluster with hash tag (a warning)", "redis: {addresses: [a:1, b:2], key_prefix: '{cronlock}:'}\n"},
		{"replicas acked", "redis: {address: a:1, min_replicas_acked: 1, replica_ack_timeout: 200ms}\n"},
		{"sentinel needs no hash tag", "redis: {addresses: [a:1, b:2], sentinel_master: mymaster}\n"},
		{"zero timeout means none", job("  timeout: 0s\n")},
		{"lock_ttl 0 means default", job("  lock_ttl: 0s\n")},
		{"29 Feb fires", "jobs:\n- {name: a, schedule: '0 0 29 2 *', command: x}\n"},
		{"numeric name", "jobs:\n- {name: 2024, schedule: '@daily', command: x}\n"},
		{"empty value means unset", job("  timeout:\n")},
		{"empty file", ""},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.yaml), "yaml", Options{}); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// A hash tag in a Cluster key prefix still works (every key in one slot)
// but is warned about: it does not scale (outside Cluster mode it is not).
// insecure_skip_verify is warned about: nothing verifies the server.
func TestValidate_RedisWarnings(t *testing.T) {
	const jobs = "jobs:\n- {name: a, schedule: '@daily', command: x}\n"
	cfg := mustParse(t, "redis: {addresses: [a:1, b:2], key_prefix: '{cronlock}:'}\n"+jobs, "yaml", Options{})
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].String(), `warning: redis.key_prefix: "{cronlock}:" holds a hash tag`) ||
		!strings.Contains(cfg.Warnings[0].String(), "one shard") {
		t.Errorf("cluster: warnings = %v, want one about the hash tag", cfg.Warnings)
	}
	if cfg := mustParse(t, "redis: {address: a:1, key_prefix: '{cronlock}:'}\n"+jobs, "yaml", Options{}); len(cfg.Warnings) != 0 {
		t.Errorf("standalone: warnings = %v, want none", cfg.Warnings)
	}
	cfg = mustParse(t, "redis: {address: a:1, tls: {enabled: true, insecure_skip_verify: true}}\n"+jobs, "yaml", Options{})
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].String(), "redis.tls.insecure_skip_verify: true: the Redis server's certificate is not verified") {
		t.Errorf("insecure_skip_verify: warnings = %v, want one saying the certificate is not verified", cfg.Warnings)
	}
	if got := mustParse(t, "redis: {address: a:1}\n", "yaml", Options{}).Redis.ReplicaAckTimeout; got != 500*time.Millisecond {
		t.Errorf("replica_ack_timeout default: got %v, want 500ms", got)
	}
}

func TestValidate_UserWarningAtValidate(t *testing.T) {
	cfg := mustParse(t, job("  user: nobody\n"), "yaml", Options{Euid: 1000, Purpose: ForValidate})
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].String(), `warning: jobs[0] "j": user: user "nobody" needs root`) {
		t.Errorf("warnings = %v", cfg.Warnings)
	}
	if cfg := mustParse(t, job("  user: nobody\n"), "yaml", Options{Euid: 0, Purpose: ForStart}); len(cfg.Warnings) != 0 {
		t.Errorf("root: warnings = %v", cfg.Warnings)
	}
}

func TestValidate_InvalidFileListsEveryProblem(t *testing.T) {
	_, err := Load("../testdata/invalid/everything.yaml", Options{})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		`jobs[0] "backup": timeout: 300 needs a unit, e.g. 300s`,
		`jobs[1] "backup": name: duplicate name "backup"`,
		`redis.db: 16 is out of range`,
		`redis.key_prefx: unknown key "key_prefx" (did you mean "key_prefix"?)`,
		`jobs[2] "four-fields": schedule "0 2 * *": want 5 or 6 fields`,
		`jobs[3] "seven-fields": schedule "0 0 2 * * * 2027": want 5 or 6 fields`,
		`jobs[4] "never": schedule "0 0 31 2 *" never fires (no such date)`,
		`jobs[5] "zoned": timezone: unknown time zone "Mars/Olympus_Mons"`,
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(ve.Problems), len(want), msg)
	}
	if ve.File != "../testdata/invalid/everything.yaml" {
		t.Errorf("File = %q", ve.File)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"address", "addresses", "password", "db", "key_prefix"}
	for in, want := range map[string]string{"adress": "address", "pasword": "password", "keyprefix": "key_prefix", "xyzzy": "", "dbb": "db"} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHookTimeoutZero: hook_timeout: 0 is accepted and means no limit.
func TestHookTimeoutZero(t *testing.T) {
	for _, v := range []string{"0", "0s"} {
		cfg := mustParse(t, job("  hook_timeout: "+v+"\n"), "yaml", Options{})
		if cfg.Jobs[0].HookTimeout != 0 || len(cfg.Warnings) != 0 {
			t.Errorf("hook_timeout: %s: got %v, warnings %q; want 0 (no limit), none", v, cfg.Jobs[0].HookTimeout, render(cfg.Warnings))
		}
	}
}
