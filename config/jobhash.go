package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// hashedJob is the canonical form of a job that JobHash digests: every
// effective field that changes what, when or how the job runs, durations
// in nanoseconds, the zone by its name. Env values are left out (secrets
// are usually passed there); the variable names are in.
type hashedJob struct {
	Name, Schedule, Timezone, Zone, Command, Shell, WorkDir, User string
	Overlap, OnLockLost, OnSuccess, OnFailure                     string
	Timeout, KillGrace, LockTTL, CatchupWindow, Jitter            int64
	RetryBackoff, HookTimeout                                     int64
	Retries                                                       int
	Enabled, InheritEnv                                           bool
	EnvNames                                                      []string
}

// JobHash returns the digest of j's effective configuration: 16 hex digits
// (the first 64 bits of SHA-256 over a canonical JSON form). Two nodes with
// the same hash run the job the same way; the values of j.Env are not part
// of it (a change of an env value alone is not seen), so that the hash,
// which other nodes and operators read in Redis, never depends on a secret.
func JobHash(j Job) string {
	h := hashedJob{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Command: j.Command, Shell: j.Shell,
		WorkDir: j.WorkDir, User: j.User, Overlap: j.Overlap, OnLockLost: j.OnLockLost, OnSuccess: j.OnSuccess,
		OnFailure: j.OnFailure, Timeout: int64(j.Timeout), KillGrace: int64(j.KillGrace), LockTTL: int64(j.LockTTL),
		CatchupWindow: int64(j.CatchupWindow), Jitter: int64(j.Jitter), RetryBackoff: int64(j.RetryBackoff),
		HookTimeout: int64(j.HookTimeout), Retries: j.Retries, Enabled: j.Enabled, InheritEnv: j.InheritEnv}
	if j.Location != nil {
		h.Zone = j.Location.String()
	}
	for k := range j.Env {
		h.EnvNames = append(h.EnvNames, k)
	}
	slices.Sort(h.EnvNames)
	data, _ := json.Marshal(h) // plain fields: cannot fail
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// JobHashes returns JobHash of every job, by name.
func JobHashes(jobs []Job) map[string]string {
	out := make(map[string]string, len(jobs))
	for _, j := range jobs {
		out[j.Name] = JobHash(j)
	}
	return out
}

// ConfigHash returns the digest of a whole job configuration given as
// JobHashes: 16 hex digits over the sorted "name=hash" lines. Equal job
// sets give equal hashes whatever their order in the file.
func ConfigHash(hashes map[string]string) string {
	lines := make([]string, 0, len(hashes))
	for name, h := range hashes {
		lines = append(lines, name+"="+h)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}
