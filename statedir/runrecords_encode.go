package statedir

import (
	"encoding/json"
	"strconv"
)

// appendStored appends st as the JSON object encoding/json.Marshal would
// write (the same keys in the same order, leader_start_last_ticks omitted
// when 0), without reflection (docs/decisions/0001-run-records-hand-written-encoder.md).
// It must stay equivalent to json.Marshal of st: Load reads it back with
// encoding/json, and FuzzAppendStored checks that every string survives.
func appendStored(b []byte, st stored) []byte {
	b = append(b, `{"run_id":`...)
	b = appendString(b, st.RunID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(st.Attempt), 10)
	b = append(b, `,"job":`...)
	b = appendString(b, st.Job)
	b = append(b, `,"owner":`...)
	b = appendString(b, st.Owner)
	b = append(b, `,"lock_ttl_ms":`...)
	b = strconv.AppendInt(b, st.LockTTLMs, 10)
	b = append(b, `,"kill_grace_ms":`...)
	b = strconv.AppendInt(b, st.KillGraceMs, 10)
	b = append(b, `,"pgid":`...)
	b = strconv.AppendInt(b, int64(st.PGID), 10)
	b = append(b, `,"session":`...)
	b = strconv.AppendInt(b, int64(st.Session), 10)
	b = append(b, `,"leader_start_ticks":`...)
	b = strconv.AppendUint(b, st.LeaderStart, 10)
	if st.LeaderStartLast != 0 {
		b = append(b, `,"leader_start_last_ticks":`...)
		b = strconv.AppendUint(b, st.LeaderStartLast, 10)
	}
	b = append(b, `,"boot_id":`...)
	b = appendString(b, st.BootID)
	b = append(b, `,"pid_namespace":`...)
	b = appendString(b, st.PIDNS)
	return append(b, '}')
}

// appendString appends s as a JSON string. Printable ASCII other than the
// quote, the backslash and the characters encoding/json escapes for HTML
// (<, >, &) is copied as it is (run ids, boot ids and namespaces always
// are; job names and node ids nearly always); any other string is
// encoded by encoding/json, so invalid UTF-8 and control characters come
// out exactly as json.Marshal writes them.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
