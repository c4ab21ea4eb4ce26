package actors

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// repeatEvery is how often a repeated warning is written at most, per job
// and reason (README.md, "Logs").
const repeatEvery = time.Minute

// repeatClaimFailed is the key of "claim failed; not run"; skip lines use
// their skip reason as the key.
const repeatClaimFailed = "claim failed"

// repeatReadFailed is the key of "record read failed; not claimed, not
// run" (a lower-ranked node's read of the slot's record, run.peek).
const repeatReadFailed = "record read failed"

// repeatNotReplicated is the key of "claim not replicated; not run"
// (every won claim while a replica is down).
const repeatNotReplicated = "claim not replicated"

// repeatLog summarises repeated identical warnings, such as a claim failing
// on every slot of a Redis outage or overlap_local on every slot of a long
// run: the first occurrence of a key is written; after that, at most one
// line per `every` — the occurrence that falls due — carrying
// `suppressed` (how many occurrences were left out since the last line)
// and `suppressed_since` (when the first of them happened). End(key) says
// the condition is over: the last left-out occurrence, if any, is written
// with the count of the others, and the next occurrence is written at once.
//
// Keys are chosen by the caller (one repeatLog per job, or the job name in
// the key). Counting in metrics is the caller's: this only decides what is
// written. Safe for concurrent use (runs of one job may overlap); a nil
// *repeatLog writes every occurrence.
type repeatLog struct {
	every time.Duration
	mu    sync.Mutex
	keys  map[string]*repeated
}

// repeated is the state of one key since its last written line.
type repeated struct {
	logged time.Time          // when the last line was written
	left   int                // occurrences left out since then
	since  time.Time          // when the first of them happened
	last   func(...zap.Field) // writes the last of them (for End)
}

func newRepeatLog(every time.Duration) *repeatLog {
	return &repeatLog{every: every} // keys is made at the first Log: most jobs never repeat a warning
}

// Log writes one occurrence of key through write (which must log one line
// with the extra fields appended) or leaves it out and counts it; see
// repeatLog. An occurrence left out is passed to leftOut, when not nil,
// which may log it at debug level (so that log.level debug still shows
// every occurrence). It never blocks beyond its mutex; write and leftOut
// are called with the mutex held, so they must not call back into r.
func (r *repeatLog) Log(key string, write func(extra ...zap.Field), leftOut func()) {
	if r == nil {
		write()
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys[key]
	switch {
	case k == nil:
		if r.keys == nil {
			r.keys = map[string]*repeated{}
		}
		r.keys[key] = &repeated{logged: now}
		write()
	case now.Sub(k.logged) >= r.every:
		write(k.fields()...)
		*k = repeated{logged: now}
	default:
		if k.left == 0 {
			k.since = now
		}
		k.left++
		k.last = write
		if leftOut != nil {
			leftOut()
		}
	}
}

// End forgets key: the repeated condition is over. When occurrences were
// left out since the last line, the last of them is written now, with
// `suppressed` counting the others.
func (r *repeatLog) End(key string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys[key]
	if k == nil {
		return
	}
	delete(r.keys, key)
	if k.left > 0 {
		k.left-- // the last one is written itself
		k.last(k.fields()...)
	}
}

// fields are the extra fields of a line that stands for k.left more
// occurrences; none when nothing was left out.
func (k *repeated) fields() []zap.Field {
	if k.left == 0 {
		return nil
	}
	return []zap.Field{zap.Int("suppressed", k.left), zap.Time("suppressed_since", k.since)}
}
