package redislock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/redis/rueidis"
)

// ledgerKeys are the keys of one job that the ledger scripts name, in
// their order: lease, state, ledger, ledger index, then extra.
func (r *Redis) ledgerKeys(job string, extra ...string) []string {
	keys := []string{r.key("job", job), r.key("state", job), r.key("occ", job), r.key("occidx", job)}
	for _, kind := range extra {
		keys = append(keys, r.key(kind, job))
	}
	return keys
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Claim decides one occurrence in one claimScript call (docs/protocol.md,
// R1–R7). With Options.MinReplicasAcked a won claim then waits for the
// replicas (claimReplicated) and may come back as actors.NotReplicated. An
// error means the outcome is unknown: the claim may have been applied, so
// the caller must not run the slot and should later Release any lease
// under req.Owner().
func (r *Redis) Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error) {
	if err := req.Validate(); err != nil {
		return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	keys := r.ledgerKeys(req.Job, "paused", "pending", "inflight")
	age, max := req.Retention.Resolved()
	w := req.Windows
	args := []string{strconv.FormatInt(req.Slot, 10), string(req.Trigger), req.Node, req.RunID, ms(req.TTL),
		flag(req.Lease), flag(req.Queue), flag(req.IgnorePause), strconv.FormatInt(req.MaxRuns, 10),
		strconv.FormatInt(req.SeenSeq, 10), strconv.FormatInt(req.SeenRuns, 10),
		ms(w.Early), ms(w.Answer), ms(w.Catchup), ms(age), strconv.Itoa(max)}
	var c ledger.Claim
	var err error
	if r.minAcks > 0 {
		c, err = r.claimReplicated(ctx, keys, args)
	} else {
		var vals []rueidis.RedisMessage
		if vals, err = claimScript.Exec(ctx, r.c, keys, args).ToArray(); err == nil {
			c, err = decodeClaim(vals)
		}
	}
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("claim %q: %w", req.Job, explainScript(err))
	}
	return c, nil
}

var _ ledger.Peeker = (*Redis)(nil)

// peekScript reads a slot's record and the ledger's seq and successful
// runs (Redis.Peek). A script, not plain reads: the client sends a read
// that was in flight on a connection that failed again on the next one,
// so a read sent during an outage would be answered after it, and the
// claim it lets through would run a slot of the outage late; a script,
// like the claim, fails with its connection (the node then skips the
// slot redis_error, as its claim would have).
//
//	KEYS: 1 ledger, 2 state; ARGV: 1 slot
//	returns {record or false, seq, runs}
var peekScript = newScript(`local h = redis.call("HMGET", KEYS[2], "seq", "runs")
return {redis.call("HGET", KEYS[1], ARGV[1]), tonumber(h[1] or "0"), tonumber(h[2] or "0")}`, false)

// Peek reads the record of job's slot and the ledger's seq and successful
// runs (peekScript, one round trip; it writes nothing): a lower-ranked
// node's claim is not sent when the slot has a record (ledger.Peeker),
// unless the ledger is behind what the node has seen. A record that does
// not decode is reported as not found, so that the claim script, which
// decides, is sent.
func (r *Redis) Peek(ctx context.Context, job string, slot int64) (ledger.Claim, bool, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	vals, err := peekScript.Exec(ctx, r.c, []string{r.key("occ", job), r.key("state", job)},
		[]string{strconv.FormatInt(slot, 10)}).ToArray()
	if err != nil {
		return ledger.Claim{}, false, fmt.Errorf("peek %q: %w", job, explainScript(err))
	}
	if len(vals) != 3 {
		return ledger.Claim{}, false, fmt.Errorf("peek %q: script returned %d values, want 3", job, len(vals))
	}
	s, err := vals[0].ToString()
	if err != nil { // false: no record
		return ledger.Claim{}, false, nil
	}
	seq, _ := vals[1].AsInt64()
	runs, _ := vals[2].AsInt64()
	o, err := decodeOccurrence(s, nil)
	if err != nil || o.Status == "" {
		return ledger.Claim{}, false, nil
	}
	return ledger.Claim{Outcome: ledger.ClaimedElsewhere, Status: o.Status, Reason: o.Reason, Seq: seq, Runs: runs}, true, nil
}

// decodeClaim reads claimScript's reply.
func decodeClaim(vals []rueidis.RedisMessage) (ledger.Claim, error) {
	if len(vals) != 13 {
		return ledger.Claim{}, fmt.Errorf("script returned %d values, want 13", len(vals))
	}
	var n [13]int64
	var s [13]string
	var errs []error
	for i, v := range vals {
		var err error
		if i >= 7 && i <= 9 {
			s[i], err = v.ToString()
		} else {
			n[i], err = v.AsInt64()
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return ledger.Claim{}, err
	}
	return ledger.Claim{Outcome: ledger.Outcome(n[0]), Token: n[1], Now: time.UnixMilli(n[2]), Seq: n[3], Runs: n[4],
		Repaired: n[5] == 1, FoundSeq: n[6], Status: s[7], Reason: s[8], Holder: s[9], Pending: n[10], Takes: n[11],
		Expired: n[12]}, nil
}

// Finish writes the occurrence's final record, releases the lease and
// hands it to a pending slot, in one finishScript call (docs/protocol.md,
// R1, R4, R6, R7). Use a fresh ctx with its own timeout, never a run's
// cancelled one. On error nothing is known (the caller hands the owners
// to the janitor, which sends the finish again: it is idempotent). With
// Options.MinReplicasAcked a finish that handed the lease on, or that
// reached max_runs, waits for the replicas (finishReplicated).
func (r *Redis) Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error) {
	if err := req.Validate(); err != nil {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	args, err := finishArgs(req)
	if err != nil {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, err)
	}
	keys := r.ledgerKeys(req.Job, "pending", "inflight")
	var f ledger.Finished
	if r.minAcks > 0 {
		f, err = r.finishReplicated(ctx, keys, args, req.MaxRuns)
	} else {
		var vals []int64
		if vals, err = finishScript.Exec(ctx, r.c, keys, args).AsIntSlice(); err == nil {
			f, err = decodeFinished(vals)
		}
	}
	if err != nil {
		return ledger.Finished{}, fmt.Errorf("finish %q: %w", req.Job, explainScript(err))
	}
	return f, nil
}

// finishArgs are finishScript's ARGV for req.
func finishArgs(req ledger.FinishRequest) ([]string, error) {
	rec := req.Record
	o := rec.Occurrence()
	body, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	score := rec.Slot
	if score == 0 {
		score = max(rec.Claimed.Unix(), rec.Start.Unix(), 1)
	}
	nextNode, nextRun := ledger.SplitOwner(req.Next)
	return []string{req.Owner, req.Next, ms(req.TTL), strconv.FormatInt(req.MaxRuns, 10), o.ID,
		strconv.FormatInt(score, 10), string(body), flag(rec.Skip == "" && rec.Result == ledger.ResultSuccess),
		flag(rec.Skip == ""), rec.RunID, nextNode, nextRun, flag(req.OwnRecordOnly)}, nil
}

// decodeFinished reads finishScript's reply.
func decodeFinished(vals []int64) (ledger.Finished, error) {
	if len(vals) != 8 {
		return ledger.Finished{}, fmt.Errorf("script returned %d values, want 8", len(vals))
	}
	if vals[7] == 1 {
		return ledger.Finished{}, ledger.ErrRecordConflict
	}
	return ledger.Finished{Released: vals[0] == 1, Pending: vals[1], Token: vals[2], Left: vals[3] == 1, Runs: vals[4],
		Seq: vals[5], Now: time.UnixMilli(vals[6])}, nil
}

// Audit records a job's missed occurrences in one auditScript call
// (docs/protocol.md, R8).
func (r *Redis) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	if req.Job == "" {
		return ledger.Audited{}, errors.New("audit: empty job name")
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	age, max := req.Retention.Resolved()
	args := []string{strconv.FormatInt(req.From, 10), ms(req.Window + req.Grace), req.Node, req.Reason, ms(age), strconv.Itoa(max),
		strconv.FormatInt(req.MaxRuns, 10), strconv.FormatInt(req.SeenSeq, 10), ms(req.LockTTL), ms(req.Early)}
	for _, s := range req.Slots {
		args = append(args, strconv.FormatInt(s, 10))
	}
	vals, err := auditScript.Exec(ctx, r.c, r.ledgerKeys(req.Job, "inflight"), args).ToArray()
	if err != nil {
		return ledger.Audited{}, fmt.Errorf("audit %q: %w", req.Job, explainScript(err))
	}
	a, err := decodeAudited(vals)
	if err != nil {
		return ledger.Audited{}, fmt.Errorf("audit %q: %w", req.Job, err)
	}
	return a, nil
}

// decodeAudited reads auditScript's reply.
func decodeAudited(vals []rueidis.RedisMessage) (ledger.Audited, error) {
	if len(vals) != 9 {
		return ledger.Audited{}, fmt.Errorf("script returned %d values, want 9", len(vals))
	}
	var n [9]int64
	var errs []error
	for _, i := range []int{0, 1, 2, 3, 5, 6, 7} {
		var err error
		n[i], err = vals[i].AsInt64()
		errs = append(errs, err)
	}
	missed, err1 := vals[4].AsIntSlice()
	unknown, err2 := vals[8].AsStrSlice()
	if err := errors.Join(append(errs, err1, err2)...); err != nil {
		return ledger.Audited{}, err
	}
	return ledger.Audited{From: n[0], Stale: n[1] == 1, To: n[2], Now: time.UnixMilli(n[3]), Missed: missed,
		Seq: n[5], Runs: n[6], Repaired: n[7] == 1, Unknown: unknown}, nil
}

// Occurrences returns the job's ledger records whose index score (the
// slot; a manual run's claim time) lies in [from, to] (Unix seconds),
// oldest first: one ZRANGE and one HMGET.
func (r *Redis) Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	ids, err := r.c.Do(ctx, r.occRange(job, from, to)).AsStrSlice()
	if err != nil || len(ids) == 0 {
		return nil, wrapOp("occurrences", job, err)
	}
	vals, err := r.c.Do(ctx, r.c.B().Hmget().Key(r.key("occ", job)).Field(ids...).Build()).ToArray()
	if err != nil {
		return nil, wrapOp("occurrences", job, err)
	}
	return decodeRecords(job, ids, vals)
}

// OccurrencesOf returns the ledger records of each of jobs as Occurrences
// does, in the order of jobs, in two round trips for all: the ZRANGEs,
// pipelined, then the HMGETs of the jobs that have records, pipelined (in
// Cluster mode rueidis sends each to its job's shard). The first job
// whose records cannot be read fails the call.
func (r *Redis) OccurrencesOf(ctx context.Context, jobs []string, from, to int64) ([][]ledger.Occurrence, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cmds := make(rueidis.Commands, len(jobs))
	for i, job := range jobs {
		cmds[i] = r.occRange(job, from, to)
	}
	ids := make([][]string, len(jobs))
	var gets rueidis.Commands
	var of []int // the job index of each of gets
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		var err error
		if ids[i], err = res.AsStrSlice(); err != nil {
			return nil, wrapOp("occurrences", jobs[i], err)
		}
		if len(ids[i]) > 0 {
			gets = append(gets, r.c.B().Hmget().Key(r.key("occ", jobs[i])).Field(ids[i]...).Build())
			of = append(of, i)
		}
	}
	out := make([][]ledger.Occurrence, len(jobs))
	for k, res := range r.c.DoMulti(ctx, gets...) {
		i := of[k]
		vals, err := res.ToArray()
		if err != nil {
			return nil, wrapOp("occurrences", jobs[i], err)
		}
		if out[i], err = decodeRecords(jobs[i], ids[i], vals); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// occRange is the ZRANGE of job's ledger index by score in [from, to].
func (r *Redis) occRange(job string, from, to int64) rueidis.Completed {
	return r.c.B().Zrange().Key(r.key("occidx", job)).Min(strconv.FormatInt(from, 10)).
		Max(strconv.FormatInt(to, 10)).Byscore().Build()
}

// decodeRecords decodes the HMGET replies vals of job's records ids,
// leaving out those trimmed since the ZRANGE.
func decodeRecords(job string, ids []string, vals []rueidis.RedisMessage) ([]ledger.Occurrence, error) {
	out := make([]ledger.Occurrence, 0, len(vals))
	for i, v := range vals {
		s, err := v.ToString()
		if rueidis.IsRedisNil(err) {
			continue // trimmed between the two calls
		}
		o, err := decodeOccurrence(s, err)
		if err != nil {
			return nil, fmt.Errorf("occurrences %q: record %s: %w", job, ids[i], err)
		}
		out = append(out, o)
	}
	return out, nil
}

// wrapOp wraps err (nil stays nil) as "op "job": err".
func wrapOp(op, job string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %q: %w", op, job, err)
}

// History returns up to n of the job's most recent runs (ledger records
// with status ran), newest first.
func (r *Redis) History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	occ, err := r.Occurrences(ctx, job, 0, 1<<53)
	if err != nil {
		return nil, err
	}
	return ledger.RunsOf(occ, n), nil
}

var _ ledger.Unhander = (*Redis)(nil)

// Unhand takes back the lease a Finish may have handed to the job's
// pending slot, owner (FinishRequest.Next), when that finish's answer was
// lost and nobody runs the slot: if the lease still holds owner it is
// deleted and, when the finish noted handing owner that slot and no other
// slot is pending, the slot is pending again, for the job's next claim
// (unhandScript). held says the lease was owner's; slot is the slot put
// back (0 = none). One round trip.
func (r *Redis) Unhand(ctx context.Context, job, owner string) (slot int64, held bool, err error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := unhandScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("state", job), r.key("pending", job)},
		[]string{owner}).AsInt64()
	if err != nil {
		return 0, false, fmt.Errorf("unhand %q: %w", job, explainScript(err))
	}
	return max(n, 0), n >= 0, nil
}
