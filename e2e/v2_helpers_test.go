package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Helpers of the protocol v2 tests (v2_*_test.go, issue 32, "What it must
// show"): a job output that carries the run's trigger and fencing token,
// and the occurrence ledger read straight from Redis (docs/protocol.md,
// "Keys"), not through the daemon's code.

// tokenCommand wraps work (a shell snippet, may be "") so that the run
// appends one line `JOB TRIGGER SLOT NODE TOKEN START_NS END_NS` to out
// when work has finished. SLOT is CRONLOCK_SCHEDULED_TIME (RFC 3339), "-"
// for a manual run (which has none); TOKEN is CRONLOCK_FENCING_TOKEN. One
// short `>>` write is atomic on a local file.
func tokenCommand(out, work string) string {
	if work != "" {
		work += "; "
	}
	// No ${VAR:-x}: the config loader expands ${…} itself.
	return fmt.Sprintf(`s=$(date +%%s%%N); %sslot=$CRONLOCK_SCHEDULED_TIME; [ -n "$slot" ] || slot=-; `+
		`echo "$CRONLOCK_JOB $CRONLOCK_TRIGGER $slot $CRONLOCK_NODE_ID $CRONLOCK_FENCING_TOKEN $s $(date +%%s%%N)" >> %s`,
		work, shellQuote(out))
}

// tokenRun is one line of a tokenCommand output.
type tokenRun struct {
	Job, Trigger string
	Slot         int64 // Unix seconds; 0 for a manual run
	Node         string
	Token        int64
	Start, End   time.Time
}

func (r tokenRun) String() string {
	return fmt.Sprintf("%s %s slot %d on %s token %d at %s", r.Job, r.Trigger, r.Slot, r.Node, r.Token,
		r.Start.Format("15:04:05.000"))
}

// readTokenRuns parses a tokenCommand output, in start order; a missing
// file is no run.
func readTokenRuns(t *testing.T, path string) []tokenRun {
	t.Helper()
	var runs []tokenRun
	for _, fs := range ledgerLines(t, path) {
		if len(fs) != 7 {
			t.Fatalf("output line %q: got %d fields, want 7", fs, len(fs))
		}
		r := tokenRun{Job: fs[0], Trigger: fs[1], Node: fs[3]}
		var errs []error
		if fs[2] != "-" {
			slot, err := time.Parse(time.RFC3339, fs[2])
			r.Slot, errs = slot.Unix(), append(errs, err)
		}
		var start, end int64
		var err1, err2, err3 error
		r.Token, err1 = strconv.ParseInt(fs[4], 10, 64)
		start, err2 = strconv.ParseInt(fs[5], 10, 64)
		end, err3 = strconv.ParseInt(fs[6], 10, 64)
		if err := errors.Join(append(errs, err1, err2, err3)...); err != nil {
			t.Fatalf("output line %q: %v", fs, err)
		}
		r.Start, r.End = time.Unix(0, start), time.Unix(0, end)
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b tokenRun) int { return a.Start.Compare(b.Start) })
	return runs
}

// occurrence is one record of a job's ledger, the hash cronlock:occ:JOB
// (docs/protocol.md, "Keys").
type occurrence struct {
	ID       string `json:"id"`
	Slot     int64  `json:"slot"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Node     string `json:"node"`
	Token    int64  `json:"token"`
	Trigger  string `json:"trigger"`
	RunID    string `json:"run_id"`
	Claimed  int64  `json:"claimed"`
	Started  int64  `json:"started"`
	Finished int64  `json:"finished"`
	Result   string `json:"result"`
}

// readOccurrences returns job's ledger records by field (the slot; m<token>
// for a manual run), read with one HGETALL under the default key prefix.
func readOccurrences(t *testing.T, c rueidis.Client, job string) map[string]occurrence {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := c.Do(ctx, c.B().Hgetall().Key("cronlock:occ:"+job).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL cronlock:occ:%s: %v", job, err)
	}
	out := make(map[string]occurrence, len(m))
	for id, v := range m {
		var o occurrence
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			t.Fatalf("ledger record %s of %s: %q: %v", id, job, v, err)
		}
		out[id] = o
	}
	return out
}

// hget returns field of the hash key, "" when absent.
func hget(t *testing.T, c rueidis.Client, key, field string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.Do(ctx, c.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("HGET %s %s: %v", key, field, err)
	}
	return v
}

// slotRecord returns the record of slot in occ.
func slotRecord(occ map[string]occurrence, slot int64) (occurrence, bool) {
	o, ok := occ[strconv.FormatInt(slot, 10)]
	return o, ok
}

// describeRecords lists occ's records in slot order, for a failure message.
func describeRecords(occ map[string]occurrence) string {
	ids := make([]string, 0, len(occ))
	for id := range occ {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		o := occ[id]
		fmt.Fprintf(&b, "\n    %s: %s %s node=%s trigger=%s token=%d", id, o.Status, o.Reason, o.Node, o.Trigger, o.Token)
	}
	return b.String()
}

// durationField is a log field that zap's JSON encoder wrote as float
// seconds (the daemon's production encoder), as a duration.
func durationField(e logEntry, key string) (time.Duration, bool) {
	f, ok := e[key].(float64)
	return time.Duration(f * float64(time.Second)), ok
}
