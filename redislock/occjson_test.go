package redislock

import (
	"encoding/json"
	"testing"

	"github.com/cronlock/cronlock/ledger"
)

// occjsonCases are ledger records as the scripts and Finish write them
// (escapes as the scripts' q() writes them, every field), and JSON at the
// edges: other cases of names, null, fractions, invalid UTF-8, bad
// escapes. wellFormed: valid JSON in valid UTF-8, as every record is
// (Finish writes with encoding/json, which replaces invalid UTF-8; the
// scripts escape control characters and write validated names).
var occjsonCases = []struct {
	json       string
	wellFormed bool
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

// decodeOccurrence gives what encoding/json gives on well-formed records:
// the same record, or an error for the same inputs. On malformed input
// (which no writer of the ledger produces) github.com/goccy/go-json is
// more lenient: it may accept a raw control character or a lone "-", and
// keeps invalid UTF-8 as it is; it must not panic.
func TestDecodeOccurrence_AsEncodingJSON(t *testing.T) {
	for _, c := range occjsonCases {
		if !c.wellFormed {
			_, _ = decodeOccurrence(c.json, nil)
			continue
		}
		var want ledger.Occurrence
		werr := json.Unmarshal([]byte(c.json), &want)
		got, err := decodeOccurrence(c.json, nil)
		if (err == nil) != (werr == nil) || (err == nil && got != want) {
			t.Errorf("%s: got %+v, %v; encoding/json gives %+v, %v", c.json, got, err, want, werr)
		}
	}
}
