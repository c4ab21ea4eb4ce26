package redislock

import (
	"encoding/json"
	"testing"

	"github.com/cronlock/cronlock/ledger"
)

// occjsonCases are ledger records as the scripts and Finish write them,
// and JSON that only encoding/json reads alike (scanOccurrence must then
// decline).
var occjsonCases = []struct {
	json string
	fast bool // scanOccurrence reads it
}{
	{`{"id":"1700000000","slot":1700000000,"status":"missed","reason":"not_claimed","node":"a","token":0,"trigger":"schedule","run_id":"","claimed":1700000061000}`, true},
	{`{"id":"m17","slot":0,"status":"ran","reason":"","node":"n1","token":17,"trigger":"manual","run_id":"r","claimed":-3,"started":1,"finished":2,"result":"failure","exit_code":-1,"attempts":2,"output_tail":"line\n\"q\" \\ \u003c\u00e9\u2028 \ud83d\ude00 \/ \b\f\r\t é","requester":"me@h"}`, true},
	{` { "id" : "x" , "slot" : 5 } `, true},
	{`{}`, true},
	{`{"ID":"case-insensitive"}`, false},
	{`{"id":null}`, false},
	{`{"slot":1.5}`, false},
	{`{"slot":1e3}`, false},
	{`{"slot":01}`, false},
	{`{"slot":99999999999999999999}`, false},
	{`{"id":"lone \ud83d surrogate"}`, false},
	{"{\"id\":\"invalid \xff utf-8\"}", false},
	{"{\"id\":\"raw \x01 control\"}", false},
	{`{"id":"bad \x escape"}`, false},
	{`{"extra":{"nested":true},"id":"x"}`, false},
	{`{"id":"x",}`, false},
	{`{"id":"x"} trailing`, false},
	{`[1]`, false},
	{``, false},
	{`{"id":"unterminated`, false},
	{`{"slot":-}`, false},
}

// checkDecode compares decodeOccurrence with json.Unmarshal.
func checkDecode(t *testing.T, s string) {
	got, gotErr := decodeOccurrence(s, nil)
	var want ledger.Occurrence
	wantErr := json.Unmarshal([]byte(s), &want)
	if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && got != want) {
		t.Errorf("decode %q: got %+v, %v; want %+v, %v", s, got, gotErr, want, wantErr)
	}
}

func TestDecodeOccurrence_AsEncodingJSON(t *testing.T) {
	for _, c := range occjsonCases {
		checkDecode(t, c.json)
		if _, ok := scanOccurrence(c.json); ok != c.fast {
			t.Errorf("scanOccurrence(%q): got ok %v, want %v", c.json, ok, c.fast)
		}
	}
	rec := ledger.RunRecord{RunID: "r1", Slot: 1700000000, Trigger: ledger.TriggerSchedule, Node: "n<1>", Attempts: 1,
		Result: ledger.ResultFailure, ExitCode: 2, Fence: 9, OutputTail: "out\x00\n\t\"ü\u2029\xfe", Requester: "a&b"}
	b, err := json.Marshal(rec.Occurrence())
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, string(b))
	if _, ok := scanOccurrence(string(b)); !ok {
		t.Errorf("scanOccurrence(%s): not read, want read", b)
	}
}

func FuzzDecodeOccurrence(f *testing.F) {
	for _, c := range occjsonCases {
		f.Add(c.json)
	}
	f.Fuzz(checkDecode)
}
