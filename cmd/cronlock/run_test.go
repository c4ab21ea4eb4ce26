package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runCLI runs the program with args and environ and returns its exit code
// and outputs.
func runCLI(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, environ, &out, &errb, nil)
	return code, out.String(), errb.String()
}

func TestVersionString(t *testing.T) {
	tests := []struct{ version, commit, want string }{
		{"v1.2.3", "abc1234", "cronlock v1.2.3 (abc1234)"},
		{"", "abc1234", "cronlock abc1234"},
		{"v1.2.3", "", "cronlock v1.2.3"},
		{"", "", "cronlock (development build)"},
	}
	for _, tt := range tests {
		if got := versionString(tt.version, tt.commit); got != tt.want {
			t.Errorf("versionString(%q, %q) = %q, want %q", tt.version, tt.commit, got, tt.want)
		}
	}
}

func TestRun_Version(t *testing.T) {
	for _, flagForm := range []string{"-version", "--version"} {
		code, out, _ := runCLI(t, nil, flagForm)
		if code != 0 || !strings.HasPrefix(out, "cronlock ") || strings.Count(out, "\n") != 1 {
			t.Errorf("%s: code %d out %q", flagForm, code, out)
		}
	}
}

func TestRun_ValidateExample(t *testing.T) {
	const y, tm = "../../testdata/example.yaml", "../../testdata/example.toml"
	for _, tt := range []struct {
		path string
		args []string
	}{
		{y, []string{"-validate", "-config", y}},
		{y, []string{"--validate", "--config", y}},
		{y, []string{"-validate", "-config=" + y}},
		{tm, []string{"-config", tm, "-validate"}},
	} {
		args, path := tt.args, tt.path
		code, out, errOut := runCLI(t, nil, args...)
		want := "Configuration valid: " + path + "\nLock backend: memory (single node)\nNode id: example-node (set by node.id in the config file)\nJobs: 7\n"
		// The nightly job at 02:30 Europe/Berlin meets a DST gap every
		// spring: one notice (dst_test.go checks its text).
		const notice = `notice: jobs[6] "nightly": schedule: DST: on `
		if code != 0 || out != want || !strings.HasPrefix(errOut, notice) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: code %d\nstdout %q\nwant   %q\nstderr %q, want one line %s…", args, code, out, want, errOut, notice)
		}
	}
}

func TestRun_ValidateNeverPrintsPassword(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	yaml := "redis:\n  address: 10.0.0.5:6379\n  password: file-secret-1\njobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{{"CRONLOCK_NODE_ID=n1"}, {"CRONLOCK_NODE_ID=n1", "CRONLOCK_REDIS_PASSWORD=env-secret-2"}} {
		code, out, errOut := runCLI(t, env, "-validate", "-config", path)
		want := "Configuration valid: " + path + "\nRedis: 10.0.0.5:6379 (standalone, TLS off)\nNode id: n1 (set by the environment variable CRONLOCK_NODE_ID)\nJobs: 1\n"
		if code != 0 || out != want {
			t.Errorf("code %d stdout %q, want %q", code, out, want)
		}
		if strings.Contains(out+errOut, "secret") {
			t.Errorf("password printed: %q %q", out, errOut)
		}
	}
	code, out, _ := runCLI(t, []string{"CRONLOCK_REDIS_ADDRESS=10.9.9.9:7000"}, "-validate", "-config", path)
	if code != 0 || !strings.Contains(out, "Redis: 10.9.9.9:7000 (standalone, TLS off)\n") {
		t.Errorf("env address: code %d out %q", code, out)
	}
}

// -validate says where a default node id comes from.
func TestRun_ValidateShowsDefaultNodeID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	code, out, _ := runCLI(t, []string{"CRONLOCK_NODE_STATE_DIR=" + state}, "-validate", "-config", path)
	want := regexp.MustCompile(`\nNode id: \S+-[0-9a-f]{8} \(default: hostname \+ hash of /etc/machine-id and node.state_dir\)\n`)
	if _, err := os.Stat(machineIDFile); err != nil {
		want = regexp.MustCompile(`\nNode id: \S+-[0-9a-f]{8} \(default: new; there is no /etc/machine-id, and the daemon keeps it in ` +
			regexp.QuoteMeta(filepath.Join(state, "node-id")) + ` at its first start\)\n`)
	}
	if code != 0 || !want.MatchString(out) {
		t.Errorf("code %d stdout %q, want a line matching %s", code, out, want)
	}
}

func TestRun_ValidateListsEveryProblem(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "-validate", "-config", "../../testdata/invalid/everything.yaml")
	if code != 1 || out != "" {
		t.Fatalf("code %d stdout %q", code, out)
	}
	want := []string{
		"Configuration invalid: ../../testdata/invalid/everything.yaml (8 problem(s))",
		`jobs[0] "backup": timeout: 300 needs a unit, e.g. 300s`,
		`jobs[1] "backup": name: duplicate name "backup"`,
		`redis.db: 16 is out of range; Redis databases are 0..15`,
		`redis.key_prefx: unknown key "key_prefx" (did you mean "key_prefix"?)`,
		`jobs[2] "four-fields": schedule "0 2 * *": want 5 or 6 fields`,
		`jobs[3] "seven-fields": schedule "0 0 2 * * * 2027": want 5 or 6 fields`,
		`jobs[4] "never": schedule "0 0 31 2 *" never fires (no such date)`,
		`jobs[5] "zoned": timezone: unknown time zone "Mars/Olympus_Mons"`,
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if n := strings.Count(errOut, "\n"); n != len(want) {
		t.Errorf("got %d lines, want %d (one per problem):\n%s", n, len(want), errOut)
	}
}

func TestRun_Errors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"-validate", "-config", "missing.yaml"}, 1, "missing.yaml: no such file"},
		{[]string{"-validate", "-config", "c.ini"}, 1, `unsupported extension ".ini"`},
		{[]string{"-nope"}, 2, "flag provided but not defined: -nope"},
		{[]string{"-validate", "-config", "../../testdata/example.yaml", "-log-level", "loud"}, 1, `log.level (from flag): unknown value "loud"`},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: code %d stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// nextJSON runs `cronlock next … -json` and decodes the result.
func nextJSON(t *testing.T, args ...string) []nextResult {
	t.Helper()
	code, out, errOut := runCLI(t, nil, append(append([]string{"next"}, args...), "-json")...)
	if code != 0 {
		t.Fatalf("next %v: code %d stderr %q", args, code, errOut)
	}
	var res []nextResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
	return res
}

func TestNext_SixFieldsAreSecondsFirst(t *testing.T) {
	res := nextJSON(t, "-schedule", "0 */5 * * * *", "-timezone", "UTC", "-from", "2026-01-01T00:00:00Z", "-n", "3")
	want := []string{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:15:00Z"}
	if len(res) != 1 || res[0].Job != "" || res[0].Timezone != "UTC" || strings.Join(res[0].Times, ",") != strings.Join(want, ",") {
		t.Errorf("got %+v, want times %v", res, want)
	}
}

func TestNext_SpringForwardGap(t *testing.T) {
	res := nextJSON(t, "-schedule", "30 2 * * *", "-timezone", "America/New_York", "-from", "2026-03-07T12:00:00-05:00", "-n", "2")
	if got := res[0].Times; got[0] != "2026-03-08T03:00:00-04:00" || got[1] != "2026-03-09T02:30:00-04:00" {
		t.Errorf("got %v, want 2026-03-08T03:00:00-04:00 then 2026-03-09T02:30:00-04:00", got)
	}
}

func TestNext_FallBackOnce(t *testing.T) {
	res := nextJSON(t, "-schedule", "0 2 * * *", "-timezone", "Europe/Berlin", "-from", "2026-10-24T12:00:00+02:00", "-n", "2")
	if got := res[0].Times; got[0] != "2026-10-25T02:00:00+02:00" || got[1] != "2026-10-26T02:00:00+01:00" {
		t.Errorf("got %v, want one run on 2026-10-25 then 2026-10-26", got)
	}
}

func TestNext_DayOfWeekSevenIsSunday(t *testing.T) {
	res := nextJSON(t, "-schedule", "0 0 * * 6-7", "-timezone", "UTC", "-from", "2026-01-01T00:00:00Z", "-n", "2")
	if got := res[0].Times; got[0] != "2026-01-03T00:00:00Z" || got[1] != "2026-01-04T00:00:00Z" {
		t.Errorf("got %v, want Sat 01-03 and Sun 01-04", got)
	}
}

func TestNext_EveryIsEpochAligned(t *testing.T) {
	res := nextJSON(t, "-schedule", "@every 10s", "-from", "2026-01-01T00:00:03Z", "-n", "5")
	for _, s := range res[0].Times {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil || tm.Unix()%10 != 0 {
			t.Errorf("time %s (err %v) is not at a Unix time divisible by 10", s, err)
		}
	}
	if len(res[0].Times) != 5 {
		t.Errorf("got %d times", len(res[0].Times))
	}
}

func TestNext_ConfigWithJobFilter(t *testing.T) {
	res := nextJSON(t, "-config", "../../testdata/example.yaml", "-from", "2026-01-01T00:00:00Z", "-n", "2", "nightly", "hello")
	if len(res) != 2 || res[0].Job != "nightly" || res[1].Job != "hello" {
		t.Fatalf("got %+v", res)
	}
	if res[0].Timezone != "Europe/Berlin" || res[0].Times[0] != "2026-01-01T02:30:00+01:00" {
		t.Errorf("nightly: %+v", res[0])
	}
	if len(res[1].Times) != 2 {
		t.Errorf("hello: %+v", res[1])
	}
}

func TestNext_Table(t *testing.T) {
	code, out, _ := runCLI(t, nil, "next", "-schedule", "0 9 * * *", "-timezone", "Asia/Tokyo", "-from", "2026-01-01T00:00:00Z", "-n", "1")
	if code != 0 || !strings.Contains(out, "JOB") || !strings.Contains(out, "2026-01-02 09:00:00 +09:00 Asia/Tokyo") || !strings.Contains(out, "2026-01-02 00:00:00Z") {
		t.Errorf("code %d output:\n%s", code, out)
	}
}

func TestNext_Errors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-config", "../../testdata/example.yaml", "nope"}, `unknown job "nope"`},
		{[]string{"-schedule", "@daily", "-from", "yesterday"}, `bad -from "yesterday"`},
		{[]string{"-schedule", "0 2 * *"}, `want 5 or 6 fields`},
		{[]string{"-schedule", "@daily", "-timezone", "Mars/Base"}, `unknown time zone "Mars/Base"`},
		{[]string{"-schedule", "@daily", "-n", "0"}, `-n 0: want 1..1000`},
		{[]string{"-config", "../../testdata/example.yaml", "-timezone", "UTC"}, `-timezone applies only with -schedule`},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, append([]string{"next"}, tt.args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: code %d stdout %q stderr %q; want 1 and one line containing %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// -validate prints the mode the configuration selects, given (redis.mode)
// or inferred, and whether TLS is on.
func TestRun_ValidatePrintsRedisMode(t *testing.T) {
	for _, tc := range []struct{ redis, want string }{
		{"{address: 10.0.0.5:6379}", `Redis: 10.0.0.5:6379 (standalone, TLS off)`},
		{"{address: 10.0.0.5:7000, mode: cluster}", `Redis: 10.0.0.5:7000 (cluster, TLS off)`},
		{"{addresses: [a:7000, b:7000], tls: {enabled: true}}", `Redis: a:7000, b:7000 (cluster, TLS on)`},
		{"{addresses: [s1:26379], sentinel_master: mymaster}", `Redis: s1:26379 (sentinel, master "mymaster", TLS off)`},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		yaml := "redis: " + tc.redis + "\njobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(t, []string{"CRONLOCK_NODE_ID=n1"}, "-validate", "-config", path)
		if code != 0 || !strings.Contains(out, tc.want+"\n") {
			t.Errorf("%s: code %d stdout %q stderr %q, want a line %q", tc.redis, code, out, errOut, tc.want)
		}
	}
}
