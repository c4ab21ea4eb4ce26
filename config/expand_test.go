package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	env := []string{"HOME=/home/u", "EMPTY=", "NAME=world", "NESTED=${HOME}"}
	tests := []struct {
		in, want string
		warns    int
	}{
		{"plain", "plain", 0},
		{"${NAME}", "world", 0},
		{"hello ${NAME}!", "hello world!", 0},
		{"${MISSING}", "", 1},
		{"${MISSING:-fallback}", "fallback", 0},
		{"${EMPTY:-fallback}", "fallback", 0},
		{"${EMPTY}", "", 0},
		{"${NAME:-fallback}", "world", 0},
		{"${MISSING:-}", "", 0},
		{"${MISSING:-${NAME}}", "world", 0},
		{"${MISSING:-a:-b}", "a:-b", 0},
		{"${NESTED}", "${HOME}", 0}, // values are not re-expanded
		{"$NAME $1 $f $@ $#", "$NAME $1 $f $@ $#", 0},
		{"$(date +%s)", "$(date +%s)", 0},
		{"echo $$", "echo $$", 0},
		{"kill $$ && echo $$$$", "kill $$ && echo $$$$", 0},
		{"$${NAME}", "${NAME}", 0},
		{"a $${X:-y} b", "a ${X:-y} b", 0},
		{"${1}", "${1}", 0},
		{"${#NAME}", "${#NAME}", 0},
		{"${NAME%%.*}", "${NAME%%.*}", 0},
		{"${unterminated", "${unterminated", 1}, // an error, see TestValidate_Rules
		{"trailing $", "trailing $", 0},
		{"${}", "${}", 0},
		{"${NAME}${NAME}", "worldworld", 0},
		{"ünï ${NAME} cödé", "ünï world cödé", 0},
	}
	for _, tt := range tests {
		var p problems
		e := newExpander(env, p.warn, p.errMsg)
		if got := e.expand("x", tt.in); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(p.list) != tt.warns {
			t.Errorf("expand(%q): got %d problems %v, want %d", tt.in, len(p.list), p.list, tt.warns)
		}
	}
}

func TestExpand_WarningNamesPathAndVariable(t *testing.T) {
	cfg, err := Parse([]byte("jobs:\n- name: a\n  schedule: '@hourly'\n  command: echo ${NOPE}\n"), "yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 {
		t.Fatalf("got warnings %v, want 1", cfg.Warnings)
	}
	got := cfg.Warnings[0].String()
	want := `warning: jobs[0] "a": command: ${NOPE} is not set and has no default (${NOPE:-default}); it expands to ""`
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestExpand_AllStringValues(t *testing.T) {
	yaml := `
redis:
  address: ${ADDR}
  password: ${PW:-none}
  addresses: []
defaults:
  env: {FROM_DEFAULTS: "${D}"}
jobs:
- name: j
  schedule: "${SCHED:-@hourly}"
  command: ${CMD} $1
  work_dir: ${DIR}
  env: {Mixed_Case: "${V}"}
  on_success: ${HOOK}
  on_failure: echo $$${NAME}
`
	env := []string{"ADDR=r:1", "D=d", "CMD=run", "DIR=/w", "V=v", "HOOK=ok", "NAME=n"}
	cfg, err := Parse([]byte(yaml), "yaml", Options{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Jobs[0]
	checks := map[string][2]string{
		"address":  {cfg.Redis.Address, "r:1"},
		"password": {cfg.Redis.Password, "none"},
		"schedule": {j.Schedule, "@hourly"},
		"command":  {j.Command, "run $1"},
		"work_dir": {j.WorkDir, "/w"},
		"env":      {j.Env["Mixed_Case"], "v"},
		"defenv":   {j.Env["FROM_DEFAULTS"], "d"},
		"hook":     {j.OnSuccess, "ok"},
		"failure":  {j.OnFailure, "echo $$n"},
	}
	for k, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: got %q, want %q", k, c[0], c[1])
		}
	}
}

// The variables a `${…}` in redis.password references hold the secret:
// Config.SecretEnv names them (set or not, with or without a default), so
// that jobs and hooks never inherit them; variables of other keys are not
// listed.
func TestSecretEnv_NamesPasswordVariables(t *testing.T) {
	cfg := mustParse(t, "redis:\n  address: ${ADDR}\n  password: '${PW}x${PW2:-d}'\njobs:\n- {name: a, schedule: '@hourly', command: 'true'}\n",
		"yaml", Options{Environ: []string{"PW=s", "ADDR=h:1"}, Hostname: "h"})
	if want := []string{"PW", "PW2"}; !slices.Equal(cfg.SecretEnv, want) {
		t.Errorf("SecretEnv = %q, want %q", cfg.SecretEnv, want)
	}
}

// ${…} in a job's number, duration and boolean fields is expanded and the
// result converted (the value could not be written without quotes); a
// result that does not parse is an error naming the field.
func TestExpand_NonStringJobFields(t *testing.T) {
	env := []string{"R=2", "CW=30s", "EN=false", "T=5s"}
	cfg := mustParse(t, "jobs:\n- {name: a, schedule: '@hourly', command: 'true', retries: '${R:-1}', "+
		"catchup_window: '${CW:-0s}', enabled: '${EN:-true}', timeout: '${T}', jitter: '${J:-2s}'}\n",
		"yaml", Options{Environ: env, Hostname: "h"})
	j := cfg.Jobs[0]
	if j.Retries != 2 || j.CatchupWindow != 30*time.Second || j.Enabled || j.Timeout != 5*time.Second || j.Jitter != 2*time.Second {
		t.Errorf("got retries %d, catchup_window %v, enabled %v, timeout %v, jitter %v; want 2, 30s, false, 5s, 2s",
			j.Retries, j.CatchupWindow, j.Enabled, j.Timeout, j.Jitter)
	}
	_, err := Parse([]byte("jobs:\n- {name: a, schedule: '@hourly', command: 'true', retries: '${R}'}\n"), "yaml",
		Options{Environ: []string{"R=many"}, Hostname: "h"})
	if err == nil || !strings.Contains(err.Error(), "retries") {
		t.Errorf("retries from R=many: got %v, want an error naming retries", err)
	}
}

// At the top level too, a number or boolean written as ${…} is converted
// from the expanded string; written quoted without ${…} it stays an error.
func TestExpand_NonStringTopLevel(t *testing.T) {
	cfg := mustParse(t, "redis:\n  address: h:1\n  db: ${DB:-2}\n  allow_eviction: ${AE:-true}\nnode:\n  shutdown_timeout: ${ST:-7s}\n"+
		"jobs:\n- {name: a, schedule: '@hourly', command: 'true'}\n", "yaml", Options{Hostname: "h"})
	if cfg.Redis.DB != 2 || !cfg.Redis.AllowEviction || cfg.Node.ShutdownTimeout != 7*time.Second {
		t.Errorf("got db %d, allow_eviction %v, shutdown_timeout %v; want 2, true, 7s", cfg.Redis.DB, cfg.Redis.AllowEviction,
			cfg.Node.ShutdownTimeout)
	}
	_, err := Parse([]byte("redis:\n  address: h:1\n  db: '2'\njobs:\n- {name: a, schedule: '@hourly', command: 'true'}\n"),
		"yaml", Options{Hostname: "h"})
	if err == nil || !strings.Contains(err.Error(), "without quotes") {
		t.Errorf("db: '2' in the file: got %v, want the without-quotes error", err)
	}
}
