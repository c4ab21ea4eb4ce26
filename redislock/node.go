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

// The node heartbeat record P+"node:"+ID (docs/protocol.md, "Redis keys"):
// a string with a PX ttl whose value the caller (package registry)
// encodes. These methods only store it.

// nodeSwapScript sets the record and returns the value it replaced, in one
// round trip (false → nil reply when there was none).
//
//	KEYS: 1 node record; ARGV: 1 value, 2 ttl ms
var nodeSwapScript = newScript(`
local old = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return old
`, false)

// SwapNode replaces node id's heartbeat record with value, expiring after
// ttl (whole milliseconds, at least 1ms), and returns the value it replaced
// (nil when there was none), atomically in one round trip. An error means
// the record may or may not have been written.
func (r *Redis) SwapNode(ctx context.Context, id string, value []byte, ttl time.Duration) ([]byte, error) {
	switch {
	case id == "":
		return nil, errors.New("swap node record: empty node id")
	case ttl < time.Millisecond:
		return nil, fmt.Errorf("swap node record %q: ttl %v below 1ms", id, ttl)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	old, err := nodeSwapScript.Exec(ctx, r.c, []string{r.key("node", id)},
		[]string{string(value), strconv.FormatInt(ttl.Milliseconds(), 10)}).AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("swap node record %q: %w", id, explainScript(err))
	}
	return old, nil
}

// DropNode deletes node id's heartbeat record if it still holds exactly
// value (compare-and-DEL, the release script), in one round trip, and
// reports whether it did.
func (r *Redis) DropNode(ctx context.Context, id string, value []byte) (bool, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := releaseScript.Exec(ctx, r.c, []string{r.key("node", id)}, []string{string(value)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("drop node record %q: %w", id, explainScript(err))
	}
	return n == 1, nil
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
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = r.c.B().Get().Key(r.key("node", id)).Build()
	}
	var out [][]byte
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		v, err := res.AsBytes()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			return nil, fmt.Errorf("node list: record %q: %w", ids[i], err)
		default:
			out = append(out, v)
		}
	}
	return out, nil
}
