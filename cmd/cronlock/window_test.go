package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// windowConfig has a job whose active window has ended, one whose window
// starts in the future and one without a window, all hourly in UTC.
func windowConfig(t *testing.T, addr string, now time.Time) (string, string, string) {
	t.Helper()
	ended := now.Add(-time.Hour).UTC().Format(time.RFC3339)
	from := now.Add(48 * time.Hour).UTC().Truncate(time.Hour).Format(time.RFC3339)
	until := now.Add(51 * time.Hour).UTC().Truncate(time.Hour).Format(time.RFC3339)
	redis := ""
	if addr != "" {
		redis = "redis: {address: \"" + addr + "\"}\n"
	}
	cfg := redis + "node: {id: n1}\njobs:\n" +
		"- {name: ended, schedule: '0 * * * *', timezone: UTC, command: 'true', active_until: '" + ended + "'}\n" +
		"- {name: later, schedule: '0 * * * *', timezone: UTC, command: 'true', active_from: '" + from + "', active_until: '" + until + "'}\n" +
		"- {name: always, schedule: '0 * * * *', timezone: UTC, command: 'true'}\n"
	return writeConfigFile(t, t.TempDir(), "window.yaml", cfg), from, until
}

// TestNext_ActiveWindow: `cronlock next` lists only fire times inside the
// active window and names the window; an ended window lists none.
func TestNext_ActiveWindow(t *testing.T) {
	now := time.Now()
	path, from, until := windowConfig(t, "", now)
	code, out, errs := runCLI(t, nil, "next", "-config", path, "-n", "5", "-json")
	if code != 0 {
		t.Fatalf("next: exit %d, %s", code, errs)
	}
	var res []nextResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	fromT, _ := time.Parse(time.RFC3339, from)
	wantLater := []string{fromT.Format(time.RFC3339), fromT.Add(time.Hour).Format(time.RFC3339), fromT.Add(2 * time.Hour).Format(time.RFC3339)}
	if len(res) != 3 || len(res[0].Times) != 0 || strings.Join(res[1].Times, " ") != strings.Join(wantLater, " ") ||
		res[1].ActiveFrom != from || res[1].ActiveUntil != until || len(res[2].Times) != 5 {
		t.Fatalf("got %+v\nwant ended: no times; later: %v (the 3 hours in [%s, %s)); always: 5 times", res, wantLater, from, until)
	}
	code, out, _ = runCLI(t, nil, "next", "-config", path, "-n", "1")
	for _, want := range []string{"ended (active window ended ", "(no further fire times)", "later (active from " + from + " until " + until + ")"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("next table: exit %d, want %q in\n%s", code, want, out)
		}
	}
}

// TestStatus_ActiveWindow: `cronlock status` shows each job's window and
// whether it has ended, against a real Redis.
func TestStatus_ActiveWindow(t *testing.T) {
	srv := redistest.Start(t)
	path, from, _ := windowConfig(t, srv.Addr(), time.Now())
	rows := statusJSON(t, path)
	if r := rows["ended"]; r.Window != "ended" || r.Next != "" {
		t.Errorf("ended: window %q next %q, want ended and no next", r.Window, r.Next)
	}
	if r := rows["later"]; r.Window != "not_started" || r.Next != from || r.ActiveFrom != from {
		t.Errorf("later: window %q next %q from %q, want not_started and next %s", r.Window, r.Next, r.ActiveFrom, from)
	}
	if r := rows["always"]; r.Window != "" || r.Next == "" || r.ActiveFrom != "" || r.ActiveUntil != "" {
		t.Errorf("always: %+v, want no window and a next fire", r)
	}
	code, out, errs := runCLI(t, nil, "status", "-config", path)
	fromT, _ := time.Parse(time.RFC3339, from)
	for _, want := range []string{"(active window ended ", fmt.Sprintf("%s (active from %s)", fromT.Format(tableTime), from)} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status table: exit %d, want %q in\n%s%s", code, want, out, errs)
		}
	}
}
