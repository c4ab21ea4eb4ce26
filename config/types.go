// Package config loads cronlock configuration files into a validated
// Config. Formats: YAML, TOML and JSON, chosen by file extension. Loading
// runs in five phases, each in the file named for it: read (read.go),
// expand (expand.go), decode (decode.go, decode_jobs.go), default
// (defaults.go), validate (validate.go, validate_jobs.go); Parse in
// load.go runs them.
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/cronlock/cronlock/schedule"
)

// Config is a loaded, expanded and validated configuration. After Load
// returns without error every field holds its effective value: defaults are
// applied, `defaults:` is merged into every job, and derived values
// (Job.Location, Job.Sched, Job.LockTTL, Lock.Backend, Node.ID) are filled.
type Config struct {
	Node     Node      `mapstructure:"node"`
	Lock     Lock      `mapstructure:"lock"`
	Ledger   Ledger    `mapstructure:"ledger"`
	Redis    Redis     `mapstructure:"redis"`
	Log      Log       `mapstructure:"log"`
	HTTP     HTTP      `mapstructure:"http"`
	Output   Output    `mapstructure:"output"`
	Defaults JobFields `mapstructure:"defaults"`
	Jobs     []Job     `mapstructure:"jobs"`
	// Notify holds the webhooks that receive every job's alerts
	// (docs/alerts.md); a job's own notify.webhooks add to them.
	Notify Notify `mapstructure:"notify"`

	// Path is the file the config was read from.
	Path string `mapstructure:"-"`
	// SecretEnv names the environment variables that `${…}` in a secret
	// (redis.password) referenced: they hold the secret, so jobs and hooks
	// never see them (actors.JobEnviron).
	SecretEnv []string `mapstructure:"-"`
	// Warnings are problems that do not stop the daemon (e.g. `${VAR}` with
	// VAR unset, `user` set while not root at -validate).
	Warnings []Problem `mapstructure:"-"`
}

// Node holds per-node settings.
type Node struct {
	// ID is unique per node and goes into lease values; default
	// "<hostname>-<8 hex>", the same across restarts (IDSource says how it
	// was found; see resolveNodeID).
	ID string `mapstructure:"id"`
	// GracePeriod is waited after a run before the lease is released
	// (default 0s: slot claims, not a grace period, keep two nodes from
	// running one slot; the original cronlock's example used 5s).
	GracePeriod time.Duration `mapstructure:"grace_period"`
	// Timezone is the default IANA zone of schedules; "" = host local zone.
	Timezone string `mapstructure:"timezone"`
	// ShutdownTimeout bounds how long SIGTERM waits for running jobs (30s).
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// MaxClockSkew: |local clock − Redis TIME| above it is warned about (2s).
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`
	// HeartbeatInterval is how often the node rewrites its heartbeat record
	// in Redis (package cluster; default 5s, 100ms..1m). The record counts
	// as live for 3 intervals (its TTL).
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// StateDir holds what the node keeps across its restarts (package
	// statedir). After Load it is never empty: the configured absolute
	// path, else $STATE_DIRECTORY (systemd StateDirectory=), else
	// /var/lib/cronlock.
	StateDir string `mapstructure:"state_dir"`
	// Tags describe this node for job targeting (a job's `nodes:`), e.g.
	// {role: db}; keys are lower case. They go into the node's heartbeat
	// record, where other nodes read them (package cluster).
	Tags map[string]string `mapstructure:"tags"`
	// MaxParallel caps the runs in progress on this node (0 = unlimited):
	// a node at its limit does not claim (skip reason node_busy when no
	// node claims the slot; package cluster).
	MaxParallel int `mapstructure:"max_parallel"`

	// IDSource is where ID came from: IDConfigured, IDMachine,
	// IDStateDir or IDNew.
	IDSource string `mapstructure:"-"`
	// IDSetBy, for IDConfigured, is what set node.id: "" for the config
	// file, the environment variable's name (CRONLOCK_NODE_ID), or
	// "flag".
	IDSetBy string `mapstructure:"-"`

	// Location is Timezone resolved; when empty, the host zone under its
	// IANA name if it can be found (TZ, /etc/localtime), else time.Local.
	Location *time.Location `mapstructure:"-"`
}

// Lock selects the coordination backend.
type Lock struct {
	// Backend is "redis" or "memory". After Load it is never empty: redis
	// when a Redis address is configured anywhere, else memory.
	Backend string `mapstructure:"backend"`
}

// Ledger bounds each job's occurrence ledger (docs/protocol.md, R9): at
// most MaxOccurrences records, none older than Retention, whichever keeps
// fewer.
type Ledger struct {
	Retention      time.Duration `mapstructure:"retention"`
	MaxOccurrences int           `mapstructure:"max_occurrences"`
}

// TLS configures TLS to Redis.
type TLS struct {
	Enabled            bool   `mapstructure:"enabled"`
	CAFile             string `mapstructure:"ca_file"`
	CertFile           string `mapstructure:"cert_file"`
	KeyFile            string `mapstructure:"key_file"`
	ServerName         string `mapstructure:"server_name"`
	InsecureSkipVerify bool   `mapstructure:"insecure_skip_verify"`
}

// Redis configures the Redis connection: one address; Sentinel (addresses
// and sentinel_master); or Cluster (several addresses, or mode: cluster).
type Redis struct {
	Address        string        `mapstructure:"address"`
	Addresses      []string      `mapstructure:"addresses"`
	Username       string        `mapstructure:"username"`
	Password       string        `mapstructure:"password"`
	DB             int           `mapstructure:"db"`
	KeyPrefix      string        `mapstructure:"key_prefix"`
	SentinelMaster string        `mapstructure:"sentinel_master"`
	TLS            TLS           `mapstructure:"tls"`
	DialTimeout    time.Duration `mapstructure:"dial_timeout"`
	// AllowEviction lets the node claim although Redis may evict keys (a
	// maxmemory limit with a policy other than noeviction, or a policy that
	// cannot be read): the Redis policy guard then warns instead of
	// refusing (docs/protocol.md, "Redis policy guard"). Default false.
	AllowEviction bool `mapstructure:"allow_eviction"`
	// Mode is the topology: "standalone", "sentinel" or "cluster"; ""
	// infers it (EffectiveMode). The daemon confirms it against the server
	// at connect.
	Mode string `mapstructure:"mode"`
	// MinReplicasAcked > 0: after a winning claim the node waits until that
	// many replicas acknowledged it (WAIT N ReplicaAckTimeout) and skips the
	// slot (not_replicated) when fewer did. 0 (default): no WAIT.
	MinReplicasAcked int `mapstructure:"min_replicas_acked"`
	// ReplicaAckTimeout bounds that WAIT (default 500ms; at least 1ms).
	ReplicaAckTimeout time.Duration `mapstructure:"replica_ack_timeout"`

	// AddressDefaulted is true when Address is DefaultRedisAddress because
	// lock.backend is redis and no address was configured (Where says so).
	AddressDefaulted bool `mapstructure:"-"`
}

// Where names the Redis the configuration reads and writes, for output
// headers and errors: its addresses (never credentials), topology, db and
// key prefix, e.g. `redis 10.0.0.5:6379, db 0, key prefix "cronlock:"`.
// The built-in default address is marked as such.
func (r Redis) Where() string {
	addrs := r.Address
	if len(r.Addresses) > 0 {
		addrs = strings.Join(r.Addresses, ", ")
	}
	if r.AddressDefaulted {
		addrs += " (the default address: lock.backend is redis and no redis.address is set)"
	}
	var s string
	switch r.EffectiveMode() {
	case "sentinel":
		s = fmt.Sprintf("redis sentinel master %q via %s, db %d", r.SentinelMaster, addrs, r.DB)
	case "cluster":
		s = "redis cluster " + addrs // a Redis Cluster has db 0 only
	default:
		s = fmt.Sprintf("redis %s, db %d", addrs, r.DB)
	}
	s += fmt.Sprintf(", key prefix %q", r.KeyPrefix)
	if r.TLS.Enabled {
		s += ", TLS"
	}
	return s
}

// EffectiveMode is Mode, or when Mode is "" the topology the addresses
// imply: "sentinel" with sentinel_master, "cluster" with several
// addresses, else "standalone".
func (r Redis) EffectiveMode() string {
	switch {
	case r.Mode != "":
		return r.Mode
	case r.SentinelMaster != "":
		return "sentinel"
	case len(r.Addresses) > 1:
		return "cluster"
	}
	return "standalone"
}

// Log configures the daemon's zap logger.
type Log struct {
	Level  string `mapstructure:"level"`  // debug|info|warn|error
	Format string `mapstructure:"format"` // json|console; "" = console on a terminal, json otherwise
}

// HTTP configures the metrics and health endpoints and the HTTP API
// (package api).
type HTTP struct {
	Listen string `mapstructure:"listen"` // e.g. 127.0.0.1:9464; "" = off
	// TokenFile holds the API's bearer token (surrounding whitespace
	// trimmed); "" = no token: the mutating endpoints answer 403.
	TokenFile string `mapstructure:"token_file"`
	// Auth is which API requests need the token: "writes" (default: the
	// mutating ones) or "all".
	Auth string `mapstructure:"auth"`
}

// Values of HTTP.Auth.
const (
	AuthWrites = "writes"
	AuthAll    = "all"
)

// JobFields are the fields a job may set and `defaults:` may give for all
// jobs. Pointers distinguish "not set" from a zero value so that defaults
// merge correctly; Job carries the effective values.
type JobFields struct {
	Timezone      *string           `mapstructure:"timezone"`
	Command       *string           `mapstructure:"command"`
	Shell         *string           `mapstructure:"shell"`
	Timeout       *time.Duration    `mapstructure:"timeout"`
	KillGrace     *time.Duration    `mapstructure:"kill_grace"`
	LockTTL       *time.Duration    `mapstructure:"lock_ttl"`
	WorkDir       *string           `mapstructure:"work_dir"`
	Env           map[string]string `mapstructure:"env"`
	User          *string           `mapstructure:"user"`
	Enabled       *bool             `mapstructure:"enabled"`
	Overlap       *string           `mapstructure:"overlap"`
	OnLockLost    *string           `mapstructure:"on_lock_lost"`
	CatchupWindow *time.Duration    `mapstructure:"catchup_window"`
	Jitter        *time.Duration    `mapstructure:"jitter"`
	Retries       *int              `mapstructure:"retries"`
	RetryBackoff  *time.Duration    `mapstructure:"retry_backoff"`
	OnSuccess     *string           `mapstructure:"on_success"`
	OnFailure     *string           `mapstructure:"on_failure"`
	HookTimeout   *time.Duration    `mapstructure:"hook_timeout"`
	InheritEnv    *bool             `mapstructure:"inherit_env"`
	ActiveFrom    *string           `mapstructure:"active_from"`
	ActiveUntil   *string           `mapstructure:"active_until"`
	Nodes         *[]string         `mapstructure:"nodes"`
	MaxRuns       *int              `mapstructure:"max_runs"`
	// WarnAfter > 0: a run still going after it sends a running_long
	// alert (docs/alerts.md).
	WarnAfter *time.Duration `mapstructure:"warn_after"`
	// Notify is the job's own webhooks, added to the top-level ones; not
	// allowed under `defaults:` (the top-level notify is for every job).
	Notify *Notify `mapstructure:"notify"`
}

// Overlap policies: when a job's previous run still holds its lease at the
// next slot, skip that slot, allow the runs side by side, queue the slot
// (at most one pending, run when the lease is released), or replace the
// running run (terminate it, then run the slot).
const (
	OverlapSkip    = "skip"
	OverlapAllow   = "allow"
	OverlapQueue   = "queue"
	OverlapReplace = "replace"
)

// Lock-lost policies: when a run's lease is lost, kill the run, or let it
// continue.
const (
	LockLostKill     = "kill"
	LockLostContinue = "continue"
)

// Job is one job with every field at its effective value.
type Job struct {
	Name          string
	Schedule      string // as written (after ${} expansion)
	Timezone      string // effective zone name ("" = node zone)
	Command       string
	Shell         string        // default /bin/sh
	Timeout       time.Duration // 0 = none
	KillGrace     time.Duration // default 10s
	LockTTL       time.Duration // default timeout+1m, or 5m without timeout
	WorkDir       string
	Env           map[string]string
	User          string
	Enabled       bool          // default true
	Overlap       string        // skip | allow | queue | replace
	OnLockLost    string        // kill | continue
	CatchupWindow time.Duration // 0 = off
	Jitter        time.Duration
	Retries       int
	RetryBackoff  time.Duration // default 10s; doubles, capped at 10m
	OnSuccess     string
	OnFailure     string
	HookTimeout   time.Duration // default 1m; 0 = no limit, as for Timeout
	// InheritEnv (default true) starts a run's environment from the
	// daemon's (less its systemd and CRONLOCK_* variables); false starts
	// from cron's minimal environment. The job's env is added either way.
	InheritEnv bool
	// ActiveFrom and ActiveUntil bound the job's active window
	// [active_from, active_until) as written (RFC 3339; "" = open): outside
	// it the job does not fire. Sched carries the parsed window
	// (schedule.Schedule.Window).
	ActiveFrom  string
	ActiveUntil string
	// Nodes are the node tags a node needs to claim the job, each
	// "key=value" (all must match node.tags); empty = any node.
	Nodes []string
	// MaxRuns (0 = unlimited) stops the job after this many successful runs
	// in the cluster, counted in Redis (state.runs): later slots are
	// skipped max_runs.
	MaxRuns int
	// WarnAfter (0 = off) is how long a run may go before a running_long
	// alert is sent, once per run.
	WarnAfter time.Duration
	// Notify is the job's own webhooks (Config.WebhooksFor adds the
	// top-level ones).
	Notify Notify

	// Location is the schedule's zone: CRON_TZ=/TZ= prefix > timezone >
	// node.timezone > host local.
	Location *time.Location
	// Sched is the parsed schedule. It is safe for concurrent callers.
	Sched *schedule.Schedule
}
