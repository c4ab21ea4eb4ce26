package statedir

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendStored writes what json.Marshal writes, byte for byte, for every
// field value: Load decodes records with encoding/json, and records
// written by earlier versions (by json.Marshal) must read the same.
func FuzzAppendStored(f *testing.F) {
	f.Add("0f8e5bde-2c1a-4c47-9f43-7d1c2b3a4e5f", 1, "backup", "n1:0f8e5bde", int64(300000), int64(10000), 4242, 4000, uint64(987654), uint64(0),
		"3b1c0d2e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", "pid:[4026531836]")
	f.Add("r", -1, "job \"quoted\" \\ <html> & more", "n\x00:\t\n", int64(-5), int64(0), 0, -3, uint64(0), uint64(987655),
		"\xff\xfe invalid utf-8", "ü€😀\u2028\u2029")
	f.Fuzz(func(t *testing.T, runID string, attempt int, job, owner string, ttl, grace int64, pgid, session int, start, last uint64, boot, ns string) {
		st := stored{RunID: runID, Attempt: attempt, Job: job, Owner: owner, LockTTLMs: ttl, KillGraceMs: grace,
			PGID: pgid, Session: session, LeaderStart: start, LeaderStartLast: last, BootID: boot, PIDNS: ns}
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendStored(nil, st); !bytes.Equal(got, want) {
			t.Errorf("appendStored:\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkAppendStored(b *testing.B) {
	st := stored{RunID: "0f8e5bde-2c1a-4c47-9f43-7d1c2b3a4e5f", Attempt: 1, Job: "backup", Owner: "n1:0f8e5bde-2c1a-4c47-9f43-7d1c2b3a4e5f",
		LockTTLMs: 300000, KillGraceMs: 10000, PGID: 4242, Session: 4000, LeaderStart: 987654,
		BootID: "3b1c0d2e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", PIDNS: "pid:[4026531836]"}
	b.Run("appendStored", func(b *testing.B) {
		var buf [512]byte
		for b.Loop() {
			_ = appendStored(buf[:0], st)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(st)
		}
	})
}
