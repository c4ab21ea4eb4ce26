package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeConfigFile writes data to dir/name and returns the path.
func writeConfigFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRun_ValidateInputChecks is issue 9, "What it must show" 7:
// -validate rejects, or warns about, each config input that used to crash
// the daemon, kill it at start, fail every run, or be silently ignored.
// Errors exit 1 like every validation error; warnings exit 0.
func TestRun_ValidateInputChecks(t *testing.T) {
	dir := t.TempDir()
	const jobYAML = "jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"
	nestedTOML := "a = " + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + "\n" // 2 MB
	tests := []struct {
		name, file, data string
		environ          []string
		code             int
		stderr           []string // each line of stderr, in order (substring match)
	}{
		{"2 MB nested TOML", "nested.toml", nestedTOML, nil, 1, []string{
			"Configuration invalid: " + filepath.Join(dir, "nested.toml") + ": nesting deeper than 64 levels at line 1; a cronlock config nests 4 levels"}},
		{"listen port not a port", "listen.yaml", "http: {listen: '127.0.0.1:notaport'}\n" + jobYAML, nil, 1, []string{
			"(1 problem(s))", `http.listen: "127.0.0.1:notaport": port "notaport" is neither a number 0..65535 nor a service name`}},
		{"TLS files missing", "tls.yaml", "redis: {address: 'r:6379', tls: {enabled: true, ca_file: /no/ca.pem, cert_file: /no/c.pem, key_file: /no/k.pem}}\n" + jobYAML, nil, 0, []string{
			`warning: redis.tls.ca_file: file "/no/ca.pem" does not exist on this host; the daemon will refuse to start`,
			`warning: redis.tls.cert_file: file "/no/c.pem" does not exist on this host; the daemon will refuse to start`,
			`warning: redis.tls.key_file: file "/no/k.pem" does not exist on this host; the daemon will refuse to start`}},
		{"1 MB command", "big.yaml", "jobs:\n- {name: big, schedule: '@daily', command: '" + strings.Repeat("x", 1<<20) + "'}\n", nil, 1, []string{
			"(1 problem(s))", `jobs[0] "big": command: the command is 1048576 bytes, more than the 131071 bytes Linux allows in one argument (MAX_ARG_STRLEN`}},
		{"JSON duplicate key", "dup.json", "{\"jobs\": [{\"name\": \"a\", \"schedule\": \"@daily\",\n \"command\": \"x\", \"name\": \"b\"}]}", nil, 1, []string{
			"Configuration invalid: " + filepath.Join(dir, "dup.json") + `: invalid JSON at line 2: key "name" is given twice in one object (first at line 1); keep one`}},
		{"unquoted schedule", "star.yaml", "jobs:\n- name: a\n  schedule: */5 * * * *\n  command: x\n", nil, 1, []string{
			`: invalid YAML: line 3: did not find expected alphabetic or numeric character; quote the schedule: schedule: "*/5 * * * *"`}},
		{"unquoted macro", "at.yaml", "jobs:\n- name: a\n  schedule: @daily\n  command: x\n", nil, 1, []string{
			`: invalid YAML: line 3: found character that cannot start any token; quote the schedule: schedule: "@daily"`}},
		{"hook_timeout 0", "hook.yaml", "jobs:\n- {name: a, schedule: '@daily', command: x, on_failure: y, hook_timeout: 0}\n", nil, 0, nil},
		{"env override typo", "env.yaml", jobYAML, []string{"CRONLOCK_REDIS_ADRESS=r:6379"}, 0, []string{
			`warning: environment: CRONLOCK_REDIS_ADRESS is not a cronlock setting and is ignored (did you mean CRONLOCK_REDIS_ADDRESS?)`}},
		{"inside a job", "injob.yaml", jobYAML, []string{"CRONLOCK_JOB=x", "CRONLOCK_RUN_ID=r", "CRONLOCK_NODE_ID=n", "CRONLOCK_SCHEDULED_TIME=",
			"CRONLOCK_FENCING_TOKEN=3", "CRONLOCK_ATTEMPT=1", "CRONLOCK_TRIGGER=schedule", "CRONLOCK_RESULT=success",
			"CRONLOCK_INTERNAL_CLOCK_OFFSET=1s"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfigFile(t, dir, tt.file, tt.data)
			code, out, errOut := runCLI(t, tt.environ, "-validate", "-config", path)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if errOut == "" {
				lines = nil
			}
			ok := code == tt.code && len(lines) == len(tt.stderr)
			for i := 0; ok && i < len(lines); i++ {
				ok = strings.Contains(lines[i], tt.stderr[i])
			}
			if !ok {
				t.Errorf("code %d, stderr:\n%s\nwant code %d and the lines\n%s", code, errOut, tt.code, strings.Join(tt.stderr, "\n"))
			}
			if tt.code == 0 && !strings.HasPrefix(out, "Configuration valid: ") {
				t.Errorf("stdout %q, want the valid summary", out)
			}
		})
	}
}

// TestRun_StartRefusesMissingTLSFile: what -validate warns about, start
// refuses (exit 1, before the engine starts), as for work_dir.
func TestRun_StartRefusesMissingTLSFile(t *testing.T) {
	dir := t.TempDir()
	path := writeConfigFile(t, dir, "tls.yaml", "node: {state_dir: '"+filepath.Join(dir, "state")+"'}\n"+
		"redis: {address: 'r:6379', tls: {enabled: true, ca_file: /no/ca.pem}}\njobs:\n- {name: a, schedule: '@daily', command: 'true'}\n")
	code, out, errOut := runCLI(t, nil, "-config", path)
	want := `redis.tls.ca_file: file "/no/ca.pem" does not exist on this host`
	if code != 1 || out != "" || !strings.Contains(errOut, want) || strings.Contains(errOut, "warning") {
		t.Errorf("code %d stdout %q stderr %q; want 1 and the error %q", code, out, errOut, want)
	}
}

// validateJSON runs `cronlock -validate -json ARGS…` and decodes stdout,
// which must be exactly one line of JSON with nothing on stderr.
func validateJSON(t *testing.T, environ []string, args ...string) (int, validateResult, string) {
	t.Helper()
	code, out, errOut := runCLI(t, environ, append([]string{"-validate", "-json"}, args...)...)
	if errOut != "" || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("%v: stdout %q stderr %q; want one line of JSON on stdout and nothing on stderr", args, out, errOut)
	}
	var res validateResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("%v: stdout is not the JSON result: %v\n%s", args, err, out)
	}
	if !strings.Contains(out, `"problems":[`) {
		t.Errorf("%v: problems is not an array (null?): %s", args, out)
	}
	if want := map[bool]int{true: 0, false: 1}[res.Valid]; code != want {
		t.Errorf("%v: exit %d with valid %v; want %d", args, code, res.Valid, want)
	}
	return code, res, out
}

// jqTrue checks with jq, when installed, that filter is true for the JSON
// out (jq -e exits 0 only for a result that is neither false nor null).
func jqTrue(t *testing.T, out, filter string) {
	t.Helper()
	jq, err := exec.LookPath("jq")
	if err != nil {
		return // the JSON was decoded by encoding/json already
	}
	cmd := exec.Command(jq, "-e", filter)
	cmd.Stdin = strings.NewReader(out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("jq -e '%s': %v %s\non %s", filter, err, b, out)
	}
}

// TestRun_ValidateJSONListsEveryProblem is issue 11, "What it must show":
// `cronlock -validate -json` on the invalid examples gives every problem
// with its path and severity, as jq-parseable JSON, and exits 1.
func TestRun_ValidateJSONListsEveryProblem(t *testing.T) {
	tests := map[string][]problemJSON{
		"../../testdata/invalid/everything.yaml": {
			{"redis.key_prefx", "error", `unknown key "key_prefx" (did you mean "key_prefix"?)`},
			{"redis.db", "error", `16 is out of range; Redis databases are 0..15`},
			{`jobs[0] "backup": timeout`, "error", `300 needs a unit, e.g. 300s`},
			{`jobs[1] "backup": name`, "error", `duplicate name "backup"`},
			{`jobs[2] "four-fields"`, "error", `schedule "0 2 * *": want 5 or 6 fields`},
			{`jobs[3] "seven-fields"`, "error", `schedule "0 0 2 * * * 2027": want 5 or 6 fields`},
			{`jobs[4] "never"`, "error", `schedule "0 0 31 2 *" never fires (no such date)`},
			{`jobs[5] "zoned": timezone`, "error", `unknown time zone "Mars/Olympus_Mons"`},
		},
		"../../testdata/invalid/typo-in-job.yaml": {
			{`jobs[0] "report": schedule`, "error", `missing schedule`},
			{`jobs[0] "report": schedul`, "error", `unknown key "schedul" (did you mean "schedule"?)`},
			{`jobs[0] "report": timout`, "error", `unknown key "timout" (did you mean "timeout"?)`},
		},
		"../../testdata/invalid/bad-yaml.yaml": {
			{"", "error", "invalid YAML: line 3: "},
		},
	}
	for path, want := range tests {
		code, res, out := validateJSON(t, nil, "-config", path)
		if code != 1 || res.Valid || res.Config != path || len(res.Problems) != len(want) {
			t.Errorf("%s: exit %d, valid %v, config %q, %d problems; want 1, false, the path and %d problems:\n%s",
				path, code, res.Valid, res.Config, len(res.Problems), len(want), out)
			continue
		}
		for _, w := range want { // Load's order is not part of the contract: match each by path
			found := false
			for _, g := range res.Problems {
				found = found || g.Path == w.Path && g.Severity == w.Severity && strings.HasPrefix(g.Message, w.Message)
			}
			if !found {
				t.Errorf("%s: no problem %+v in\n%s", path, w, out)
			}
		}
		for _, g := range res.Problems {
			if strings.HasPrefix(g.Message, g.Path) && g.Path != "" {
				t.Errorf("%s: message repeats the path: %+v", path, g)
			}
		}
		jqTrue(t, out, fmt.Sprintf(`(.valid == false) and (.config == %q) and (.problems | length == %d) and all(.problems[]; .severity == "error" and (.path | type == "string") and (.message | length > 0))`, path, len(want)))
	}
}

func TestRun_ValidateJSONValid(t *testing.T) {
	const path = "../../testdata/example.yaml"
	for _, strict := range []bool{false, true} {
		args := []string{"-config", path}
		if strict {
			args = append(args, "-strict")
		}
		code, res, out := validateJSON(t, nil, args...)
		// Its one problem is the DST notice of the 02:30 Europe/Berlin job,
		// which does not make it invalid, not even with -strict.
		if code != 0 || !res.Valid || res.Config != path || len(res.Problems) != 1 || res.Problems[0].Severity != "notice" {
			t.Errorf("%v: exit %d, %s; want 0 and valid with only a DST notice", args, code, out)
		}
		jqTrue(t, out, ".valid")
	}
}

// A warning-only config is valid (exit 0) unless -strict: then it is
// invalid (exit 1), in JSON and in text, and lists its warnings.
func TestRun_ValidateStrictFailsOnWarnings(t *testing.T) {
	dir := t.TempDir()
	path := writeConfigFile(t, dir, "tls.yaml", "redis: {address: 'r:6379', tls: {enabled: true, ca_file: /no/ca.pem, cert_file: /no/c.pem, key_file: /no/k.pem}}\n"+
		"jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n")
	want := []problemJSON{
		{"redis.tls.ca_file", "warning", `file "/no/ca.pem" does not exist on this host; the daemon will refuse to start`},
		{"redis.tls.cert_file", "warning", `file "/no/c.pem" does not exist on this host; the daemon will refuse to start`},
		{"redis.tls.key_file", "warning", `file "/no/k.pem" does not exist on this host; the daemon will refuse to start`},
	}
	for _, strict := range []bool{false, true} {
		args := []string{"-config", path}
		if strict {
			args = append(args, "-strict")
		}
		code, res, out := validateJSON(t, nil, args...)
		if code != map[bool]int{false: 0, true: 1}[strict] || res.Valid == strict || !slices.Equal(res.Problems, want) {
			t.Errorf("-validate -json %v: exit %d\n%s\nwant valid %v and the problems %+v", args, code, out, !strict, want)
		}
		jqTrue(t, out, fmt.Sprintf(`.valid == %v and (.problems | map(.severity) == ["warning", "warning", "warning"])`, !strict))
	}

	// Text: without -strict the output is the usual one; with it, stdout is
	// empty and stderr the verdict, then each warning.
	code, out, errOut := runCLI(t, nil, "-validate", "-config", path)
	if code != 0 || !strings.HasPrefix(out, "Configuration valid: "+path+"\n") || strings.Count(errOut, "warning: ") != 3 {
		t.Errorf("-validate: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, "-validate", "-strict", "-config", path)
	wantErr := "Configuration invalid: " + path + " (3 warning(s), and -strict fails on warnings)\n" +
		"warning: redis.tls.ca_file: " + want[0].Message + "\nwarning: redis.tls.cert_file: " + want[1].Message +
		"\nwarning: redis.tls.key_file: " + want[2].Message + "\n"
	if code != 1 || out != "" || errOut != wantErr {
		t.Errorf("-validate -strict: exit %d stdout %q stderr\n%s\nwant 1, no stdout and\n%s", code, out, errOut, wantErr)
	}
	// With errors, -strict changes nothing in the text form.
	_, _, plain := runCLI(t, nil, "-validate", "-config", "../../testdata/invalid/everything.yaml")
	code, _, strictOut := runCLI(t, nil, "-validate", "-strict", "-config", "../../testdata/invalid/everything.yaml")
	if code != 1 || strictOut != plain {
		t.Errorf("-validate -strict on errors: exit %d stderr\n%s\nwant 1 and the same as without -strict:\n%s", code, strictOut, plain)
	}
}

// A file that cannot be read or decoded at all is still one JSON object,
// with one error problem whose path is "".
func TestRun_ValidateJSONUndecodable(t *testing.T) {
	dir := t.TempDir()
	nested := writeConfigFile(t, dir, "nested.toml", "a = "+strings.Repeat("[", 1<<20)+strings.Repeat("]", 1<<20)+"\n")
	tests := []struct{ path, msg string }{
		{"../../testdata/invalid/bad-yaml.yaml", "invalid YAML: line 3: found unexpected end of stream"},
		{nested, "nesting deeper than 64 levels at line 1"},
		{writeConfigFile(t, dir, "dup.json", `{"jobs": [], "jobs": []}`), `invalid JSON at line 1: key "jobs" is given twice`},
		{writeConfigFile(t, dir, "utf8.yaml", "jobs:\n- {name: a, schedule: '@daily', command: \"echo \xff\xfe\"}\n"), "invalid UTF-8 at byte offset"},
		{filepath.Join(dir, "missing.yaml"), "no such file or directory"},
		{writeConfigFile(t, dir, "c.ini", "x = 1\n"), `unsupported extension ".ini"`},
	}
	for _, tt := range tests {
		code, res, out := validateJSON(t, nil, "-config", tt.path)
		if code != 1 || res.Valid || res.Config != tt.path || len(res.Problems) != 1 ||
			res.Problems[0].Path != "" || res.Problems[0].Severity != "error" || !strings.Contains(res.Problems[0].Message, tt.msg) {
			t.Errorf("%s: exit %d\n%s\nwant 1 and one error problem without a path containing %q", tt.path, code, out, tt.msg)
		}
		jqTrue(t, out, `.valid == false and (.problems | length == 1) and .problems[0].path == ""`)
	}
}

// A flag override that does not validate is a problem like the file's.
func TestRun_ValidateJSONFlagOverride(t *testing.T) {
	code, res, out := validateJSON(t, nil, "-config", "../../testdata/example.yaml", "-log-level", "loud")
	want := []problemJSON{{"log.level (from flag)", "error", `unknown value "loud"; want one of debug, info, warn, error`}}
	if code != 1 || res.Valid || !slices.Equal(res.Problems, want) {
		t.Errorf("exit %d\n%s\nwant 1 and %+v", code, out, want)
	}
}

// -json and -strict without a mode they apply to, and bad flags or
// arguments, are usage errors: exit 2, nothing on stdout.
func TestRun_ValidateJSONUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-json"}, "-json goes with -version or -validate"},
		{[]string{"-json", "-config", "../../testdata/example.yaml"}, "-json goes with -version or -validate"},
		{[]string{"-strict"}, "-strict goes with -validate"},
		{[]string{"-strict", "-json"}, "-json goes with -version or -validate"},
		{[]string{"-version", "-strict"}, "-strict goes with -validate"},
		{[]string{"-validate", "-json", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-validate", "-json", "-strict=maybe"}, `invalid boolean value "maybe" for -strict`},
		{[]string{"-validate", "-json", "-config", "../../testdata/example.yaml", "extra"}, `unexpected argument "extra": -config already names the file`},
		{[]string{"-validate", "a.yaml", "b.yaml"}, `-validate checks one file (cronlock -validate -config FILE)`},
		{[]string{"-log-level", "debug", "x.yaml"}, `unexpected argument "x.yaml": give the config file with -config`},
		{[]string{"../../testdata/example.yaml"}, `unknown command "../../testdata/example.yaml": give the config file with -config (cronlock -config ../../testdata/example.yaml to run the daemon, cronlock -validate ../../testdata/example.yaml to check it)`},
		{[]string{"-validate", "../../testdata/example.yaml", "-nope"}, "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d stdout %q stderr %q; want 2, no stdout and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// -validate FILE is -validate -config FILE, with flags before or after
// the file (issue 33: it was "unexpected argument" without a hint).
func TestRun_ValidateFileArgument(t *testing.T) {
	const path = "../../testdata/example.yaml"
	for _, args := range [][]string{{"-validate", path}, {"-validate", path, "-strict"}, {"-strict", "-validate", path}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "Configuration valid: "+path+"\n") {
			t.Errorf("%v: exit %d stdout %q stderr %q; want 0 and the file validated", args, code, out, errOut)
		}
	}
	code, res, out := validateJSON(t, nil, "no-such-file.yaml")
	if code != 1 || res.Valid || res.Config != "no-such-file.yaml" || len(res.Problems) != 1 ||
		!strings.Contains(res.Problems[0].Message, "no-such-file.yaml") {
		t.Errorf("-validate -json no-such-file.yaml: exit %d %s; want 1, the file named", code, out)
	}
}

// The JSON form never prints the Redis password either: not from the
// file, not from the environment, not in a problem about redis.password.
func TestRun_ValidateJSONNeverPrintsPassword(t *testing.T) {
	dir := t.TempDir()
	const job = "jobs:\n- {name: a, schedule: '@daily', command: 'true'}\n"
	valid := writeConfigFile(t, dir, "c.yaml", "redis:\n  address: 10.0.0.5:6379\n  password: file-secret-1\n"+job)
	warned := writeConfigFile(t, dir, "w.yaml", "redis:\n  address: 10.0.0.5:6379\n  password: file-secret-3${CRONLOCK_TEST_UNSET}\n"+job)
	wrongType := writeConfigFile(t, dir, "t.yaml", "redis:\n  address: 10.0.0.5:6379\n  password: [file-secret-4]\n  db: 99\n"+job)
	unterminated := writeConfigFile(t, dir, "u.yaml", "redis:\n  address: 10.0.0.5:6379\n  password: 'file-secret-5${X'\n"+job)
	envs := [][]string{{"CRONLOCK_NODE_ID=n1"}, {"CRONLOCK_NODE_ID=n1", "CRONLOCK_REDIS_PASSWORD=env-secret-2"}}
	for i, env := range envs {
		for _, tt := range []struct {
			path     string
			valid    bool
			problems int
			strict   bool
		}{
			{valid, true, 0, false}, {valid, true, 0, true},
			{warned, true, 1, false}, {warned, false, 1, true},
			{wrongType, false, 2 - i, false}, // the environment's password replaces the list: no type error
			{unterminated, false, 1, false},
		} {
			args := []string{"-config", tt.path}
			if tt.strict {
				args = append(args, "-strict")
			}
			_, res, out := validateJSON(t, env, args...)
			if res.Valid != tt.valid || len(res.Problems) != tt.problems {
				t.Errorf("%v %v: %s; want valid %v with %d problem(s)", env, args, out, tt.valid, tt.problems)
			}
			if strings.Contains(out, "secret") {
				t.Errorf("%v %v: password printed: %s", env, args, out)
			}
		}
	}
}
