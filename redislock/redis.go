package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/actors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Defaults for zero Options fields.
const (
	DefaultCallTimeout = 3 * time.Second
	DefaultDialTimeout = 3 * time.Second
	DefaultHistoryLen  = 100
)

// Options configures New. Zero values take the defaults above.
type Options struct {
	// Addresses are "host:port" pairs: one address without SentinelMaster is
	// a standalone server; with SentinelMaster they are sentinels; several
	// without SentinelMaster are Cluster seed nodes (the key prefix then needs
	// a {hash tag}, which config validation enforces).
	Addresses      []string
	Username       string // ACL user, may be empty
	Password       string // never appears in errors
	DB             int    // SELECT on connect; must be 0 in Cluster mode
	KeyPrefix      string // default DefaultKeyPrefix
	SentinelMaster string
	TLS            *tls.Config // nil: plain TCP
	// DialTimeout bounds connecting and the HELLO/AUTH handshake.
	DialTimeout time.Duration
	// CallTimeout is the deadline applied to a call whose ctx has none
	// (rueidis retries some reads forever without one).
	CallTimeout time.Duration
	// HistoryLen caps each job's history stream, in entries.
	HistoryLen int
}

// Redis is the Redis backend (standalone, Sentinel or Cluster, through
// rueidis). It is safe for concurrent use. Every method makes exactly one
// round trip, starts no goroutines of its own, and blocks until Redis answers
// or the deadline passes: the caller's ctx deadline, or CallTimeout when ctx
// has none. On a deadline error the command may still have been applied
// (docs/protocol.md, "Redis calls", says how callers recover).
type Redis struct {
	c           rueidis.Client
	prefix      string
	callTimeout time.Duration
	historyLen  int
	probes      atomic.Pointer[probeSet] // probeKeys' cache (Cluster mode)
}

// New builds a client. A standalone client (one address, no SentinelMaster)
// is returned even when Redis is unreachable, and connects lazily on the
// first call that finds Redis up (an unreachable Redis at start is not fatal: keep running, retry).
// Sentinel and Cluster clients must reach a sentinel or seed node now.
// Authentication failures are returned for every mode. It does not block
// longer than DialTimeout per address tried.
func New(opts Options) (*Redis, error) {
	if len(opts.Addresses) == 0 {
		return nil, errors.New("redislock: no redis address")
	}
	r := &Redis{prefix: opts.KeyPrefix, callTimeout: opts.CallTimeout, historyLen: opts.HistoryLen}
	if r.prefix == "" {
		r.prefix = DefaultKeyPrefix
	}
	if r.callTimeout <= 0 {
		r.callTimeout = DefaultCallTimeout
	}
	if r.historyLen <= 0 {
		r.historyLen = DefaultHistoryLen
	}
	co := clientOption(opts)
	c, err := rueidis.NewClient(co)
	if err != nil {
		_, isRedisErr := rueidis.IsRedisErr(err)
		if c == nil || !co.ForceSingleClient || isRedisErr {
			if c != nil {
				c.Close()
			}
			return nil, fmt.Errorf("redislock: connect to %s: %w", strings.Join(opts.Addresses, ","), err)
		}
		// Standalone and unreachable: keep the client, it reconnects lazily.
	}
	r.c = c
	return r, nil
}

// clientOption maps Options to rueidis: Sentinel when
// SentinelMaster is set, a forced single client for one address, otherwise
// rueidis's auto mode, which with several addresses expects a Cluster.
func clientOption(opts Options) rueidis.ClientOption {
	dial := opts.DialTimeout
	if dial <= 0 {
		dial = DefaultDialTimeout
	}
	co := rueidis.ClientOption{
		InitAddress:  opts.Addresses,
		Username:     opts.Username,
		Password:     opts.Password,
		SelectDB:     opts.DB,
		TLSConfig:    opts.TLS,
		Dialer:       net.Dialer{Timeout: dial, KeepAlive: time.Second},
		DisableCache: true, // no client-side caching; works with RESP2 servers
		// One pipelined connection per node (rueidis defaults to 4 for
		// standalone and sentinel). rueidis notices a dead connection only when
		// it next uses it, so after a Redis restart the first call on each
		// connection fails (EOF); with one connection, the engine's reconnect
		// probe absorbs that instead of a claim. Concurrent calls are still
		// auto-pipelined.
		PipelineMultiplex: -1,
	}
	switch {
	case opts.SentinelMaster != "":
		co.Sentinel = rueidis.SentinelOption{MasterSet: opts.SentinelMaster, TLSConfig: opts.TLS,
			Dialer: net.Dialer{Timeout: dial, KeepAlive: time.Second}}
	case len(opts.Addresses) == 1:
		co.ForceSingleClient = true
	}
	return co
}

// Close closes the client's connections. Calls after Close fail.
func (r *Redis) Close() { r.c.Close() }

// call applies CallTimeout when ctx has no deadline.
func (r *Redis) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.callTimeout)
}

func (r *Redis) key(kind, job string) string { return r.prefix + kind + ":" + job }

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Claim runs the claim step (docs/protocol.md, "claim") atomically in one Lua script (one EVALSHA;
// EVAL as well after a server restart). An error means the outcome is
// unknown: the claim may have been applied, so the caller must not run the
// slot and should later Release any lease under req.Owner.
func (r *Redis) Claim(ctx context.Context, req actors.ClaimRequest) (actors.Claim, error) {
	if err := req.Validate(); err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	keys := []string{r.key("job", req.Job), r.key("state", req.Job), r.key("paused", req.Job), r.key("pending", req.Job),
		r.key("backfill", req.Job)}
	args := []string{strconv.FormatInt(req.Slot, 10), req.Owner, strconv.FormatInt(req.TTL.Milliseconds(), 10),
		flag(req.Lease), flag(req.IgnorePause), strconv.FormatInt(req.MinSlot, 10), strconv.FormatInt(req.MinFence, 10),
		flag(req.NeedRecord), flag(req.Queue), flag(req.Backfill), strconv.FormatInt(req.MaxRuns, 10)}
	vals, err := claimScript.Exec(ctx, r.c, keys, args).ToArray()
	if err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	c, err := decodeClaim(vals)
	if err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, err)
	}
	return c, nil
}

// decodeClaim reads claimScript's reply.
func decodeClaim(vals []rueidis.RedisMessage) (actors.Claim, error) {
	if len(vals) != 10 {
		return actors.Claim{}, fmt.Errorf("script returned %d values, want 10", len(vals))
	}
	var n [10]int64
	var errs []error
	for i := range n {
		if i == 7 {
			continue // the holder
		}
		var err error
		n[i], err = vals[i].AsInt64()
		errs = append(errs, err)
	}
	holder, err := vals[7].ToString()
	if err := errors.Join(append(errs, err)...); err != nil {
		return actors.Claim{}, err
	}
	return actors.Claim{Outcome: actors.Outcome(n[0]), Fence: n[1], StateSlot: n[2], StateFence: n[3],
		Repaired: n[4] == 1, FoundSlot: n[5], FoundFence: n[6], Holder: holder, Pending: n[8], Takes: n[9]}, nil
}

// Renew resets the lease TTL (whole milliseconds, at least 1ms) if the lease
// still holds owner: compare-and-PEXPIRE. When renewed it returns the job's
// pending slot (Unix seconds; 0 = none: overlap queue and replace,
// docs/protocol.md, "Queue and replace") and nil; an error wrapping
// actors.ErrNotHeld when the lease is gone or held by someone else, and any
// other error when the result is unknown.
func (r *Redis) Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error) {
	if err := validateLease(job, owner, ttl); err != nil {
		return 0, fmt.Errorf("renew %q: %w", job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := renewScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("pending", job)},
		[]string{owner, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("renew %q: %w", job, err)
	case n < 0:
		return 0, fmt.Errorf("renew %q: %w", job, actors.ErrNotHeld)
	}
	return n, nil
}

// Release deletes the lease if it holds owner: compare-and-DEL. released
// reports whether a lease was deleted; (false, nil) means it had already
// expired or belongs to someone else, which is not an error. Use a fresh ctx
// with its own timeout, never a run's cancelled one.
func (r *Redis) Release(ctx context.Context, job, owner string) (released bool, err error) {
	if err := validateLease(job, owner, -1); err != nil {
		return false, fmt.Errorf("release %q: %w", job, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := releaseScript.Exec(ctx, r.c, []string{r.key("job", job)}, []string{owner}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("release %q: %w", job, err)
	}
	return n == 1, nil
}

// History returns up to n of the job's most recent run records, newest
// first (XREVRANGE). n <= 0 returns nil.
func (r *Redis) History(ctx context.Context, job string, n int) ([]actors.RunRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	entries, err := r.c.Do(ctx, r.c.B().Xrevrange().Key(r.key("history", job)).End("+").Start("-").
		Count(int64(n)).Build()).AsXRange()
	if err != nil {
		return nil, fmt.Errorf("history %q: %w", job, err)
	}
	recs := make([]actors.RunRecord, 0, len(entries))
	for _, e := range entries {
		rec, err := decodeRecord(e.FieldValues, "")
		if err != nil {
			return nil, fmt.Errorf("history %q: entry %s: %w", job, e.ID, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
