package redislock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/redis/rueidis"
)

// claimSHA and finishSHA are the SHA1s of claimSrc and finishSrc, as
// EVALSHA names them.
var (
	claimSHA  = sha1Hex(claimSrc)
	finishSHA = sha1Hex(finishSrc)
)

func sha1Hex(src string) string { h := sha1.Sum([]byte(src)); return hex.EncodeToString(h[:]) }

// evalsha runs the script src (SHA1 sha) on dc: EVALSHA, and EVAL when
// the server does not know it (a restart, a failover, SCRIPT FLUSH; then
// EVALSHA ran nothing).
func evalsha(ctx context.Context, dc rueidis.DedicatedClient, sha, src string, keys, args []string) rueidis.RedisResult {
	res := dc.Do(ctx, dc.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
		res = dc.Do(ctx, dc.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return res
}

// wait sends `WAIT minAcks timeout` on dc and returns how many replicas
// acknowledged the connection's writes. The timeout is ackTimeout; with
// cut, at most half of what is left of ctx (a finish runs under a short
// fixed bound, unlike a claim, whose bound allows for ackTimeout), at
// least 1 ms.
func (r *Redis) wait(ctx context.Context, dc rueidis.DedicatedClient, cut bool) (int, error) {
	timeout := r.ackTimeout
	if dl, ok := ctx.Deadline(); ok && cut {
		timeout = max(min(timeout, time.Until(dl)/2), time.Millisecond)
	}
	n, err := dc.Do(ctx, dc.B().Wait().Numreplicas(int64(r.minAcks)).Timeout(timeout.Milliseconds()).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("wait for %d replicas: %w", r.minAcks, err)
	}
	return int(n), nil
}

// claimReplicated is Claim with redis.min_replicas_acked: the claim script
// and, when it won, `WAIT minAcks ackTimeout`, both on one dedicated
// connection (WAIT counts the replicas that acknowledged the writes of the
// connection it is sent on; rueidis would send a blocking command alone on
// another one). A win that fewer replicas acknowledged is returned as
// actors.NotReplicated, with Fence and Replicas set: the caller does not
// run it and releases the lease. Two round trips for a win, one otherwise;
// blocks until answered or ctx ends (WAIT at most ackTimeout). An error
// means the outcome is unknown, as for Claim.
func (r *Redis) claimReplicated(ctx context.Context, keys, args []string) (ledger.Claim, error) {
	var c ledger.Claim
	err := r.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		vals, err := evalsha(ctx, dc, claimSHA, claimSrc, keys, args).ToArray()
		if err != nil {
			return err
		}
		if c, err = decodeClaim(vals); err != nil || c.Outcome != ledger.Claimed {
			return err
		}
		if c.Replicas, err = r.wait(ctx, dc, false); err != nil {
			return err
		}
		if c.Replicas < r.minAcks {
			c.Outcome = ledger.NotReplicated
		}
		return nil
	})
	return c, err
}

// finishReplicated is Finish with redis.min_replicas_acked and a next
// owner: the finish script and, when it handed the lease to the pending
// slot (overlap queue, replace: a won claim of that slot), `WAIT minAcks
// timeout`, on one dedicated connection as in claimReplicated. A hand-over
// that fewer replicas acknowledged has Finished.NotReplicated and Replicas
// set: a failover could forget it while the promoted replica still holds
// the slot as pending, and the next claim on any node would take and run
// it again, so the caller does not run it and releases the next owner's
// lease. A finish that reaches max_runs waits as well (docs/protocol.md,
// R6: a failover must not forget the run that ended the job), but its
// record stands whatever WAIT answers. Any other finish costs no WAIT.
func (r *Redis) finishReplicated(ctx context.Context, keys, args []string, maxRuns int64) (ledger.Finished, error) {
	var f ledger.Finished
	err := r.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		vals, err := evalsha(ctx, dc, finishSHA, finishSrc, keys, args).AsIntSlice()
		if err != nil {
			return err
		}
		if f, err = decodeFinished(vals); err != nil || f.Token == 0 && (maxRuns == 0 || f.Runs < maxRuns) {
			return err // nothing handed on, max_runs not reached: no WAIT
		}
		if f.Replicas, err = r.wait(ctx, dc, true); err != nil {
			return err
		}
		f.NotReplicated = f.Replicas < r.minAcks
		return nil
	})
	return f, err
}
