package config

import (
	"maps"
	"reflect"
	"strings"
	"time"
)

// Phase 4, default: the built-in values of settings and job fields, and the
// defaults that depend on other values (lock.backend from the addresses,
// node.state_dir from $STATE_DIRECTORY, a job's fields from `defaults:`).
// The state directory itself is package statedir's.

// DefaultStateDir is node.state_dir's default outside systemd.
const DefaultStateDir = "/var/lib/cronlock"

// stateDirOf returns the state directory to use: configured when not empty;
// else the first entry of $STATE_DIRECTORY (set by systemd's
// StateDirectory=, see systemd.exec(5)); else DefaultStateDir.
func stateDirOf(configured string, environ []string) string {
	if configured != "" {
		return configured
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "STATE_DIRECTORY="); ok && v != "" {
			first, _, _ := strings.Cut(v, ":")
			return first
		}
	}
	return DefaultStateDir
}

// DefaultRedisAddress is used when lock.backend is explicitly "redis" and
// no address is configured.
const DefaultRedisAddress = "localhost:6379"

// builtinDefaults are the defaults of the scalar keys, given to viper with
// SetDefault. redis.address is deliberately absent: its default
// applies only when the backend is explicitly redis (see resolveBackend).
func builtinDefaults() map[string]any {
	return map[string]any{
		"node.grace_period":         time.Duration(0),
		"node.shutdown_timeout":     30 * time.Second,
		"node.max_clock_skew":       2 * time.Second,
		"node.heartbeat_interval":   5 * time.Second,
		"ledger.retention":          7 * 24 * time.Hour,
		"ledger.max_occurrences":    100,
		"redis.db":                  0,
		"redis.key_prefix":          "cronlock:",
		"redis.dial_timeout":        5 * time.Second,
		"redis.replica_ack_timeout": 500 * time.Millisecond,
		"log.level":                 "info",
		"http.auth":                 AuthWrites,
		"output.max_bytes":          DefaultOutputMaxBytes,
	}
}

// resolveBackend returns lock.backend, or when unset "redis" if a Redis
// address was configured in the file, environment or flags (the built-in
// default address does not count) and "memory" otherwise.
func resolveBackend(cfg *Config) string {
	addressGiven := cfg.Redis.Address != "" || len(cfg.Redis.Addresses) > 0
	backend := cfg.Lock.Backend
	if backend == "" && addressGiven {
		backend = "redis"
	} else if backend == "" {
		backend = "memory"
	}
	if backend == "redis" && !addressGiven {
		cfg.Redis.Address, cfg.Redis.AddressDefaulted = DefaultRedisAddress, true
	}
	return backend
}

// builtinJobDefaults are the built-in job defaults, under `defaults:` and a
// job's own values.
func builtinJobDefaults() JobFields {
	return JobFields{
		Shell:        ptr("/bin/sh"),
		KillGrace:    ptr(10 * time.Second),
		Enabled:      ptr(true),
		Overlap:      ptr(OverlapSkip),
		OnLockLost:   ptr(LockLostKill),
		RetryBackoff: ptr(10 * time.Second),
		HookTimeout:  ptr(time.Minute),
		InheritEnv:   ptr(true),
	}
}

func ptr[T any](v T) *T { return &v }

// inherited returns the job fields every job inherits: for each field the
// value of `defaults:`, else the built-in default. Env maps are merged
// key-wise (`defaults:` wins).
func (jd *jobDecoder) inherited(defaults, builtin JobFields) *Job {
	job := &Job{}
	dst := reflect.ValueOf(job).Elem()
	for _, f := range jd.table {
		if f.typ.Kind() != reflect.Pointer {
			continue // env, merged below
		}
		for _, layer := range []JobFields{defaults, builtin} { // highest precedence first
			if src := reflect.ValueOf(&layer).Elem().Field(f.index); !src.IsNil() {
				dst.Field(f.jobIx).Set(src.Elem())
				break
			}
		}
	}
	job.Env = map[string]string{}
	maps.Copy(job.Env, builtin.Env)
	maps.Copy(job.Env, defaults.Env)
	return job
}

// merge sets the effective job fields of job (whose Name and Schedule are
// kept): for each field the job's own value, else inherited's. Env maps
// are merged key-wise (the job's value wins); each job gets a map of its
// own.
func (jd *jobDecoder) merge(job *Job, own JobFields, inherited *Job) {
	name, sched := job.Name, job.Schedule
	*job = *inherited
	job.Name, job.Schedule = name, sched
	dst := reflect.ValueOf(job).Elem()
	src := reflect.ValueOf(&own).Elem()
	for _, f := range jd.table {
		if f.typ.Kind() != reflect.Pointer {
			continue // env, merged below
		}
		if v := src.Field(f.index); !v.IsNil() {
			dst.Field(f.jobIx).Set(v.Elem())
		}
	}
	job.Env = make(map[string]string, len(inherited.Env)+len(own.Env))
	maps.Copy(job.Env, inherited.Env)
	maps.Copy(job.Env, own.Env)
}

// defaultLockTTL sets a job's lock_ttl when it is not given: its timeout
// plus a minute, or 5 minutes without a timeout.
func defaultLockTTL(job *Job) {
	if job.LockTTL == 0 {
		job.LockTTL = 5 * time.Minute
		if job.Timeout > 0 {
			job.LockTTL = job.Timeout + time.Minute
		}
	}
}
