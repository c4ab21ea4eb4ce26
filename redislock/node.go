package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The node heartbeat record P+"node:"+ID and the node's job hashes
// P+"node-jobs:"+ID (docs/protocol.md, "Redis keys"): two strings with one
// PX ttl whose values the caller (package cluster) encodes. These methods
// only store them. Both keys are built by key with the node id, so in
// Cluster mode they share the id's hash tag and one script may name both.

// nodeSwapScript sets the record and returns the value it replaced, in one
// round trip (false → nil reply when there was none), and keeps the job
// hashes key with the same ttl: it sets it when ARGV[3] is not empty, else
// it only extends its ttl (PEXPIRE; 0 when the key is gone).
//
//	KEYS: 1 node record, 2 node job hashes; ARGV: 1 value, 2 ttl ms, 3 job hashes value or ""
//	returns {replaced value or nil, 1 when the job hashes key holds a value now, else 0}
var nodeSwapScript = newScript(`
local old = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
local kept = 1
if ARGV[3] ~= "" then
  redis.call("SET", KEYS[2], ARGV[3], "PX", ARGV[2])
else
  kept = redis.call("PEXPIRE", KEYS[2], ARGV[2])
end
return {old, kept}
`, false)

// SwapNode replaces node id's heartbeat record with value, expiring after
// ttl (whole milliseconds, at least 1ms), and returns the value it replaced
// (nil when there was none), atomically in one round trip. In the same
// script it writes the node's job hashes key P node-jobs:ID with the same
// ttl when jobs is not empty, or else only extends that key's ttl; kept
// reports whether the job hashes key holds a value after the call (false:
// it had expired or was deleted, and the caller should write it again). An
// error means the keys may or may not have been written.
func (r *Redis) SwapNode(ctx context.Context, id string, value, jobs []byte, ttl time.Duration) (old []byte, kept bool, err error) {
	switch {
	case id == "":
		return nil, false, errors.New("swap node record: empty node id")
	case ttl < time.Millisecond:
		return nil, false, fmt.Errorf("swap node record %q: ttl %v below 1ms", id, ttl)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	reply, err := nodeSwapScript.Exec(ctx, r.c, []string{r.key("node", id), r.key("node-jobs", id)},
		[]string{string(value), strconv.FormatInt(ttl.Milliseconds(), 10), string(jobs)}).ToArray()
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("reply of %d elements, want 2", len(reply))
	}
	if err != nil {
		return nil, false, fmt.Errorf("swap node record %q: %w", id, explainScript(err))
	}
	n, err := reply[1].AsInt64()
	if err != nil {
		return nil, false, fmt.Errorf("swap node record %q: job hashes reply: %w", id, err)
	}
	old, err = reply[0].AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, n == 1, nil
	case err != nil:
		return nil, false, fmt.Errorf("swap node record %q: %w", id, err)
	}
	return old, n == 1, nil
}

// nodeDropScript deletes the record and the job hashes key if the record
// still holds one of ARGV (compare-and-DEL).
//
//	KEYS: 1 node record, 2 node job hashes; ARGV: the values; returns 1 when deleted, else 0
var nodeDropScript = newScript(`
local v = redis.call("GET", KEYS[1])
if not v then return 0 end
for i = 1, #ARGV do
  if v == ARGV[i] then
    redis.call("DEL", KEYS[1], KEYS[2])
    return 1
  end
end
return 0
`, false)

// DropNode deletes node id's heartbeat record and its job hashes key if the
// record still holds exactly one of values (compare-and-DEL: the writes
// this instance may have made), in one round trip, and reports whether it
// did. An empty values deletes nothing.
func (r *Redis) DropNode(ctx context.Context, id string, values [][]byte) (bool, error) {
	if len(values) == 0 {
		return false, nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	args := make([]string, len(values))
	for i, v := range values {
		args[i] = string(v)
	}
	n, err := nodeDropScript.Exec(ctx, r.c, []string{r.key("node", id), r.key("node-jobs", id)}, args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("drop node record %q: %w", id, explainScript(err))
	}
	return n == 1, nil
}

// NodeJobs returns the values of the job hashes keys P node-jobs:ID of
// ids, in the order of ids, nil for a key that does not exist: one
// pipelined GET per id in one round trip (in Cluster mode rueidis sends
// each to its shard). An error of any GET fails the call.
func (r *Redis) NodeJobs(ctx context.Context, ids []string) ([][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	out, err := r.getEach(ctx, "node-jobs", ids)
	if err != nil {
		return nil, fmt.Errorf("node job hashes %w", err)
	}
	return out, nil
}

// getEach GETs the key of kind of each of ids in one round trip of
// pipelined GETs (in Cluster mode rueidis sends each to its shard): the
// values in the order of ids, nil for a key that does not exist. The
// error of the first GET that failed names its id ("ID": error).
func (r *Redis) getEach(ctx context.Context, kind string, ids []string) ([][]byte, error) {
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = r.c.B().Get().Key(r.key(kind, id)).Build()
	}
	out := make([][]byte, len(ids))
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		v, err := res.AsBytes()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			return nil, fmt.Errorf("%q: %w", ids[i], err)
		default:
			out[i] = v
		}
	}
	return out, nil
}

// The node index P+"nodes:index" (docs/protocol.md, "The node list"): a
// sorted set of node ids scored by their last heartbeat (Unix ms), so
// that the node list needs no SCAN (which Cluster mode would have to run
// on every shard). Ids not indexed for nodeIndexKeep are pruned by the
// writers.
const nodeIndexKeep = time.Hour

func (r *Redis) nodeIndex() string { return r.globalKey("nodes", "index") }

// IndexNode records that node id wrote its heartbeat record at at (ZADD)
// and prunes ids not indexed for an hour (ZREMRANGEBYSCORE), in one
// pipelined round trip to the index's one key.
func (r *Redis) IndexNode(ctx context.Context, id string, at time.Time) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	key := r.nodeIndex()
	for _, res := range r.c.DoMulti(ctx,
		r.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(at.UnixMilli()), id).Build(),
		r.c.B().Zremrangebyscore().Key(key).Min("-inf").Max("("+strconv.FormatInt(at.Add(-nodeIndexKeep).UnixMilli(), 10)).Build(),
	) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("index node %q: %w", id, err)
		}
	}
	return nil
}

// UnindexNode removes node id from the index (ZREM), at a clean stop.
func (r *Redis) UnindexNode(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Zrem().Key(r.nodeIndex()).Member(id).Build()).Error(); err != nil {
		return fmt.Errorf("unindex node %q: %w", id, err)
	}
	return nil
}

// Nodes returns the heartbeat records of every indexed node whose record
// still exists, in node id order: two round trips (ZRANGE of the index,
// then one pipelined GET per id; in Cluster mode rueidis sends each GET to
// its shard). Indexed ids whose record has expired are left out.
func (r *Redis) Nodes(ctx context.Context) ([][]byte, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	ids, err := r.c.Do(ctx, r.c.B().Zrange().Key(r.nodeIndex()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("node list: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	values, err := r.getEach(ctx, "node", ids)
	if err != nil {
		return nil, fmt.Errorf("node list: record %w", err)
	}
	return slices.DeleteFunc(values, func(v []byte) bool { return v == nil }), nil
}
