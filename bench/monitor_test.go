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
	ledger := func(job string) []string {
		return []string{p + "job:" + job, p + "state:" + job, p + "occ:" + job, p + "occidx:" + job}
	}
	claim := func(job string) []string {
		return append(ledger(job), p+"paused:"+job, p+"pending:"+job, p+"inflight:"+job)
	}
	claimArgv := func(slot string) []string {
		return []string{slot, "schedule", "n1", "r", "90000", "1", "0", "0", "0", "0", "0", "2000", "2000", "0", "604800000", "100"}
	}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	for _, tc := range []struct {
		args  []string
		kind  string
		slots []int64
	}{
		{cat([]string{"EVALSHA", "sha", "7"}, claim("j"), claimArgv("1700000000")), CallClaim, []int64{1700000000}},
		{cat([]string{"EVAL", "script", "6"}, ledger("j"), []string{p + "pending:j", p + "inflight:j", "n1:r", "", "0", "0", "1700000001", "1700000001",
			"{}", "1", "1", "r", "", ""}), CallFinish, []int64{1700000001}},
		{cat([]string{"EVALSHA", "audit", "5"}, ledger("j"), []string{p + "inflight:j", "1700000000", "4000", "n1", "not_claimed", "604800000", "100"}),
			CallMissed, nil},
		{[]string{"evalsha", "sha", "2", p + "job:j", p + "pending:j", "n1:r", "90000"}, CallLease, nil},
		{[]string{"evalsha", "sha", "1", p + "job:j", "n1:r"}, CallLease, nil},
		{[]string{"EVALSHA", "sha", "1", p + "node:n1", "{}"}, CallHeartbeat, nil},
		{[]string{"EVALSHA", "sha", "2", p + "node:n1", p + "node-jobs:n1", "{}", "30000", ""}, CallHeartbeat, nil},
		{[]string{"EVALSHA", "probe", "1", p + "job:j"}, CallProbe, nil},
		{[]string{"EVALSHA", "sha", "2", p + "x:j", p + "y:j"}, "EVALSHA (script)", nil},
		{[]string{"info", "memory"}, "INFO", nil},
		{[]string{"EVALSHA", "peek", "2", p + "occ:j", p + "state:j", "1700000000"}, CallPeek, []int64{1700000000}},
		{[]string{"hget", p + "occ:j", "1700000000"}, "HGET", nil},
	} {
		kind, slots := Classify(MonitorCommand{Args: tc.args}, p)
		if kind != tc.kind || !slices.Equal(slots, tc.slots) {
			t.Errorf("Classify(%q) = %q, %v, want %q, %v", tc.args, kind, slots, tc.kind, tc.slots)
		}
	}
}
