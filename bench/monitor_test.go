package bench

import (
	"slices"
	"testing"
)

func TestParseMonitorLine(t *testing.T) {
	c, err := ParseMonitorLine(`1339518083.107412 [0 127.0.0.1:60866] "EVALSHA" "ab\"c\\d" "1" "cronlock:job:a b" "x\x41\n"`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Time != 1339518083.107412 || c.Client != "127.0.0.1:60866" {
		t.Errorf("time, client = %v, %q", c.Time, c.Client)
	}
	if want := []string{"EVALSHA", `ab"c\d`, "1", "cronlock:job:a b", "xA\n"}; !slices.Equal(c.Args, want) {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	lua, err := ParseMonitorLine(`1339518087.877697 [0 lua] "set" "foo" "bar"`)
	if err != nil || lua.Client != "lua" {
		t.Errorf("lua line: client %q, err %v", lua.Client, err)
	}
	for _, bad := range []string{"OK", `123 [0 x] "unterminated`, `12x [0 a] "PING"`, `1 [0 a] PING`} {
		if _, err := ParseMonitorLine(bad); err == nil {
			t.Errorf("ParseMonitorLine(%q): got no error", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	p := "cronlock:"
	for _, tc := range []struct {
		args []string
		kind string
		slot int64
	}{
		{[]string{"EVALSHA", "sha", "3", p + "job:j", p + "state:j", p + "paused:j", "1700000000", "n1:r", "90000"}, CallClaim, 1700000000},
		{[]string{"EVAL", "script", "3", p + "job:j", p + "history:j", p + "state:j", "100", "n1:r", "run_id", "r", "slot", "1700000001", "trigger", "schedule"}, CallFinish, 1700000001},
		{[]string{"evalsha", "sha", "1", p + "job:j", "n1:r", "90000"}, CallLease, 0},
		{[]string{"EVALSHA", "sha", "1", p + "node:n1", "{}"}, CallHeartbeat, 0},
		{[]string{"EVALSHA", "sha", "2", p + "node:n1", p + "node-jobs:n1", "{}", "30000", ""}, CallHeartbeat, 0},
		{[]string{"EVALSHA", "probe", "1", p + "job:j"}, CallProbe, 0},
		{[]string{"EVALSHA", "missed", "1", p + "state:j", "1700000000"}, CallMissed, 0},
		{[]string{"EVALSHA", "sha", "2", p + "x:j", p + "y:j"}, "EVALSHA (script)", 0},
		{[]string{"info", "memory"}, "INFO", 0},
	} {
		kind, slot := Classify(MonitorCommand{Args: tc.args}, p)
		if kind != tc.kind || slot != tc.slot {
			t.Errorf("Classify(%q) = %q, %d, want %q, %d", tc.args, kind, slot, tc.kind, tc.slot)
		}
	}
}
