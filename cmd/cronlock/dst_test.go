package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// dstConfig has one fixed-time job in each DST zone of issue 13's test 5,
// the same schedule in UTC, and a wildcard job in New York.
const dstConfig = `lock: {backend: memory}
node: {id: n1, state_dir: /tmp/cronlock-dst-test}
jobs:
- {name: ny, schedule: "30 2 * * *", timezone: America/New_York, command: "true"}
- {name: london, schedule: "0 1 * * *", timezone: Europe/London, command: "true"}
- {name: utc, schedule: "30 2 * * *", timezone: UTC, command: "true"}
- {name: every5, schedule: "*/5 * * * *", timezone: America/New_York, command: "true"}
`

// TestRun_ValidateDSTNotices is issue 13, "What it must show" 5: -validate
// names the 2027 transitions that change the New York and London jobs and
// what cronlock does; the UTC and wildcard jobs get no warning. The
// reference time is fixed, so the result does not depend on today.
func TestRun_ValidateDSTNotices(t *testing.T) {
	path := writeConfigFile(t, t.TempDir(), "dst.yaml", dstConfig)
	tests := []struct {
		now  string
		want []string // stderr lines, in order
	}{
		{"2027-01-01T00:00:00Z", []string{
			`notice: jobs[0] "ny": schedule: DST: on Sun 2027-03-14 clocks in America/New_York go forward from 02:00 EST to 03:00 EDT, ` +
				`so 02:30 does not exist that day; cronlock runs the job once instead, at 03:00 EDT (2027-03-14T07:00:00Z), ` +
				`the first instant after the gap (cronie's rule); to avoid it schedule the job outside 02:00–03:00 local time or in UTC`,
			`notice: jobs[1] "london": schedule: DST: on Sun 2027-03-28 clocks in Europe/London go forward from 01:00 GMT to 02:00 BST, ` +
				`so 01:00 does not exist that day; cronlock runs the job once instead, at 02:00 BST (2027-03-28T01:00:00Z), ` +
				`the first instant after the gap (cronie's rule); to avoid it schedule the job outside 01:00–02:00 local time or in UTC`,
		}},
		{"2027-06-01T00:00:00Z", []string{
			`notice: jobs[0] "ny": schedule: DST: on Sun 2028-03-12 clocks in America/New_York go forward from 02:00 EST to 03:00 EDT, ` +
				`so 02:30 does not exist that day; cronlock runs the job once instead, at 03:00 EDT (2028-03-12T07:00:00Z), `,
			`notice: jobs[1] "london": schedule: DST: on Sun 2027-10-31 clocks in Europe/London go back from 02:00 BST to 01:00 GMT, ` +
				`so 01:00 happens twice that day; cronlock runs the job once, at 01:00 BST (2027-10-31T00:00:00Z), ` +
				`and not again at 01:00 GMT (2027-10-31T01:00:00Z) (cronie's rule); to avoid it schedule the job outside 01:00–02:00 local time or in UTC`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.now, func(t *testing.T) {
			now, _ := time.Parse(time.RFC3339, tt.now)
			var out, errb bytes.Buffer
			env := &runEnv{stdout: &out, stderr: &errb, now: func() time.Time { return now }}
			if code := runValidate(path, nil, validateMode{}, env); code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, errb.String())
			}
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d stderr lines, want %d (no notice for the utc and every5 jobs):\n%s", len(lines), len(tt.want), errb.String())
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("stderr line %d:\n got %s\nwant %s…", i, lines[i], w)
				}
			}
			if !strings.Contains(out.String(), "Configuration valid: ") {
				t.Errorf("stdout %q, want the summary", out.String())
			}
		})
	}
	t.Run("strict and json", func(t *testing.T) {
		now, _ := time.Parse(time.RFC3339, "2027-01-01T00:00:00Z")
		var out, errb bytes.Buffer
		env := &runEnv{stdout: &out, stderr: &errb, now: func() time.Time { return now }}
		if code := runValidate(path, nil, validateMode{strict: true, asJSON: true}, env); code != 0 {
			t.Fatalf("-strict -json exit %d, want 0 (DST notices never fail validation)", code)
		}
		var res validateResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if !res.Valid || len(res.Problems) != 2 || res.Problems[0].Severity != "notice" || res.Problems[1].Severity != "notice" ||
			res.Problems[1].Path != `jobs[1] "london": schedule` || !strings.Contains(res.Problems[1].Message, "2027-03-28") {
			t.Errorf("got %+v, want valid with the ny and london notices", res)
		}
	})
}

// TestRun_NextDSTNotices: `cronlock next` prints the same warnings for the
// jobs it lists, relative to -from, on stderr and in -json.
func TestRun_NextDSTNotices(t *testing.T) {
	path := writeConfigFile(t, t.TempDir(), "dst.yaml", dstConfig)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"next", "-config", path, "-from", "2027-06-01T00:00:00Z", "-n", "1", "london", "utc"},
		nil, &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := `notice: jobs[1] "london": schedule: DST: on Sun 2027-10-31 clocks in Europe/London go back`
	if got := errb.String(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr:\n%s\nwant one line starting %s", got, want)
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"next", "-config", path, "-from", "2027-01-01T00:00:00Z", "-n", "1", "-json", "ny", "utc"},
		nil, &out, &errb, nil)
	var res []nextResult
	if err := json.Unmarshal(out.Bytes(), &res); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out.String())
	}
	if len(res) != 2 || !strings.Contains(res[0].DSTNotice, "2027-03-14") || res[1].DSTNotice != "" {
		t.Errorf("got %+v, want a notice for ny only", res)
	}
}

// Many DST notices (issue 33: 417 for a 10,000-job config) are summarised
// as one line per zone and transition, naming the first 3 jobs and
// counting the rest, plus a line saying how to list them all; with
// -all-notices (and in -json) every job has its own.
func TestRun_ValidateDSTNoticesSummarised(t *testing.T) {
	var b strings.Builder
	b.WriteString("lock: {backend: memory}\nnode: {id: n1, state_dir: /tmp/cronlock-dst-test}\njobs:\n")
	for i := range 400 {
		fmt.Fprintf(&b, "- {name: ny%d, schedule: \"30 2 * * *\", timezone: America/New_York, command: \"true\"}\n", i)
	}
	for i := range 17 {
		fmt.Fprintf(&b, "- {name: ldn%d, schedule: \"0 1 * * *\", timezone: Europe/London, command: \"true\"}\n", i)
	}
	b.WriteString("- {name: utc, schedule: \"30 2 * * *\", timezone: UTC, command: \"true\"}\n")
	path := writeConfigFile(t, t.TempDir(), "many.yaml", b.String())
	now, _ := time.Parse(time.RFC3339, "2027-01-01T00:00:00Z")
	validate := func(mode validateMode) (int, string, string) {
		var out, errb bytes.Buffer
		code := runValidate(path, nil, mode, &runEnv{stdout: &out, stderr: &errb, now: func() time.Time { return now }})
		return code, out.String(), errb.String()
	}
	code, out, errOut := validate(validateMode{})
	want := []string{
		`notice: DST America/New_York: on Sun 2027-03-14 clocks in America/New_York go forward from 02:00 EST to 03:00 EDT: ` +
			`400 jobs fire at local times that do not exist that day (jobs[0] "ny0", jobs[1] "ny1", jobs[2] "ny2" and 397 more); ` +
			`cronlock runs each of them once instead, at the first instant after the gap (cronie's rule)`,
		`notice: DST Europe/London: on Sun 2027-03-28 clocks in Europe/London go forward from 01:00 GMT to 02:00 BST: ` +
			`17 jobs fire at local times that do not exist that day (jobs[400] "ldn0", jobs[401] "ldn1", jobs[402] "ldn2" and 14 more); ` +
			`cronlock runs each of them once instead, at the first instant after the gap (cronie's rule)`,
		`notice: DST: 417 jobs have a fire time that a DST transition changes, summarised above by zone and transition; ` +
			`cronlock -validate -all-notices lists each with its times (-validate -json always does)`,
	}
	if got := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"); code != 0 || !slices.Equal(got, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant 0 and:\n%s", code, errOut, strings.Join(want, "\n"))
	}
	if !strings.Contains(out, "Jobs: 418") {
		t.Errorf("stdout %q, want the summary", out)
	}
	if _, _, errOut := validate(validateMode{allNotices: true}); strings.Count(errOut, "\n") != 417 ||
		!strings.Contains(errOut, `notice: jobs[416] "ldn16": schedule: DST: on Sun 2027-03-28`) {
		t.Errorf("-all-notices: %d lines, want 417, one per job:\n%.500s", strings.Count(errOut, "\n"), errOut)
	}
	_, out, _ = validate(validateMode{asJSON: true})
	var res validateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Problems) != 417 {
		t.Errorf("-json: %v, %d problems, want every one of the 417 notices", err, len(res.Problems))
	}
	if code, _, errOut := runCLI(t, nil, "-all-notices", "-config", path); code != 2 || !strings.Contains(errOut, "-all-notices goes with -validate") {
		t.Errorf("-all-notices without -validate: exit %d %q, want a usage error", code, errOut)
	}
}
