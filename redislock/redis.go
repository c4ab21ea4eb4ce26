package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/redis/rueidis"
)

// Defaults for zero Options fields.
const (
	DefaultCallTimeout = 3 * time.Second
	DefaultDialTimeout = 3 * time.Second
	// DefaultReplicaAckTimeout bounds the WAIT of a won claim when
	// Options.MinReplicasAcked > 0.
	DefaultReplicaAckTimeout = 500 * time.Millisecond
	// DefaultBlockingIdle is Options.BlockingIdle's default.
	DefaultBlockingIdle = 30 * time.Second
	// blockingPool bounds, per Redis node, the client's connections for
	// blocking commands (XREAD BLOCK: each live output follower holds one
	// while it waits) and, separately, its dedicated ones (a claim and its
	// WAIT). rueidis's default of 1024 let followers open a connection each,
	// with 1 MiB of buffers, kept after they left. It is above
	// api.MaxFollowers (32), the followers a daemon serves at once, so that
	// the control socket's followers, which that bound does not count, find
	// one too; a call beyond it waits for a free connection (up to its ctx).
	blockingPool = 40
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
	// MinReplicasAcked > 0 makes a won claim wait (WAIT) until that many
	// replicas acknowledged it, for at most ReplicaAckTimeout (default
	// DefaultReplicaAckTimeout); fewer acknowledgements turn it into
	// actors.NotReplicated. 0: no WAIT.
	MinReplicasAcked  int
	ReplicaAckTimeout time.Duration
	// BlockingIdle is how long an idle connection of the blocking and
	// dedicated pools (blockingPool) may stay open: rueidis closes the idle
	// ones within this of one being put back (ClientOption
	// BlockingPoolCleanup). Default DefaultBlockingIdle.
	BlockingIdle time.Duration
}

// Redis is the Redis backend (standalone, Sentinel or Cluster, through
// rueidis). It is safe for concurrent use. Every method makes exactly one
// round trip, starts no
// goroutines of its own, and blocks until Redis answers or the deadline
// passes: the caller's ctx deadline, or CallTimeout when ctx
// has none. On a deadline error the command may still have been applied
// (docs/protocol.md, "Redis calls", says how callers recover).
type Redis struct {
	c           rueidis.Client
	prefix      string
	callTimeout time.Duration
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
	r := &Redis{prefix: opts.KeyPrefix, callTimeout: opts.CallTimeout, mode: mode}
	if r.prefix == "" {
		r.prefix = DefaultKeyPrefix
	}
	if r.callTimeout <= 0 {
		r.callTimeout = DefaultCallTimeout
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
		BlockingPoolSize:  blockingPool,
		// Idle blocking connections are closed, none kept (MinSize 0): a
		// follower that comes back dials again.
		BlockingPoolCleanup: opts.BlockingIdle,
	}
	if co.BlockingPoolCleanup <= 0 {
		co.BlockingPoolCleanup = DefaultBlockingIdle
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

// Renew resets the lease TTL (whole milliseconds, at least 1ms) if the lease
// still holds owner: compare-and-PEXPIRE. When renewed it returns the job's
// pending slot (Unix seconds; 0 = none: overlap queue and replace,
// docs/protocol.md, "Queue and replace") and nil; the pending slot and an
// error wrapping ledger.ErrRetaken when the lease was held by nobody and is
// owner's again (renewScript); an error wrapping ledger.ErrNotHeld when
// someone else holds it, and any other error when the result is unknown.
func (r *Redis) Renew(ctx context.Context, job, owner string, ttl time.Duration) (pending int64, err error) {
	if err := ledger.CheckLease(job, owner, ttl); err != nil {
		return 0, fmt.Errorf("renew %q: %w", job, explainScript(err))
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	n, err := renewScript.Exec(ctx, r.c, []string{r.key("job", job), r.key("pending", job)},
		[]string{owner, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("renew %q: %w", job, explainScript(err))
	case n == -1:
		return 0, fmt.Errorf("renew %q: %w", job, ledger.ErrNotHeld)
	case n < -1:
		return -2 - n, fmt.Errorf("renew %q: %w", job, ledger.ErrRetaken)
	}
	return n, nil
}

// Release deletes the lease if it holds owner: compare-and-DEL. released
// reports whether a lease was deleted; (false, nil) means it had already
// expired or belongs to someone else, which is not an error. Use a fresh ctx
// with its own timeout, never a run's cancelled one.
func (r *Redis) Release(ctx context.Context, job, owner string) (released bool, err error) {
	if err := ledger.CheckLease(job, owner, -1); err != nil {
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
