package redislock

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/redis/rueidis"
)

// Run requests (docs/protocol.md, "Runs on the cluster"): `cronlock run
// JOB` pushes a request onto the list P runs:J and notes the job in the
// sorted set P pending-runs:all (scored by request time, Unix ms), and
// announces the job on the Pub/Sub channel P run-requests. Daemons read
// the pending set when a request is announced (and on a slow poll, for
// the announcements they missed) and pop (LPOP) the requests of the jobs
// they hold:
// each request is popped by exactly one daemon, so it runs at most once.
// The request's progress is kept in the hash P runstatus:J (field: the
// request id; value: ledger.RunStatus as JSON), which expires ledger.RunStatusTTL after
// its last write.

// pendingRuns is the pending set's key, of its own kind (a job may be named
// "pending").
func (r *Redis) pendingRuns() string { return r.globalKey("pending-runs", "all") }

// requestScript pushes a request, records it as pending and appends the
// run_request event, atomically.
//
//	KEYS: 1 runs, 2 runstatus, 3 events; ARGV: 1 request JSON, 2 id,
//	3 status JSON, 4 status ttl ms, 5 events cap, 6… event pairs
var requestScript = newScript(`
redis.call("RPUSH", KEYS[1], ARGV[1])
redis.call("HSET", KEYS[2], ARGV[2], ARGV[3])
redis.call("PEXPIRE", KEYS[2], ARGV[4])
redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", unpack(ARGV, 6))
return 1
`, false)

// RequestRun writes req (two round trips: the request with its pending
// status and event, atomically; then the pending set). It returns the
// request's exact list value, for CancelRun.
func (r *Redis) RequestRun(ctx context.Context, req ledger.RunRequest) (string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	value, _ := json.Marshal(req) // plain fields: cannot fail
	status, _ := json.Marshal(ledger.RunStatus{ID: req.ID, State: ledger.RunPending, At: req.At})
	ev := Event{Type: EventRunRequest, At: req.At, By: req.Requester, Note: req.Reason, Request: req.ID}
	args := append([]string{string(value), req.ID, string(status), strconv.FormatInt(ledger.RunStatusTTL.Milliseconds(), 10),
		strconv.Itoa(EventsLen)}, ev.fields()...)
	keys := []string{r.key("runs", req.Job), r.key("runstatus", req.Job), r.key("events", req.Job)}
	if err := requestScript.Exec(ctx, r.c, keys, args).Error(); err != nil {
		return "", fmt.Errorf("run request %q: %w", req.Job, explainScript(err))
	}
	key := r.pendingRuns()
	res := r.c.DoMulti(ctx,
		r.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(req.At.UnixMilli()), req.Job).Build(),
		r.c.B().Zremrangebyscore().Key(key).Min("-inf").Max("("+strconv.FormatInt(req.At.Add(-ledger.PendingWindow).UnixMilli(), 10)).Build(),
		// After the pending set (a pipeline runs in order): a daemon woken
		// by the message finds the job there. Its failure (a Redis user
		// without the channel right) is not the request's: the daemons'
		// slow poll takes it (WatchRunRequests).
		r.c.B().Publish().Channel(r.runRequestChannel()).Message(req.Job).Build(),
	)
	for _, res := range res[:2] {
		if err := res.Error(); err != nil {
			return string(value), fmt.Errorf("run request %q: pending set: %w", req.Job, err)
		}
	}
	return string(value), nil
}

// runRequestChannel is the Pub/Sub channel on which RequestRun announces a
// request (the message is the job's name), under the key prefix: P
// run-requests. A channel is not a key: Redis Cluster broadcasts a
// PUBLISH to every node, so it needs no hash tag.
func (r *Redis) runRequestChannel() string { return r.prefix + "run-requests" }

// RunRequestChannel is the channel of runRequestChannel, for the ACL docs
// and tests.
func (r *Redis) RunRequestChannel() string { return r.runRequestChannel() }

// WatchRunRequests subscribes to the run request channel and calls
// subscribed each time Redis confirms the subscription (the first time,
// and again after rueidis re-subscribed on a new connection: requests
// written in between are in the pending set, so the caller polls then)
// and notified for each request announced. It blocks until ctx ends (then
// it returns ctx.Err()) or the subscription fails for good: a Redis error
// (NOPERM when the ACL user may not SUBSCRIBE to the channel: grant
// &PREFIX* and +subscribe), or a connection error that rueidis' retries
// gave up on. The callbacks run on rueidis' goroutine and must not block.
func (r *Redis) WatchRunRequests(ctx context.Context, subscribed, notified func()) error {
	return r.watch(ctx, "run request channel", r.runRequestChannel(), subscribed, func(string) { notified() })
}

// cancelScript withdraws a request nobody took: LREM of its exact value;
// when it was still there, its status becomes cancelled. Returns 1 when
// withdrawn, 0 when a daemon had taken it.
//
//	KEYS: 1 runs, 2 runstatus; ARGV: 1 request value, 2 id, 3 status JSON, 4 ttl ms
var cancelScript = newScript(`
if redis.call("LREM", KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call("HSET", KEYS[2], ARGV[2], ARGV[3])
redis.call("PEXPIRE", KEYS[2], ARGV[4])
return 1
`, false)

// CancelRun withdraws the request whose list value is value, atomically,
// and reports whether it did (false: a daemon took it first).
func (r *Redis) CancelRun(ctx context.Context, job, id, value string, at time.Time) (bool, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	status, _ := json.Marshal(ledger.RunStatus{ID: id, State: ledger.RunCancelled, At: at})
	n, err := cancelScript.Exec(ctx, r.c, []string{r.key("runs", job), r.key("runstatus", job)},
		[]string{value, id, string(status), strconv.FormatInt(ledger.RunStatusTTL.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("cancel run request %q: %w", job, explainScript(err))
	}
	return n == 1, nil
}

// takeScript pops the job's oldest request and marks it taken by this
// node, atomically (false → nil when there is none).
//
//	KEYS: 1 runs, 2 runstatus; ARGV: 1 node, 2 at (RFC 3339), 3 ttl ms
var takeScript = newScript(`
local v = redis.call("LPOP", KEYS[1])
if not v then return false end
local id = cjson.decode(v)["id"]
redis.call("HSET", KEYS[2], id, cjson.encode({id = id, state = "taken", node = ARGV[1], at = ARGV[2], exit_code = 0}))
redis.call("PEXPIRE", KEYS[2], ARGV[3])
return v
`, false)

// TakeRun pops job's oldest run request for node and marks it taken, in
// one round trip; nil when there is none. A request is returned to exactly
// one caller.
func (r *Redis) TakeRun(ctx context.Context, job, node string, at time.Time) (*ledger.RunRequest, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := takeScript.Exec(ctx, r.c, []string{r.key("runs", job), r.key("runstatus", job)},
		[]string{node, at.UTC().Format(time.RFC3339Nano), strconv.FormatInt(ledger.RunStatusTTL.Milliseconds(), 10)}).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("take run request %q: %w", job, explainScript(err))
	}
	var req ledger.RunRequest
	if err := json.Unmarshal([]byte(v), &req); err != nil {
		return nil, fmt.Errorf("take run request %q: unreadable request %q: %w", job, v, err)
	}
	return &req, nil
}

// PendingRunJobs returns the jobs with a run request since since (the
// pending set; a job stays in it for ledger.PendingWindow after a request, taken
// or not), in one round trip.
func (r *Redis) PendingRunJobs(ctx context.Context, since time.Time) ([]string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	jobs, err := r.c.Do(ctx, r.c.B().Zrangebyscore().Key(r.pendingRuns()).Min(strconv.FormatInt(since.UnixMilli(), 10)).
		Max("+inf").Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("pending run requests: %w", err)
	}
	return jobs, nil
}

// SetRunStatus writes st for its request (HSET, PEXPIRE), in one round
// trip.
func (r *Redis) SetRunStatus(ctx context.Context, job string, st ledger.RunStatus) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, _ := json.Marshal(st) // plain fields: cannot fail
	key := r.key("runstatus", job)
	for _, res := range r.c.DoMulti(ctx, r.c.B().Hset().Key(key).FieldValue().FieldValue(st.ID, string(v)).Build(),
		r.c.B().Pexpire().Key(key).Milliseconds(ledger.RunStatusTTL.Milliseconds()).Build()) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("run status %q: %w", job, err)
		}
	}
	return nil
}

// GetRunStatus returns the status of request id of job, nil when there is
// none (never written, or expired), in one round trip.
func (r *Redis) GetRunStatus(ctx context.Context, job, id string) (*ledger.RunStatus, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	v, err := r.c.Do(ctx, r.c.B().Hget().Key(r.key("runstatus", job)).Field(id).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("run status %q: %w", job, err)
	}
	var st ledger.RunStatus
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return nil, fmt.Errorf("run status %q: unreadable %q: %w", job, v, err)
	}
	return &st, nil
}
