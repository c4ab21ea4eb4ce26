// Package notify sends alerts on job state change to webhooks
// (docs/alerts.md): failing, recovered, missed and running_long, each
// decided once in the cluster (failing and recovered through the backend's
// RecordOutcome, missed by the audit that recorded it, running_long by the
// node running the run) and POSTed to every configured receiver with
// retries, never delaying a run or another receiver.
package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
)

// Headers of a webhook request (docs/alerts.md, "Verifying a request").
const (
	HeaderSignature = "X-Cronlock-Signature" // "sha256=" + hex HMAC-SHA256(secret, timestamp + "." + body)
	HeaderTimestamp = "X-Cronlock-Timestamp" // Unix seconds when the request was signed
	HeaderEvent     = "X-Cronlock-Event"     // the event, e.g. "failing"
)

// maxMissedListed bounds the slots a missed alert lists.
const maxMissedListed = 100

// Event is one alert, a fact about a job: what happened to which
// occurrence, on which node. It carries no output and no env value.
type Event struct {
	Kind  string    // config.EventFailing, …
	Job   string    //
	Slot  time.Time // the occurrence; zero for none
	Node  string    // the node that ran it, or whose audit recorded it missed
	RunID string    // "" for missed
	// Result and ExitCode are the run's (failing, recovered); "" and 0
	// otherwise.
	Result   string
	ExitCode int
	// Reason is a short explanation in words.
	Reason string
	// Missed lists the slots (Unix s) a missed alert is about, Slot being
	// the first; at most maxMissedListed, Count is how many in all.
	Missed []int64
	Count  int
	At     time.Time // when the event was decided
}

// ID names the event for receivers that deduplicate: job/event/slot, and
// the run id when there is one.
func (e Event) ID() string {
	id := e.Job + "/" + e.Kind + "/" + strconv.FormatInt(unixOrZero(e.Slot), 10)
	if e.RunID != "" {
		id += "/" + e.RunID
	}
	return id
}

// payload is the JSON body (docs/alerts.md, "The body").
type payload struct {
	ID          string  `json:"id"`
	Event       string  `json:"event"`
	Job         string  `json:"job"`
	Slot        int64   `json:"slot"`
	SlotTime    string  `json:"slot_time,omitempty"`
	Node        string  `json:"node"`
	RunID       string  `json:"run_id,omitempty"`
	Result      string  `json:"result,omitempty"`
	ExitCode    *int    `json:"exit_code,omitempty"`
	Reason      string  `json:"reason"`
	MissedSlots []int64 `json:"missed_slots,omitempty"`
	MissedCount int     `json:"missed_count,omitempty"`
	At          string  `json:"at"`
}

// Body renders e in format (config.FormatJSON or config.FormatSlack).
func Body(e Event, format string) []byte {
	if format == config.FormatSlack {
		b, _ := json.Marshal(map[string]string{"text": Text(e)}) // strings: cannot fail
		return b
	}
	p := payload{ID: e.ID(), Event: e.Kind, Job: e.Job, Slot: unixOrZero(e.Slot), Node: e.Node, RunID: e.RunID,
		Result: e.Result, Reason: e.Reason, MissedSlots: e.Missed, MissedCount: e.Count, At: e.At.UTC().Format(time.RFC3339)}
	if !e.Slot.IsZero() {
		p.SlotTime = e.Slot.UTC().Format(time.RFC3339)
	}
	if e.Result != "" {
		p.ExitCode = &e.ExitCode
	}
	b, _ := json.Marshal(p) // plain fields: cannot fail
	return b
}

// Text is the one-line summary of a Slack body, e.g. `cronlock: job
// "backup" is failing (slot 2026-01-02T03:00:00Z, node n1): run failed:
// result failure, exit code 2`.
func Text(e Event) string {
	what := map[string]string{config.EventFailing: "is failing", config.EventRecovered: "recovered",
		config.EventMissed: "missed an occurrence", config.EventRunningLong: "is running long"}[e.Kind]
	if what == "" {
		what = e.Kind
	}
	var where []string
	if !e.Slot.IsZero() {
		where = append(where, "slot "+e.Slot.UTC().Format(time.RFC3339))
	}
	if e.Node != "" {
		where = append(where, "node "+e.Node)
	}
	s := fmt.Sprintf("cronlock: job %q %s", e.Job, what)
	if len(where) > 0 {
		s += " (" + strings.Join(where, ", ") + ")"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Sign returns the X-Cronlock-Signature value of body sent at timestamp
// (Unix seconds, the X-Cronlock-Timestamp value): "sha256=" and the hex
// HMAC-SHA256 with secret of timestamp + "." + body. Signing the timestamp
// lets a receiver refuse a replayed request.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is Sign(secret, timestamp, body), in
// constant time: what a receiver does (docs/alerts.md).
func Verify(secret []byte, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
