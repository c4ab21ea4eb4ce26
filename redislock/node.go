package redislock

import (
	"context"
	"errors"
	"fmt"
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
