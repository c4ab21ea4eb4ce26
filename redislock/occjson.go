package redislock

import (
	gojson "github.com/goccy/go-json"

	"github.com/cronlock/cronlock/ledger"
)

// decodeOccurrence decodes a ledger record (the JSON object of
// ledger.Occurrence), or returns err when it is not nil. It uses
// github.com/goccy/go-json, which decodes as encoding/json does
// (TestDecodeOccurrence_AsEncodingJSON) with less than half its
// allocations: the dashboard's overview reads some 60,000 records at
// 10,000 jobs (docs/dashboard.md, "Scale").
func decodeOccurrence(s string, err error) (ledger.Occurrence, error) {
	if err != nil {
		return ledger.Occurrence{}, err
	}
	var o ledger.Occurrence
	err = gojson.Unmarshal([]byte(s), &o)
	return o, err
}
