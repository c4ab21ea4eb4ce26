package redislock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cronlock/cronlock/ledger"
)

// outcomeScript records the outcome of one finished occurrence of a job
// and returns the alert transition it makes, on the job's own key P
// notify:J, a hash {slot, run, ok}: the newest occurrence whose outcome was
// recorded, its run id and whether it succeeded.
//
// Invariant: each transition is returned to at most one caller in the
// cluster, because the read and the write of the job's last outcome are
// one script (atomic), and an outcome is recorded only when its slot is
// newer than the recorded one. So:
//   - a retried call (same run id) returns no transition;
//   - an outcome older than, or of the same slot as, the recorded one
//     (finishes that arrive out of order) is ignored;
//   - failing: a failure after a success, or as the job's first outcome
//     (a new job that fails alerts); recovered: a success after a failure;
//     a first success returns nothing.
//
// The rule is ledger.Transition, which the memory backend applies.
//
//	KEYS: 1 notify:J; ARGV: 1 slot (Unix s), 2 run id, 3 ok ("1"/"0"), 4 ttl ms
var outcomeScript = newScript(`
local cur = redis.call("HMGET", KEYS[1], "slot", "run", "ok")
if cur[2] == ARGV[2] then return "" end
if cur[1] and tonumber(cur[1]) >= tonumber(ARGV[1]) then return "" end
redis.call("HSET", KEYS[1], "slot", ARGV[1], "run", ARGV[2], "ok", ARGV[3])
redis.call("PEXPIRE", KEYS[1], ARGV[4])
if ARGV[3] == "0" and cur[3] ~= "0" then return "failing" end
if ARGV[3] == "1" and cur[3] == "0" then return "recovered" end
return ""
`, false)

// RecordOutcome records that the run runID of job's slot (Unix seconds)
// succeeded (ok) or failed, and returns the alert transition it makes:
// ledger.TransitionFailing, ledger.TransitionRecovered or "" (outcomeScript says when).
// Only the node that ran the occurrence calls it, once per occurrence. One
// round trip; on a deadline error the outcome may have been recorded, and
// a retry then returns "" (the alert is lost, never doubled).
func (r *Redis) RecordOutcome(ctx context.Context, job string, slot int64, runID string, ok bool) (string, error) {
	if job == "" || slot <= 0 || runID == "" {
		return "", fmt.Errorf("record outcome %q: %w", job, ledger.ErrOutcome)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	s, err := outcomeScript.Exec(ctx, r.c, []string{r.key("notify", job)},
		[]string{strconv.FormatInt(slot, 10), runID, flag(ok), strconv.FormatInt(ledger.NotifyStateTTL.Milliseconds(), 10)}).ToString()
	if err != nil {
		return "", fmt.Errorf("record outcome %q: %w", job, explainScript(err))
	}
	return s, nil
}
