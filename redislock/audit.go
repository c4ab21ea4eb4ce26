package redislock

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cronlock/cronlock/ledger"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The audit trail of a job (docs/protocol.md, "Audited pauses and the
// event stream"): the pause key P paused:J holds who paused, when, why and
// until when (with a PX TTL when it has an end, so that it lifts itself),
// and the stream P events:J keeps the job's last EventsLen operator and
// reload events.

// EventsLen is the approximate cap of a job's event stream (XADD MAXLEN ~).
const EventsLen = 1000

// Event types.
const (
	EventPause      = "pause"
	EventResume     = "resume"
	EventRunRequest = "run_request"
	EventReload     = "reload"
	// EventUnreadable is an entry Events could not decode (written by
	// hand, or by another version): Note says why, At is the entry id's
	// time.
	EventUnreadable = "unreadable"
)

// Event is one entry of a job's event stream. ID is the stream entry id;
// the other fields are those the type uses.
type Event struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	At         time.Time `json:"at"`
	By         string    `json:"by,omitempty"`
	Note       string    `json:"note,omitempty"`
	Until      time.Time `json:"until,omitzero"`
	Node       string    `json:"node,omitempty"`
	ConfigHash string    `json:"config_hash,omitempty"`
	Request    string    `json:"request,omitempty"` // run request id
}

// fields returns the stream fields of e (ID excluded), empty ones left out.
func (e Event) fields() []string {
	out := []string{"type", e.Type, "at", e.At.UTC().Format(time.RFC3339Nano)}
	add := func(k, v string) {
		if v != "" {
			out = append(out, k, v)
		}
	}
	add("by", e.By)
	add("note", e.Note)
	if !e.Until.IsZero() {
		add("until", e.Until.UTC().Format(time.RFC3339Nano))
	}
	add("node", e.Node)
	add("config_hash", e.ConfigHash)
	add("request", e.Request)
	return out
}

// decodeEvent reads the fields written by Event.fields.
func decodeEvent(id string, m map[string]string) (Event, error) {
	e := Event{ID: id, Type: m["type"], By: m["by"], Note: m["note"], Node: m["node"], ConfigHash: m["config_hash"],
		Request: m["request"]}
	var err error
	if e.At, err = parseTime(m, "at"); err == nil {
		e.Until, err = parseTime(m, "until")
	}
	return e, err
}

// pauseScript sets the pause key (with a TTL when the pause has an end)
// and appends the pause event, atomically.
//
//	KEYS: 1 paused, 2 events; ARGV: 1 value, 2 ttl ms ("0" = none),
//	3 events cap, 4… event field, value pairs
var pauseScript = newScript(`
if ARGV[2] == "0" then
  redis.call("SET", KEYS[1], ARGV[1])
else
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
end
redis.call("XADD", KEYS[2], "MAXLEN", "~", ARGV[3], "*", unpack(ARGV, 4))
return 1
`, false)

// resumeScript deletes the pause key and appends the resume event,
// atomically; it returns the value it deleted (false → nil when the job
// was not paused; the event is written anyway).
//
//	KEYS: 1 paused, 2 events; ARGV: 1 events cap, 2… event field, value pairs
var resumeScript = newScript(`
local old = redis.call("GET", KEYS[1])
redis.call("DEL", KEYS[1])
redis.call("XADD", KEYS[2], "MAXLEN", "~", ARGV[1], "*", unpack(ARGV, 2))
return old
`, false)

// PauseFor pauses job on every node (its slots are skipped with reason
// paused) with p as the record of who, when, why and until, and appends a
// pause event, in one round trip. A pause with an end lifts itself: the
// key gets a TTL of p.Until − p.At. An end not after p.At is an error.
// A new pause replaces the previous one.
func (r *Redis) PauseFor(ctx context.Context, job string, p ledger.Pause) error {
	ttl := int64(0)
	if !p.Until.IsZero() {
		if ttl = p.Until.Sub(p.At).Milliseconds(); ttl <= 0 {
			return fmt.Errorf("pause %q: end %s is not after %s", job, p.Until.Format(time.RFC3339), p.At.Format(time.RFC3339))
		}
	}
	value, _ := json.Marshal(p) // plain fields: cannot fail
	ev := Event{Type: EventPause, At: p.At, By: p.By, Note: p.Note, Until: p.Until}
	ctx, cancel := r.call(ctx)
	defer cancel()
	args := append([]string{string(value), strconv.FormatInt(ttl, 10), strconv.Itoa(EventsLen)}, ev.fields()...)
	if err := pauseScript.Exec(ctx, r.c, []string{r.key("paused", job), r.key("events", job)}, args).Error(); err != nil {
		return fmt.Errorf("pause %q: %w", job, explainScript(err))
	}
	return nil
}

// ResumeBy lifts job's pause and appends a resume event naming by, in one
// round trip. It returns the pause it lifted, nil when the job was not
// paused (the event is written anyway: someone asked).
func (r *Redis) ResumeBy(ctx context.Context, job, by string, at time.Time) (*ledger.Pause, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	ev := Event{Type: EventResume, At: at, By: by}
	old, err := resumeScript.Exec(ctx, r.c, []string{r.key("paused", job), r.key("events", job)},
		append([]string{strconv.Itoa(EventsLen)}, ev.fields()...)).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("resume %q: %w", job, explainScript(err))
	}
	p := decodePause(old)
	return &p, nil
}

// decodePause reads a pause key's value; the bare "1" of cronlock before
// audited pauses (and of Pause) gives a Pause without details.
func decodePause(v string) ledger.Pause {
	var p ledger.Pause
	_ = json.Unmarshal([]byte(v), &p)
	return p
}

// AddEvents appends events to the streams of their jobs (job name →
// events), one XADD each, in one pipelined round trip.
func (r *Redis) AddEvents(ctx context.Context, events map[string][]Event) error {
	var cmds rueidis.Commands
	for job, evs := range events {
		for _, e := range evs {
			cmds = append(cmds, r.c.B().Xadd().Key(r.key("events", job)).Maxlen().Almost().Threshold(strconv.Itoa(EventsLen)).
				Id("*").FieldValue().FieldValueIter(pairs(e.fields())).Build())
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	for _, res := range r.c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("add events: %w", err)
		}
	}
	return nil
}

// pairs iterates over a flat field, value list.
func pairs(kv []string) func(yield func(string, string) bool) {
	return func(yield func(string, string) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield(kv[i], kv[i+1]) {
				return
			}
		}
	}
}

// Events returns job's last n events, newest first (XREVRANGE … COUNT n;
// an entry that cannot be decoded comes as EventUnreadable),
// in one round trip.
func (r *Redis) Events(ctx context.Context, job string, n int) ([]Event, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	entries, err := r.c.Do(ctx, r.c.B().Xrevrange().Key(r.key("events", job)).End("+").Start("-").Count(int64(n)).Build()).AsXRange()
	if err != nil {
		return nil, fmt.Errorf("events %q: %w", job, err)
	}
	out := make([]Event, 0, len(entries))
	for _, en := range entries {
		e, err := decodeEvent(en.ID, en.FieldValues)
		if err != nil { // listed, so that one bad entry does not hide the trail
			ms, _ := strconv.ParseInt(strings.SplitN(en.ID, "-", 2)[0], 10, 64)
			e = Event{ID: en.ID, Type: EventUnreadable, At: time.UnixMilli(ms).UTC(), Note: err.Error()}
		}
		out = append(out, e)
	}
	return out, nil
}
