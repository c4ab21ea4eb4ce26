package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Phase 5, validate, for the settings outside `jobs` and `defaults`
// (validate_jobs.go: the jobs): every problem with its path and a hint.

// checkTop validates the keys outside `jobs` and `defaults` and fills
// Node.Location and the default Node.ID (resolveNodeID).
// src names the source of keys set by environment or flag (see
// loadScalars).
func checkTop(cfg *Config, p *problems, opts Options, z zones, src map[string]string) {
	path := func(k string) string { return k + src[k] }
	host := HostZone(opts.Environ)
	cfg.Node.Location = z.load(p, path("node.timezone"), cfg.Node.Timezone, host)
	if cfg.Node.Location == nil {
		cfg.Node.Location = host // keep checking jobs; the problem is reported
	}
	cfg.Node.StateDir = stateDirOf(cfg.Node.StateDir, opts.Environ)
	if !filepath.IsAbs(cfg.Node.StateDir) {
		p.err(path("node.state_dir"), "%q is not an absolute path; e.g. /var/lib/cronlock", cfg.Node.StateDir)
	}
	resolveNodeID(&cfg.Node, p, opts, path)
	if cfg.Ledger.MaxOccurrences < 1 {
		p.err(path("ledger.max_occurrences"), "%d: want at least 1 (the records kept per job; default 100)", cfg.Ledger.MaxOccurrences)
	}
	if cfg.Ledger.Retention < time.Minute {
		p.err(path("ledger.retention"), "%s: want at least 1m (how long records are kept; default 168h, 7 days)", cfg.Ledger.Retention)
	}
	if cfg.Node.IDSource == IDConfigured {
		// src is " (from CRONLOCK_NODE_ID)" or " (from flag)"; "" for the file.
		cfg.Node.IDSetBy = strings.TrimSuffix(strings.TrimPrefix(src["node.id"], " (from "), ")")
	}
	if cfg.Node.MaxParallel < 0 {
		p.err(path("node.max_parallel"), "%d is negative; use 0 for no limit, or the most runs this node may have in progress at once", cfg.Node.MaxParallel)
	}
	checkHeartbeat(cfg.Node.HeartbeatInterval, p, path("node.heartbeat_interval"))
	oneOf(p, path("lock.backend"), cfg.Lock.Backend, "redis", "memory")
	oneOf(p, path("log.level"), cfg.Log.Level, "debug", "info", "warn", "error")
	if cfg.Log.Format != "" {
		oneOf(p, path("log.format"), cfg.Log.Format, "json", "console")
	}
	checkRedis(&cfg.Redis, p, path)
	checkTLSFiles(cfg.Lock.Backend, cfg.Redis.TLS, p, opts.Purpose, path)
	checkListen(cfg.HTTP.Listen, p, path("http.listen"))
	checkAPIAuth(cfg.HTTP, p, opts.Purpose, path)
	checkOutput(&cfg.Output, p, path)
}

// checkListen checks http.listen as net.Listen("tcp", l) will read it at
// start (engine/http.go): host:port, the port a number 0..65535 or a
// service name this host knows (/etc/services). Port 0 or none is legal
// but picks a new random port at every start, so it is a warning.
func checkListen(l string, p *problems, path string) {
	if l == "" {
		return
	}
	_, port, err := net.SplitHostPort(l)
	if err != nil {
		p.err(path, "%q is not host:port; e.g. 127.0.0.1:9464", l)
		return
	}
	n, err := net.LookupPort("tcp", port)
	switch {
	case err != nil:
		p.err(path, "%q: port %q is neither a number 0..65535 nor a service name known to this host (/etc/services); e.g. 127.0.0.1:9464", l, port)
	case n == 0:
		p.warn(path, fmt.Sprintf("%q listens on a random free port, a new one at every start; give a fixed port, e.g. 127.0.0.1:9464", l))
	}
}

// HostZone is the host's local zone under its IANA name when it can be
// found — TZ from environ (":Zone" or "Zone"), else the target of the
// /etc/localtime link — so that `next -json` and status show "Europe/Berlin",
// not "Local". The rules are the same as time.Local's; time.Local is the
// fallback.
func HostZone(environ []string) *time.Location {
	name := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "TZ="); ok {
			name = strings.TrimPrefix(v, ":")
		}
	}
	if name == "" {
		if target, err := os.Readlink("/etc/localtime"); err == nil {
			if i := strings.Index(target, "zoneinfo/"); i >= 0 {
				name = target[i+len("zoneinfo/"):]
			}
		}
	}
	if name == "" || strings.HasPrefix(name, "/") {
		return time.Local
	}
	if loc, err := time.LoadLocation(name); err == nil {
		return loc
	}
	return time.Local
}

// checkRedis validates the redis section.
func checkRedis(r *Redis, p *problems, path func(string) string) {
	if r.DB < 0 || r.DB > 15 {
		p.err(path("redis.db"), "%d is out of range; Redis databases are 0..15", r.DB)
	}
	if len(r.Addresses) > 0 && r.Address != "" {
		p.err("redis.addresses", "set either redis.address or redis.addresses, not both")
	}
	if r.Mode != "" {
		oneOf(p, path("redis.mode"), r.Mode, "standalone", "sentinel", "cluster")
	}
	checkRedisMode(r, p, path)
	if r.MinReplicasAcked < 0 {
		p.err(path("redis.min_replicas_acked"), "%d is negative; use 0 to run a claim without waiting for replicas", r.MinReplicasAcked)
	}
	if r.ReplicaAckTimeout < time.Millisecond {
		p.err(path("redis.replica_ack_timeout"), "%v is below 1ms; WAIT's timeout is whole milliseconds (and 0 would wait forever); e.g. 500ms", r.ReplicaAckTimeout)
	}
	if (r.TLS.CertFile == "") != (r.TLS.KeyFile == "") {
		p.err("redis.tls", "cert_file and key_file must be given together")
	}
}

// checkRedisMode checks that the addresses, sentinel_master and db fit
// the topology (given or inferred), and warns about a Cluster key prefix
// with a hash tag.
func checkRedisMode(r *Redis, p *problems, path func(string) string) {
	switch r.EffectiveMode() {
	case "sentinel":
		if r.SentinelMaster == "" {
			p.err(path("redis.sentinel_master"), "redis.mode is sentinel but sentinel_master is empty; give the master set's name (SENTINEL MASTERS), e.g. mymaster")
		}
		if len(r.Addresses) == 0 && r.Address == "" {
			p.err("redis.addresses", "sentinel_master is set but no sentinel addresses are given")
		}
	case "cluster":
		if r.SentinelMaster != "" {
			p.err(path("redis.sentinel_master"), "is set, but redis.mode is cluster; remove sentinel_master, or set redis.mode: sentinel")
		}
		if r.DB != 0 {
			p.err(path("redis.db"), "%d: Redis Cluster has only database 0; remove redis.db", r.DB)
		}
		if hasHashTag(r.KeyPrefix) {
			p.warn(path("redis.key_prefix"), fmt.Sprintf("%q holds a hash tag, so in Redis Cluster every key of every job is in one "+
				"hash slot, on one shard: adding masters adds nothing. Without a tag (e.g. \"cronlock:\") each job's keys "+
				"carry the job name as tag and the jobs spread over the shards; changing it starts the jobs' state afresh "+
				"(docs/protocol.md, \"Redis keys\")", r.KeyPrefix))
		}
	case "standalone":
		if r.SentinelMaster != "" {
			p.err(path("redis.sentinel_master"), "is set, but redis.mode is standalone; remove sentinel_master, or set redis.mode: sentinel")
		}
		if len(r.Addresses) > 1 {
			p.err(path("redis.addresses"), "%d addresses, but redis.mode is standalone, which uses one server; give one address, or set redis.mode: cluster or sentinel", len(r.Addresses))
		}
	}
}

// hasHashTag reports whether s holds a Redis Cluster hash tag by Redis's
// rule (redislock.HasHashTag, which this mirrors: config cannot import
// redislock): the first "{", then the first "}" after it, with at least
// one byte between them.
func hasHashTag(s string) bool {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	return strings.IndexByte(s[open+1:], '}') > 0
}

// checkRetention: the ledger must keep a job's records while its slots
// can still be claimed (docs/protocol.md, R9): longer than its answer
// window (node.max_clock_skew and its jitter) with the audit's grace, and
// than its catch-up window. Otherwise a slot's record could be trimmed
// while a claim of it could still come, and the claim would find none.
func checkRetention(cfg *Config, p *problems, src map[string]string) {
	for i, j := range cfg.Jobs {
		need := max(cfg.Node.MaxClockSkew+j.Jitter+time.Minute, j.CatchupWindow)
		if cfg.Ledger.Retention < need {
			p.err("ledger.retention"+src["ledger.retention"], "%s is shorter than job %q can still claim a slot "+
				"(jobs[%d]: catchup_window %s, jitter %s, node.max_clock_skew %s); set it to at least %s",
				cfg.Ledger.Retention, j.Name, i, j.CatchupWindow, j.Jitter, cfg.Node.MaxClockSkew, need)
			return
		}
	}
}
