package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// hashedJob is the canonical form of a job that JobHash digests: every
// effective field that changes what, when, where or how the job runs and
// whom its alerts reach, durations in nanoseconds, the zone by its name.
// Env values are left out (secrets are usually passed there); the
// variable names are in. Webhooks are in without their credentials
// (hashedWebhook).
type hashedJob struct {
	Name, Schedule, Timezone, Zone, Command, Shell, WorkDir, User string
	Overlap, OnLockLost, OnSuccess, OnFailure                     string
	ActiveFrom, ActiveUntil                                       string
	Timeout, KillGrace, LockTTL, CatchupWindow, Jitter            int64
	RetryBackoff, HookTimeout, WarnAfter                          int64
	Retries, MaxRuns                                              int
	Enabled, InheritEnv                                           bool
	EnvNames, Nodes                                               []string
	Webhooks                                                      []hashedWebhook
}

// hashedWebhook is a job's own webhook as JobHash digests it: where it
// goes (scheme, host and path: a token in the path is long and random,
// so its digest gives nothing away), what it is sent and how; the URL's
// user:password@ and query (where short secrets go) and the secret file's
// contents are left out.
type hashedWebhook struct {
	Target, Format string
	Events         []string
	Signed         bool
}

// JobHash returns the digest of j's effective configuration: 16 hex digits
// (the first 64 bits of SHA-256 over a canonical JSON form). Two nodes with
// the same hash run the job the same way; the values of j.Env are not part
// of it (a change of an env value alone is not seen), so that the hash,
// which other nodes and operators read in Redis, never depends on a secret.
// The top-level notify: (every job's webhooks) is a node setting and not
// part of it.
func JobHash(j Job) string {
	h := hashedJob{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Command: j.Command, Shell: j.Shell,
		WorkDir: j.WorkDir, User: j.User, Overlap: j.Overlap, OnLockLost: j.OnLockLost, OnSuccess: j.OnSuccess,
		OnFailure: j.OnFailure, ActiveFrom: j.ActiveFrom, ActiveUntil: j.ActiveUntil, Timeout: int64(j.Timeout),
		KillGrace: int64(j.KillGrace), LockTTL: int64(j.LockTTL), CatchupWindow: int64(j.CatchupWindow),
		Jitter: int64(j.Jitter), RetryBackoff: int64(j.RetryBackoff), HookTimeout: int64(j.HookTimeout),
		WarnAfter: int64(j.WarnAfter), Retries: j.Retries, MaxRuns: j.MaxRuns, Enabled: j.Enabled,
		InheritEnv: j.InheritEnv, Nodes: slices.Sorted(slices.Values(j.Nodes))}
	if j.Location != nil {
		h.Zone = j.Location.String()
	}
	for k := range j.Env {
		h.EnvNames = append(h.EnvNames, k)
	}
	slices.Sort(h.EnvNames)
	for _, w := range j.Notify.Webhooks {
		target := ""
		if u, err := url.Parse(w.URL); err == nil {
			target = u.Scheme + "://" + u.Host + u.EscapedPath()
		}
		h.Webhooks = append(h.Webhooks, hashedWebhook{Target: target, Format: w.Format,
			Events: slices.Sorted(slices.Values(w.Events)), Signed: w.SecretFile != ""})
	}
	// The order of webhooks and of their events does not change what is
	// sent where.
	slices.SortFunc(h.Webhooks, func(a, b hashedWebhook) int {
		return strings.Compare(a.Target+"\x00"+a.Format+"\x00"+strings.Join(a.Events, ","),
			b.Target+"\x00"+b.Format+"\x00"+strings.Join(b.Events, ","))
	})
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
