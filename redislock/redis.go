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
	// DefaultReplicaAckTimeout bounds the WAIT of a won claim when
	// Options.MinReplicasAcked > 0.
	DefaultReplicaAckTimeout = 500 * time.Millisecond
	// sentinelRefresh is how often a Sentinel client asks the sentinels
	// for the master, besides following their announcements.
	sentinelRefresh = 5 * time.Second
)

// Options configures New. Zero values take the defaults above.
type Options struct {
	// Addresses are "host:port" pairs: the server (standalone), the
	// sentinels (Sentinel) or Cluster seed nodes (Cluster), as Mode says.
	Addresses []string
	// Mode is ModeStandalone, ModeSentinel, ModeCluster, or "" to infer it
	// (InferMode). New confirms it against the server: a Cluster client
	// whose server is not a Cluster node is an ErrModeMismatch; a standalone
	// client whose server is a Cluster node is found by ServerInfo and
	// Probe (ErrClusterNode).
	Mode           string
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
	// MinReplicasAcked > 0 makes a won claim wait (WAIT) until that many
	// replicas acknowledged it, for at most ReplicaAckTimeout (default
	// DefaultReplicaAckTimeout); fewer acknowledgements turn it into
	// actors.NotReplicated. 0: no WAIT.
	MinReplicasAcked  int
	ReplicaAckTimeout time.Duration
}

// Redis is the Redis backend (standalone, Sentinel or Cluster, through
// rueidis). It is safe for concurrent use. Every method makes exactly one
// round trip (concurrent claims may share theirs, batch.go), starts no
// goroutines of its own, and blocks until Redis answers or the deadline
// passes: the caller's ctx deadline, or CallTimeout when ctx
// has none. On a deadline error the command may still have been applied
// (docs/protocol.md, "Redis calls", says how callers recover).
type Redis struct {
	c           rueidis.Client
	prefix      string
	callTimeout time.Duration
	historyLen  int
	probes      atomic.Pointer[probeSet] // probeKeys' cache (Cluster mode)
	slots       atomic.Pointer[slotMap]  // the Cluster's slot map (probe.go)
	// mode is the topology the client connected to (Mode constants).
	mode string
	// tagIDs: Cluster mode with a key prefix without a hash tag, so key()
	// puts the tag around the job name (keys.go).
	tagIDs bool
	// minAcks and ackTimeout: Options.MinReplicasAcked, ReplicaAckTimeout.
	minAcks    int
	ackTimeout time.Duration
	// batch: concurrent claims go out together (batch.go), through claims.
	batch  bool
	claims claimQueue
	keys   keyCache // each job's keys of the claim and the finish (keys.go)
}

// ErrModeMismatch means that the server is not of the topology redis.mode
// names (e.g. mode cluster and a server with cluster support disabled).
var ErrModeMismatch = errors.New("redislock: the server's topology is not redis.mode")

// InferMode is the topology of opts when Mode is "": Sentinel when
// SentinelMaster is set, Cluster with several addresses, else standalone.
// A given Mode is returned as it is.
func InferMode(opts Options) string {
	switch {
	case opts.Mode != "":
		return opts.Mode
	case opts.SentinelMaster != "":
		return ModeSentinel
	case len(opts.Addresses) > 1:
		return ModeCluster
	}
	return ModeStandalone
}

// New builds a client for the topology InferMode(opts) names. A standalone
// client is returned even when Redis is unreachable, and connects lazily
// on the first call that finds Redis up (an unreachable Redis at start is
// not fatal: keep running, retry). Sentinel and Cluster clients must reach
// a sentinel or seed node now. Authentication failures are returned for
// every mode; a Cluster client whose server is not a Cluster node returns
// an error wrapping ErrModeMismatch. It does not block longer than
// DialTimeout per address tried.
func New(opts Options) (*Redis, error) {
	if len(opts.Addresses) == 0 {
		return nil, errors.New("redislock: no redis address")
	}
	mode := InferMode(opts)
	r := &Redis{prefix: opts.KeyPrefix, callTimeout: opts.CallTimeout, historyLen: opts.HistoryLen, mode: mode}
	if r.prefix == "" {
		r.prefix = DefaultKeyPrefix
	}
	if r.callTimeout <= 0 {
		r.callTimeout = DefaultCallTimeout
	}
	if r.historyLen <= 0 {
		r.historyLen = DefaultHistoryLen
	}
	r.minAcks, r.ackTimeout = opts.MinReplicasAcked, opts.ReplicaAckTimeout
	if r.ackTimeout < time.Millisecond {
		r.ackTimeout = DefaultReplicaAckTimeout
	}
	addrs := strings.Join(opts.Addresses, ",")
	co := clientOption(opts, mode)
	c, err := rueidis.NewClient(co)
	if err != nil {
		_, isRedisErr := rueidis.IsRedisErr(err)
		if c == nil || !co.ForceSingleClient || isRedisErr {
			if c != nil {
				c.Close()
			}
			if re, ok := rueidis.IsRedisErr(err); ok && mode == ModeSentinel && strings.Contains(strings.ToLower(re.Error()), "unknown command") {
				return nil, fmt.Errorf("redislock: connect to %s: %w: redis.mode is sentinel, but the addresses are no "+
					"sentinels (%w); give the sentinels' addresses (port 26379 by default), or remove sentinel_master", addrs, ErrModeMismatch, err)
			}
			if re, ok := rueidis.IsRedisErr(err); ok && mode == ModeCluster && strings.Contains(re.Error(), "cluster support disabled") {
				return nil, fmt.Errorf("redislock: connect to %s: %w: redis.mode is cluster, but the server has "+
					"cluster support disabled (%w); set redis.mode: standalone (one address) or give the Cluster's nodes", addrs, ErrModeMismatch, err)
			}
			return nil, fmt.Errorf("redislock: connect to %s: %w", addrs, err)
		}
		// Standalone and unreachable: keep the client, it reconnects lazily.
	}
	if mode == ModeCluster && c.Mode() != rueidis.ClientModeCluster {
		c.Close()
		return nil, fmt.Errorf("redislock: connect to %s: %w: redis.mode is cluster, but the server is not a "+
			"Cluster node (cluster_enabled:0); set redis.mode: standalone or give the Cluster's nodes", addrs, ErrModeMismatch)
	}
	r.c = c
	r.tagIDs = mode == ModeCluster && !HasHashTag(r.prefix)
	r.batch = !r.tagIDs && r.minAcks == 0
	return r, nil
}

// clientOption maps Options to rueidis: Sentinel for ModeSentinel, a forced
// single client for ModeStandalone (only the first address is used),
// otherwise rueidis's auto mode, which asks the seed nodes for the
// Cluster's slots (CLUSTER SLOTS) and, given exactly one address of a
// server that is no Cluster node, falls back to a standalone client (New
// refuses that).
func clientOption(opts Options, mode string) rueidis.ClientOption {
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
	switch mode {
	case ModeSentinel:
		// TopologyRefreshInterval: besides following +switch-master, ask the
		// sentinels every 5 s which server is the master, so that one missed
		// announcement does not bind the client to a demoted master (rueidis
		// docs, SentinelOption.TopologyRefreshInterval: "Enabling it is
		// recommended").
		co.Sentinel = rueidis.SentinelOption{MasterSet: opts.SentinelMaster, TLSConfig: opts.TLS,
			Dialer: net.Dialer{Timeout: dial, KeepAlive: time.Second}, TopologyRefreshInterval: sentinelRefresh}
	case ModeStandalone:
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

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Claim runs the claim step (docs/protocol.md, "claim") atomically in one Lua script (one EVALSHA;
// EVAL as well after a server restart). Concurrent claims of one client are
// sent together in one script call where the topology allows it (batch.go):
// a claim may then wait in the client's queue for at most one claim call's
// round trip before it is sent. With Options.MinReplicasAcked a
// won claim then waits for the replicas (claimReplicated: one more round
// trip, at most ReplicaAckTimeout) and may come back as
// actors.NotReplicated. An error means the outcome is unknown: the claim
// may have been applied, so the caller must not run the slot and should
// later Release any lease under req.Owner.
func (r *Redis) Claim(ctx context.Context, req actors.ClaimRequest) (actors.Claim, error) {
	if err := req.Validate(); err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, explainScript(err))
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	keys, args := r.claimKeysArgs(req)
	if r.minAcks > 0 {
		c, err := r.claimReplicated(ctx, keys, args)
		if err != nil {
			return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, explainScript(err))
		}
		return c, nil
	}
	var c actors.Claim
	var err error
	if r.batch {
		var linger time.Duration
		if req.Early && time.Until(time.Unix(req.Slot, 0)) > earlyLingerRoom {
			linger = earlyLinger
		}
		c, err = r.claim(ctx, keys, args, req.AnswerBy, linger)
	} else {
		var vals []rueidis.RedisMessage
		if vals, err = claimScript.Exec(ctx, r.c, keys, args).ToArray(); err == nil {
			c, err = decodeClaim(vals)
		}
	}
	if err != nil {
		return actors.Claim{}, fmt.Errorf("claim %q: %w", req.Job, explainScript(err))
	}
	return c, nil
}

// claimKeysArgs are claimScript's KEYS (shared: read only) and ARGV for req.
func (r *Redis) claimKeysArgs(req actors.ClaimRequest) (keys, args []string) {
	keys = r.hot(req.Job).claim
	args = []string{strconv.FormatInt(req.Slot, 10), req.Owner, strconv.FormatInt(req.TTL.Milliseconds(), 10),
		flag(req.Lease), flag(req.IgnorePause), strconv.FormatInt(req.MinSlot, 10), strconv.FormatInt(req.MinFence, 10),
		flag(req.NeedRecord), flag(req.Queue), flag(req.Backfill), strconv.FormatInt(req.MaxRuns, 10), flag(req.Early)}
	return keys, args
}

// decodeClaim reads claimScript's reply.
func decodeClaim(vals []rueidis.RedisMessage) (actors.Claim, error) {
	if len(vals) != 12 {
		return actors.Claim{}, fmt.Errorf("script returned %d values, want 12", len(vals))
	}
	var n [10]int64
	var errs [12]error // one per value: no allocation unless one fails
	for i := range n {
		if i == 7 {
			continue // the holder
		}
		n[i], errs[i] = vals[i].AsInt64()
	}
	holder, err := vals[7].ToString()
	start, err1 := vals[10].ToString()
	end, err2 := vals[11].ToString()
	errs[7], errs[10], errs[11] = err, err1, err2
	if err := errors.Join(errs[:]...); err != nil {
		return actors.Claim{}, err
	}
	return actors.Claim{Outcome: actors.Outcome(n[0]), Fence: n[1], StateSlot: n[2], StateFence: n[3],
		Repaired: n[4] == 1, FoundSlot: n[5], FoundFence: n[6], Holder: holder, Pending: n[8], Takes: n[9],
		LastRun: lastRun(start, end)}, nil
}

// lastRun is end − start of a run record's RFC 3339 start and end (the
// state's last_start and last_end, as encodeRecord writes them); 0 when
// either is missing or unreadable, or the run did not start: a claim does
// not fail for a record it only reads for the claim order.
func lastRun(start, end string) time.Duration {
	if start == "" || end == "" {
		return 0
	}
	s, err1 := time.Parse(time.RFC3339Nano, start)
	e, err2 := time.Parse(time.RFC3339Nano, end)
	if err1 != nil || err2 != nil || s.Year() <= 1 || !e.After(s) {
		return 0
	}
	return e.Sub(s)
}

// Renew resets the lease TTL (whole milliseconds, at least 1ms) if the lease
// still holds owner: compare-and-PEXPIRE. When renewed it returns the job's
// pending slot (Unix seconds; 0 = none: overlap queue and replace,
// docs/protocol.md, "Queue and replace") and nil; an error wrapping
// actors.ErrNotHeld when the lease is gone or held by someone else, and any
// other error when the result is unknown.
func (r *Redis) Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error) {
	if err := validateLease(job, owner, ttl); err != nil {
		return 0, fmt.Errorf("renew %q: %w", job, explainScript(err))
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := renewScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("pending", job)},
		[]string{owner, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("renew %q: %w", job, explainScript(err))
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
		return false, fmt.Errorf("release %q: %w", job, explainScript(err))
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := releaseScript.Exec(ctx, r.c, []string{r.key("job", job)}, []string{owner}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("release %q: %w", job, explainScript(err))
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
