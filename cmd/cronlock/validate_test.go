package main

import (
	"os"
	"path/filepath"
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
