package config

import (
	"strings"
	"time"
)

// field binds one scalar config key outside `jobs`/`defaults` to the Config
// field that receives it. ptr is *string, *time.Duration, *int, *bool or
// *[]string.
type field struct {
	key string
	ptr any
}

// fields lists every scalar key outside `jobs` and `defaults`: the keys that
// environment variables (CRONLOCK_ + key with "." → "_", upper case) and
// flags may override.
func (c *Config) fields() []field {
	return []field{
		{"node.id", &c.Node.ID},
		{"node.grace_period", &c.Node.GracePeriod},
		{"node.timezone", &c.Node.Timezone},
		{"node.shutdown_timeout", &c.Node.ShutdownTimeout},
		{"node.max_clock_skew", &c.Node.MaxClockSkew},
		{"lock.backend", &c.Lock.Backend},
		{"redis.address", &c.Redis.Address},
		{"redis.addresses", &c.Redis.Addresses},
		{"redis.username", &c.Redis.Username},
		{"redis.password", &c.Redis.Password},
		{"redis.db", &c.Redis.DB},
		{"redis.key_prefix", &c.Redis.KeyPrefix},
		{"redis.sentinel_master", &c.Redis.SentinelMaster},
		{"redis.tls.enabled", &c.Redis.TLS.Enabled},
		{"redis.tls.ca_file", &c.Redis.TLS.CAFile},
		{"redis.tls.cert_file", &c.Redis.TLS.CertFile},
		{"redis.tls.key_file", &c.Redis.TLS.KeyFile},
		{"redis.tls.server_name", &c.Redis.TLS.ServerName},
		{"redis.tls.insecure_skip_verify", &c.Redis.TLS.InsecureSkipVerify},
		{"redis.dial_timeout", &c.Redis.DialTimeout},
		{"log.level", &c.Log.Level},
		{"log.format", &c.Log.Format},
		{"http.listen", &c.HTTP.Listen},
	}
}

// DefaultRedisAddress is used when lock.backend is explicitly "redis" and
// no address is configured.
const DefaultRedisAddress = "localhost:6379"

// builtinDefaults are the defaults of the scalar keys (SPEC.md §2), given to
// viper with SetDefault. redis.address is deliberately absent: its default
// applies only when the backend is explicitly redis (see resolveBackend).
func builtinDefaults() map[string]any {
	return map[string]any{
		"node.grace_period":     time.Duration(0),
		"node.shutdown_timeout": 30 * time.Second,
		"node.max_clock_skew":   2 * time.Second,
		"redis.db":              0,
		"redis.key_prefix":      "cronlock:",
		"redis.dial_timeout":    5 * time.Second,
		"log.level":             "info",
	}
}

// sections are the mapping keys outside `jobs`/`defaults`.
var sections = []string{"node", "lock", "redis", "redis.tls", "log", "http"}

// EnvName returns the environment variable that overrides key, e.g.
// "redis.address" → "CRONLOCK_REDIS_ADDRESS".
func EnvName(key string) string {
	return "CRONLOCK_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Keys returns every scalar key outside `jobs` and `defaults`, in the
// order of the configuration reference.
func Keys() []string {
	var c Config
	fs := c.fields()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.key
	}
	return out
}

// knownChildren returns the key names allowed directly under prefix ("" for
// the top level).
func knownChildren(prefix string) []string {
	var out []string
	add := func(full string) {
		rest, ok := strings.CutPrefix(full, prefix)
		if prefix != "" && !ok {
			return
		}
		name, _, _ := strings.Cut(rest, ".")
		for _, o := range out {
			if o == name {
				return
			}
		}
		out = append(out, name)
	}
	for _, k := range Keys() {
		add(k)
	}
	if prefix == "" {
		out = append(out, "defaults", "jobs")
	}
	return out
}
