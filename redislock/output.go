package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/redis/rueidis"
)

// Run output (docs/coordination.md, the key table; docs/api.md, "Output"): the
// kept output of an occurrence is the string P out:J:ID (ID its ledger id,
// the slot or m<token>), written once when the run ends with PX the
// ledger's retention; the live output of a run in progress is the stream
// P live:J:ID, one entry per chunk (fields data, and dropped, seq or end
// when set), capped with MAXLEN ~ ledger.MaxLiveChunks and expiring a while
// after its last chunk. Both take the job's key, so that in Cluster mode
// they share the job's hash tag: P out:{J}:ID.

var _ ledger.OutputStore = (*Redis)(nil)

// outputKey is the key of job's occurrence occ of kind "out" or "live".
func (r *Redis) outputKey(kind, job, occ string) string { return r.key(kind, job) + ":" + occ }

// StoreOutput keeps out as the output of job's occurrence occ (SET PX the
// retention's age) and indexes the occurrence (keptIndex): one round
// trip, a second when older occurrences go.
func (r *Redis) StoreOutput(ctx context.Context, job, occ string, out []byte, keep ledger.Retention) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	age, _ := keep.Resolved()
	cmds := append(rueidis.Commands{r.c.B().Set().Key(r.outputKey("out", job, occ)).Value(rueidis.BinaryString(out)).
		PxMilliseconds(max(age.Milliseconds(), 1)).Build()}, r.indexKept(job, occ, keep)...)
	if err := r.doKept(ctx, job, keep, cmds); err != nil {
		return fmt.Errorf("store output %s %s: %w", job, occ, err)
	}
	return nil
}

// The kept index P kept:J (a sorted set: the occurrences of job with kept
// output or hook results, scored by when they were first kept, in ms)
// bounds them by count as the ledger is (rule R9, ledger.max_occurrences):
// past keep.Max members the oldest go, with their P out:J:ID and P
// hooks:J:ID. It expires with the retention's age, as they do. Every
// command is single-key: Cluster-safe (the keys share the job's hash tag
// anyway). Two writers trimming at once may delete the same keys: no
// harm.

// indexKept returns the commands that index occ (ZADD NX, its first
// keeping's time; PEXPIRE; ZCARD, which doKept reads last).
func (r *Redis) indexKept(job, occ string, keep ledger.Retention) rueidis.Commands {
	age, _ := keep.Resolved()
	idx := r.key("kept", job)
	return rueidis.Commands{
		r.c.B().Zadd().Key(idx).Nx().ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), occ).Build(),
		r.c.B().Pexpire().Key(idx).Milliseconds(max(age.Milliseconds(), 1)).Build(),
		r.c.B().Zcard().Key(idx).Build()}
}

// doKept sends cmds (ending with indexKept's), then, when the index holds
// more than keep.Max occurrences, deletes the oldest with what they kept.
func (r *Redis) doKept(ctx context.Context, job string, keep ledger.Retention, cmds rueidis.Commands) error {
	res := r.c.DoMulti(ctx, cmds...)
	for _, re := range res {
		if err := re.Error(); err != nil {
			return err
		}
	}
	n, _ := res[len(res)-1].AsInt64()
	_, maxN := keep.Resolved()
	if n <= int64(maxN) {
		return nil
	}
	idx := r.key("kept", job)
	old, err := r.c.Do(ctx, r.c.B().Zrange().Key(idx).Min("0").Max(strconv.FormatInt(n-int64(maxN)-1, 10)).Build()).AsStrSlice()
	if err != nil {
		return err
	}
	del := make(rueidis.Commands, 0, 3*len(old))
	for _, id := range old {
		del = append(del, r.c.B().Del().Key(r.outputKey("out", job, id)).Build(),
			r.c.B().Del().Key(r.outputKey("hooks", job, id)).Build(),
			r.c.B().Zrem().Key(idx).Member(id).Build())
	}
	for _, re := range r.c.DoMulti(ctx, del...) {
		if err := re.Error(); err != nil {
			return err
		}
	}
	return nil
}

// Output returns the kept output of job's occurrence occ (GET), or
// ledger.ErrNoOutput.
func (r *Redis) Output(ctx context.Context, job, occ string) ([]byte, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	b, err := r.c.Do(ctx, r.c.B().Get().Key(r.outputKey("out", job, occ)).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return nil, ledger.ErrNoOutput
	}
	if err != nil {
		return nil, fmt.Errorf("output %s %s: %w", job, occ, err)
	}
	return b, nil
}

// PublishOutput appends c to the live output stream (XADD MAXLEN ~, then
// PEXPIRE, pipelined: one round trip).
func (r *Redis) PublishOutput(ctx context.Context, job, occ string, c ledger.OutputChunk, ttl time.Duration) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	key := r.outputKey("live", job, occ)
	fv := r.c.B().Xadd().Key(key).Maxlen().Almost().Threshold(strconv.Itoa(ledger.MaxLiveChunks)).Id("*").
		FieldValue().FieldValue("data", rueidis.BinaryString(c.Data))
	if c.Dropped > 0 {
		fv = fv.FieldValue("dropped", strconv.FormatInt(c.Dropped, 10))
	}
	if c.Seq > 0 {
		fv = fv.FieldValue("seq", strconv.FormatInt(c.Seq, 10))
	}
	if c.End {
		fv = fv.FieldValue("end", "1")
	}
	res := r.c.DoMulti(ctx, fv.Build(), r.c.B().Pexpire().Key(key).Milliseconds(max(ttl.Milliseconds(), 1)).Build())
	for _, re := range res {
		if err := re.Error(); err != nil {
			return fmt.Errorf("publish output %s %s: %w", job, occ, err)
		}
	}
	return nil
}

// FollowOutput reads the live output stream after the entry after (XREAD
// COUNT ledger.FollowBatch BLOCK). The block runs on one of the client's
// pooled connections (at most blockingPool, closed when idle: New), not
// the shared pipeline.
func (r *Redis) FollowOutput(ctx context.Context, job, occ, after string, block time.Duration) ([]ledger.OutputChunk, error) {
	if after == "" {
		after = "0"
	}
	ctx, cancel := context.WithTimeout(ctx, block+r.callTimeout)
	defer cancel()
	key := r.outputKey("live", job, occ)
	cmd := r.c.B().Xread().Count(ledger.FollowBatch).Block(max(block.Milliseconds(), 1)).Streams().Key(key).Id(after).Build()
	streams, err := r.c.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("follow output %s %s: %w", job, occ, err)
	}
	entries := streams[key]
	out := make([]ledger.OutputChunk, 0, len(entries))
	for _, e := range entries {
		c := ledger.OutputChunk{ID: e.ID, Data: []byte(e.FieldValues["data"]), End: e.FieldValues["end"] == "1"}
		if d, ok := e.FieldValues["dropped"]; ok {
			if c.Dropped, err = strconv.ParseInt(d, 10, 64); err != nil {
				return nil, fmt.Errorf("follow output %s %s: entry %s: %w", job, occ, e.ID, errors.New("dropped is no number"))
			}
		}
		if n, ok := e.FieldValues["seq"]; ok {
			if c.Seq, err = strconv.ParseInt(n, 10, 64); err != nil {
				return nil, fmt.Errorf("follow output %s %s: entry %s: %w", job, occ, e.ID, errors.New("seq is no number"))
			}
		}
		out = append(out, c)
	}
	return out, nil
}
