package redislock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"

	"github.com/cronlock/cronlock/actors"
	"github.com/redis/rueidis"
)

// claimSHA is the SHA1 of claimSrc, as EVALSHA names it.
var claimSHA = func() string { h := sha1.Sum([]byte(claimSrc)); return hex.EncodeToString(h[:]) }()

// claimReplicated is Claim with redis.min_replicas_acked: the claim script
// and, when it won, `WAIT minAcks ackTimeout`, both on one dedicated
// connection (WAIT counts the replicas that acknowledged the writes of the
// connection it is sent on; rueidis would send a blocking command alone on
// another one). A win that fewer replicas acknowledged is returned as
// actors.NotReplicated, with Fence and Replicas set: the caller does not
// run it and releases the lease. Two round trips for a win, one otherwise;
// blocks until answered or ctx ends (WAIT at most ackTimeout). An error
// means the outcome is unknown, as for Claim.
func (r *Redis) claimReplicated(ctx context.Context, keys, args []string) (actors.Claim, error) {
	var c actors.Claim
	err := r.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		res := dc.Do(ctx, dc.B().Evalsha().Sha1(claimSHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
			// Not run: the server does not know the script (a restart, a
			// failover, SCRIPT FLUSH). EVAL runs and loads it.
			res = dc.Do(ctx, dc.B().Eval().Script(claimSrc).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
		vals, err := res.ToArray()
		if err != nil {
			return err
		}
		if c, err = decodeClaim(vals); err != nil || c.Outcome != actors.Claimed {
			return err
		}
		n, err := dc.Do(ctx, dc.B().Wait().Numreplicas(int64(r.minAcks)).Timeout(r.ackTimeout.Milliseconds()).Build()).AsInt64()
		if err != nil {
			return fmt.Errorf("wait for %d replicas: %w", r.minAcks, err)
		}
		c.Replicas = int(n)
		if c.Replicas < r.minAcks {
			c.Outcome = actors.NotReplicated
		}
		return nil
	})
	return c, err
}
