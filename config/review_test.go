package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// problemsOf parses data and returns every problem (errors and warnings).
func problemsOf(t *testing.T, data, format string, opts Options) []Problem {
	t.Helper()
	cfg, err := Parse([]byte(data), format, opts)
	var ve *ValidationError
	switch {
	case errors.As(err, &ve):
		return ve.Problems
	case err != nil:
		t.Fatalf("Parse: %v", err)
	}
	return cfg.Warnings
}

func render(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// TestValidate_Findings lists, for each input, every problem expected (in
// order), so a problem reported twice or an extra "missing …" fails.
func TestValidate_Findings(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 200)
	two := "- {name: a, schedule: '@daily', command: x}\n- {name: b, schedule: '@daily', command: x}\n"
	tests := []struct {
		name, data, format string
		opts               Options
		want               []string
	}{
		// 1. defaults are checked once, under defaults.<key>.
		{"defaults enum once", "defaults: {overlap: never}\njobs:\n" + two, "", Options{},
			[]string{`defaults.overlap: unknown value "never"; want one of skip, allow, queue, replace`}},
		{"defaults type once", "defaults: {timeout: 300, command: [x]}\njobs:\n- {name: a, schedule: '@daily'}\n- {name: b, schedule: '@daily'}\n", "", Options{},
			[]string{`defaults.command: want a string, got a list`, `defaults.timeout: 300 needs a unit, e.g. 300s (units: ms, s, m, h)`}},
		{"defaults zone once", "defaults: {timezone: Mars/Base}\njobs:\n" + two, "", Options{},
			[]string{`defaults.timezone: unknown time zone "Mars/Base"; use an IANA name such as Europe/Berlin or UTC`}},
		{"defaults user once", "defaults: {user: root}\njobs:\n" + two, "", Options{Euid: 1000, Purpose: ForStart},
			[]string{`defaults.user: user "root" needs root, but cronlock runs as uid 1000`}},
		{"job overrides bad default", "defaults: {overlap: never}\njobs:\n- {name: a, schedule: '@daily', command: x, overlap: allow}\n", "", Options{},
			[]string{`defaults.overlap: unknown value "never"; want one of skip, allow, queue, replace`}},
		// 2. the suggested fix is a valid duration.
		{"huge float", job("  hook_timeout: 1e9\n"), "", Options{},
			[]string{`jobs[0] "j": hook_timeout: 1000000000 needs a unit, e.g. 1000000000s (units: ms, s, m, h)`}},
		{"too huge", job("  hook_timeout: 1e12\n"), "", Options{},
			[]string{`jobs[0] "j": hook_timeout: 1000000000000 needs a unit, but 1000000000000s is longer than the longest duration (2562047h); write e.g. 30s, 5m or 1h`}},
		{"fraction", job("  hook_timeout: 0.25\n"), "", Options{},
			[]string{`jobs[0] "j": hook_timeout: 0.25 needs a unit, e.g. 0.25s (units: ms, s, m, h)`}},
		// 3. a bare 0 is a duration.
		{"bare zero", job("  timeout: 0\n  catchup_window: '0'\n"), "", Options{}, nil},
		{"bare zero env", "jobs:\n" + two, "", Options{Environ: []string{"CRONLOCK_NODE_GRACE_PERIOD=0"}}, nil},
		// 4. no weak typing for file values.
		{"retries string", job("  retries: '3'\n"), "", Options{},
			[]string{`jobs[0] "j": retries: want a number, got the string "3"; write 3 without quotes`}},
		{"enabled string", job("  enabled: 'true'\n"), "", Options{},
			[]string{`jobs[0] "j": enabled: want true or false, got the string "true"; write true without quotes`}},
		{"db string", "redis: {db: '2'}\n" + "jobs:\n" + two, "", Options{},
			[]string{`redis.db: want a number, got the string "2"; write 2 without quotes`}},
		{"addresses string", "redis: {addresses: 'h:1'}\njobs:\n" + two, "", Options{},
			[]string{`redis.addresses: want a list, got the string "h:1"; write ["h:1"]`}},
		{"env strings", "jobs:\n" + two, "", Options{Environ: []string{"CRONLOCK_REDIS_DB=2", "CRONLOCK_REDIS_ADDRESSES=a:1,b:2", "CRONLOCK_REDIS_SENTINEL_MASTER=m", "CRONLOCK_REDIS_TLS_ENABLED=true"}}, nil},
		// 5. absurd values.
		{"retries cap", job("  retries: 1000000000000\n"), "", Options{},
			[]string{`jobs[0] "j": retries: 1000000000000 is too many; use at most 100 (each retry waits retry_backoff, doubling up to 10m)`}},
		{"jitter over interval", "jobs:\n- {name: a, schedule: '*/5 * * * *', command: x, jitter: 10m}\n", "", Options{},
			[]string{`warning: jobs[0] "a": jitter: 10m0s is longer than the 5m0s between runs of schedule "*/5 * * * *"; runs would pile up or change order; use at most 5m0s`}},
		{"jitter from defaults", "defaults: {jitter: 2h}\njobs:\n- {name: a, schedule: '@hourly', command: x}\n- {name: b, schedule: '@daily', command: x}\n", "", Options{},
			[]string{`warning: jobs[0] "a": jitter: 2h0m0s (inherited from defaults.jitter) is longer than the 1h0m0s between runs of schedule "@hourly"; runs would pile up or change order; use at most 1h0m0s`}},
		{"jitter within interval", "jobs:\n- {name: a, schedule: '@every 10m', command: x, jitter: 10m}\n", "", Options{}, nil},
		{"unterminated", job("  on_failure: 'echo ${BAD'\n"), "", Options{},
			[]string{`jobs[0] "j": on_failure: unterminated ${…}; close it with } or write $${ for a literal ${`}},
		// 6. host checks: warning at -validate, error at start.
		{"work_dir validate", job("  work_dir: /no/such/dir\n"), "", Options{},
			[]string{`warning: jobs[0] "j": work_dir: directory "/no/such/dir" does not exist on this host; the daemon will refuse to start`}},
		{"work_dir start", job("  work_dir: /no/such/dir\n"), "", Options{Purpose: ForStart},
			[]string{`jobs[0] "j": work_dir: directory "/no/such/dir" does not exist on this host`}},
		{"work_dir is a file", job("  work_dir: " + notExec + "\n"), "", Options{Purpose: ForStart},
			[]string{`jobs[0] "j": work_dir: "` + notExec + `" is not a directory`}},
		{"shell not executable", job("  shell: " + notExec + "\n"), "", Options{Purpose: ForStart},
			[]string{`jobs[0] "j": shell: shell "` + notExec + `" is not an executable file`}},
		{"shell not in PATH", job("  shell: no-such-shell\n"), "", Options{Purpose: ForStart, Environ: []string{"PATH=/bin:/usr/bin"}},
			[]string{`jobs[0] "j": shell: "no-such-shell" is not found in PATH ("/bin:/usr/bin"); give its absolute path, e.g. /bin/bash`}},
		{"shell in PATH", job("  shell: sh\n"), "", Options{Purpose: ForStart, Environ: []string{"PATH=/usr/bin:/bin"}}, nil},
		{"unknown user validate", job("  user: no-such-user-x\n"), "", Options{},
			[]string{`warning: jobs[0] "j": user: unknown user "no-such-user-x" on this host; the daemon will refuse to start`}},
		{"unknown user start", job("  user: no-such-user-x\n"), "", Options{Purpose: ForStart},
			[]string{`jobs[0] "j": user: unknown user "no-such-user-x" on this host`}},
		{"numeric user", job("  user: '0'\n"), "", Options{Purpose: ForStart}, nil},
		// 7. prefixes once.
		{"@every 500ms", "jobs:\n- {name: a, schedule: '@every 500ms', command: x}\n", "", Options{},
			[]string{`jobs[0] "a": schedule "@every 500ms": @every wants a Go duration of whole seconds, at least 1s (e.g. 10s, 5m, 1h30m)`}},
		{"yaml syntax", "jobs:\n  - name: a\n    schedule: \"0 2 * * *\n    command: true\n", "", Options{},
			[]string{`invalid YAML: line 3: found unexpected end of stream`}},
		// 8. a wrong type is not also "missing".
		{"command mapping", "jobs:\n- {name: a, schedule: '@daily', command: {x: 1}}\n", "", Options{},
			[]string{`jobs[0] "a": command: want a string, got a mapping`}},
		{"schedule list", "jobs:\n- {name: a, schedule: [1], command: x}\n", "", Options{},
			[]string{`jobs[0] "a": schedule: want a string, got a list`}},
		{"name mapping", "jobs:\n- {name: {x: 1}, schedule: '@daily', command: x}\n", "", Options{},
			[]string{`jobs[0]: name: want a string, got a mapping`}},
		// 9. documented key order within a job.
		{"key order", "jobs:\n- {name: a, zzz: 1, timeout: 5, schedule: '@daily', overlap: q}\n", "", Options{},
			[]string{`jobs[0] "a": command: missing command; give the shell command to run`,
				`jobs[0] "a": timeout: 5 needs a unit, e.g. 5s (units: ms, s, m, h)`,
				`jobs[0] "a": overlap: unknown value "q"; want one of skip, allow, queue, replace`,
				`jobs[0] "a": zzz: unknown key "zzz"`}},
		// 10. zero jobs, any format.
		{"empty yaml", "", "", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		{"comments only", "# nothing\n", "", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		{"empty list", "jobs: []\n", "", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		{"empty json", "", "json", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		{"blank json", " \n", "json", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		{"empty toml", "", "toml", Options{}, []string{`warning: jobs: no jobs configured; add at least one job under ` + "`jobs:`"}},
		// 11. invalid UTF-8 in any format.
		{"utf8 json", "{\"node\": {\"id\": \"a\xffb\"}}", "json", Options{},
			[]string{`invalid UTF-8 at byte offset 18 (line 1, column 19); save the file as UTF-8`}},
		{"utf8 yaml", "node:\n  id: a\xffb\n", "", Options{},
			[]string{`invalid UTF-8 at byte offset 13 (line 2, column 8); save the file as UTF-8`}},
		{"utf8 toml", "[node]\nid = \"a\xffb\"\n", "toml", Options{},
			[]string{`invalid UTF-8 at byte offset 14 (line 2, column 8); save the file as UTF-8`}},
		// 12. an invalid name is not echoed in the path.
		{"long name", "jobs:\n- {name: " + long + ", schedule: '@daily', command: x, timeout: 5}\n", "", Options{},
			[]string{`jobs[0]: name: "` + long[:40] + `"… (200 characters) is not a valid name: use 1-128 of A-Z a-z 0-9 . _ -`,
				`jobs[0]: timeout: 5 needs a unit, e.g. 5s (units: ms, s, m, h)`}},
		// 13. JSON syntax errors carry line:column.
		{"json syntax", "{\"jobs\": [\n  {\"name\": \"a\",}\n]}", "json", Options{},
			[]string{`invalid JSON at line 2, column 16: invalid character '}' looking for beginning of object key string`}},
		{"toml syntax", "[node]\nid = \n", "toml", Options{},
			[]string{`invalid TOML at line 2, column 6: incomplete number`}},
		{"json not an object", "[1]", "json", Options{},
			[]string{`invalid JSON at line 1, column 1: want an object of settings, got a JSON array`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			format := tt.format
			if format == "" {
				format = "yaml"
			}
			got := render(problemsOf(t, tt.data, format, tt.opts))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

// TestDuration_SuggestionsParse: every "e.g. X" fix for a bare number is a
// valid Go duration.
func TestDuration_SuggestionsParse(t *testing.T) {
	eg := regexp.MustCompile(`e\.g\. (\S+)`)
	for _, v := range []string{"1", "300", "1.5", "0.001", "1e9", "9e9", "1e12", "-5", "1e300", "'7'", "'2.5'", "'1e9'", ".5"} {
		ps := problemsOf(t, job("  timeout: "+v+"\n"), "yaml", Options{})
		if len(ps) != 1 {
			t.Errorf("timeout: %s: got %v, want one problem", v, render(ps))
			continue
		}
		for _, m := range eg.FindAllStringSubmatch(ps[0].Msg, -1) {
			fix := strings.TrimRight(m[1], ",")
			if _, err := time.ParseDuration(fix); err != nil {
				t.Errorf("timeout: %s: suggested %q does not parse: %v (%s)", v, fix, err, ps[0].Msg)
			}
		}
	}
}

// TestEnvOverrides_WeakTyping: environment values are strings and still
// convert to numbers, booleans and lists.
func TestEnvOverrides_WeakTyping(t *testing.T) {
	cfg := mustParse(t, "redis: {sentinel_master: m}\n", "yaml", Options{Environ: []string{
		"CRONLOCK_REDIS_DB=2", "CRONLOCK_REDIS_ADDRESSES=a:1, b:2", "CRONLOCK_REDIS_TLS_ENABLED=true"}})
	if cfg.Redis.DB != 2 || strings.Join(cfg.Redis.Addresses, ",") != "a:1,b:2" || !cfg.Redis.TLS.Enabled {
		t.Errorf("got %+v", cfg.Redis)
	}
}

// The host zone is named as IANA names it (from TZ here), not "Local".
func TestHostZone_FromTZ(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"TZ=Europe/Berlin", "Europe/Berlin"}, {"TZ=:America/New_York", "America/New_York"},
		{"TZ=Not/AZone", time.Local.String()},
	} {
		if got := HostZone([]string{c.env}).String(); got != c.want {
			t.Errorf("HostZone(%q): got %q, want %q", c.env, got, c.want)
		}
	}
}
