package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/schedule"
)

// Phase 5, validate, for `defaults:` and the jobs (validate.go: the other
// settings): what a merged job must satisfy, and its derived fields
// (Location, Sched, LockTTL).

// validName reports whether name follows the job name rule: 1-128 of A-Z
// a-z 0-9 . _ - (names go into Redis keys and metric labels).
func validName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// jobPath renders a job's path prefix: `jobs[2] "backup"` or `jobs[2]`
// (the name quoted as %q quotes it).
func jobPath(i int, name string) string {
	p := "jobs[" + strconv.Itoa(i) + "]"
	if name == "" {
		return p
	}
	return p + " " + strconv.Quote(name)
}

// zones resolves IANA zone names once per load.
type zones map[string]*time.Location

// lookup returns the zone named name (fallback for ""), and false when the
// name is unknown. It reports nothing.
func (z zones) lookup(name string, fallback *time.Location) (*time.Location, bool) {
	if name == "" {
		return fallback, true
	}
	loc, ok := z[name]
	if !ok {
		var err error
		if loc, err = time.LoadLocation(name); err != nil || name == "Local" {
			loc = nil
		}
		z[name] = loc
	}
	return loc, loc != nil
}

// load returns the zone named name, or nil after reporting a problem at
// path. The empty name gives fallback.
func (z zones) load(p *problems, path, name string, fallback *time.Location) *time.Location {
	loc, ok := z.lookup(name, fallback)
	if !ok {
		p.err(path, "unknown time zone %q; use an IANA name such as Europe/Berlin or UTC", name)
	}
	return loc
}

// maxRetries caps `retries`: more attempts than this within one lease is a
// typo, not a policy.
const maxRetries = 100

// checker validates `defaults:` and the jobs of one load.
type checker struct {
	cfg    *Config
	p      *problems
	opts   Options
	z      zones
	scheds schedCache
	host   *hostChecks
	// argSpace is exec's argument space on this host (argSpace()).
	argSpace int
	// inherited caches inheritedEnv; -1 until computed.
	inherited int
}

// hostProblem reports msg (from hostChecks) as a warning at -validate and
// as an error at start: the daemon must not start and then fail every run.
func (c *checker) hostProblem(path, msg string) {
	hostProblem(c.p, c.opts.Purpose, path, msg)
}

// fields checks the values set in f, a job's own fields or `defaults:`;
// prefix+key is each problem's path. Values not set are not checked.
func (c *checker) fields(prefix string, f JobFields) {
	p := c.p
	if f.Timezone != nil {
		c.z.load(p, prefix+"timezone", *f.Timezone, nil)
	}
	if f.Shell != nil && *f.Shell == "" {
		p.err(prefix+"shell", "must not be empty; omit it for /bin/sh")
	} else if f.Shell != nil {
		c.hostProblem(prefix+"shell", c.host.shell(*f.Shell))
	}
	if f.Timeout != nil {
		minDuration(p, prefix+"timeout", *f.Timeout, minTimeout, "300ms")
	}
	if f.LockTTL != nil {
		minOneSecond(p, prefix+"lock_ttl", *f.LockTTL)
	}
	argStrings(p, prefix, f)
	if f.WorkDir != nil && *f.WorkDir != "" {
		c.hostProblem(prefix+"work_dir", c.host.workDir(*f.WorkDir))
	}
	if f.User != nil && *f.User != "" {
		c.user(prefix+"user", *f.User)
	}
	if f.Overlap != nil {
		oneOf(p, prefix+"overlap", *f.Overlap, OverlapSkip, OverlapAllow, OverlapQueue, OverlapReplace)
	}
	if f.OnLockLost != nil {
		oneOf(p, prefix+"on_lock_lost", *f.OnLockLost, LockLostKill, LockLostContinue)
	}
	if f.Nodes != nil {
		checkSelectors(p, prefix+"nodes", *f.Nodes)
	}
	if f.ActiveFrom != nil {
		activeBound(p, prefix+"active_from", *f.ActiveFrom)
	}
	if f.ActiveUntil != nil {
		activeBound(p, prefix+"active_until", *f.ActiveUntil)
	}
	if f.Notify != nil && prefix == "defaults." {
		p.err(prefix+"notify", "not allowed under defaults; put the webhooks of every job under the top-level notify.webhooks")
	}
	if f.WarnAfter != nil {
		minOneSecond(p, prefix+"warn_after", *f.WarnAfter)
	}
	if f.MaxRuns != nil && *f.MaxRuns < 0 {
		p.err(prefix+"max_runs", "%d is negative; use 0 for no limit, or the number of successful runs after which the job stops", *f.MaxRuns)
	}
	switch {
	case f.Retries == nil:
	case *f.Retries < 0:
		p.err(prefix+"retries", "%d is negative; use 0 for no retries", *f.Retries)
	case *f.Retries > maxRetries:
		p.err(prefix+"retries", "%d is too many; use at most %d (each retry waits retry_backoff, doubling up to 10m)", *f.Retries, maxRetries)
	}
}

// user checks `user`: it needs root (an error at start, a warning at
// -validate) and must exist on this host.
func (c *checker) user(path, name string) {
	if c.opts.Euid != 0 {
		msg := fmt.Sprintf("user %q needs root, but cronlock runs as uid %d", name, c.opts.Euid)
		if c.opts.Purpose == ForStart {
			c.p.err(path, "%s", msg)
		} else {
			c.p.warn(path, msg+"; the daemon will refuse to start")
		}
	}
	c.hostProblem(path, c.host.user(name))
}

// checkJob validates what only the merged job shows (command, schedule,
// jitter against the schedule) and fills its derived fields (Location,
// Sched, LockTTL). base is the job's path; bad holds the keys whose value
// had the wrong type (already reported, so not "missing" as well).
func (c *checker) checkJob(job *Job, base string, own JobFields, bad map[string]bool) {
	prefix := base + ": "
	if !bad["command"] && strings.TrimSpace(job.Command) == "" {
		c.p.err(prefix+"command", "missing command; give the shell command to run")
	}
	c.argLimits(prefix, job)
	defaultLockTTL(job)
	loc, zoneOK := c.z.lookup(job.Timezone, c.cfg.Node.Location)
	if job.Schedule == "" {
		if !bad["schedule"] {
			c.p.err(prefix+"schedule", "missing schedule; e.g. \"0 2 * * *\" or \"@every 1h\"")
		}
		return
	}
	if !zoneOK {
		return // unknown zone already reported where it was set
	}
	s, err := c.scheds.parse(job.Schedule, loc)
	if err != nil {
		c.p.err(base, "%v", err) // the error reads `schedule "EXPR" …`
		return
	}
	job.Sched, job.Location = s, s.Location()
	c.jitter(prefix, job, own)
	c.window(prefix, job)
}

// activeBound reports an active_from/active_until that is set but not an
// RFC 3339 time.
func activeBound(p *problems, path, v string) {
	if _, err := parseActiveBound(v); err != nil {
		p.err(path, "%q is not an RFC 3339 time; write e.g. 2027-01-01T00:00:00Z or 2027-01-01T09:00:00+01:00 "+
			"(date, time and zone offset), or remove it for no bound", v)
	}
}

// parseActiveBound parses an active window bound: RFC 3339, "" = open
// (the zero time).
func parseActiveBound(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, v)
}

// window applies the job's active window [active_from, active_until) to
// its schedule (schedule.Schedule.InWindow): an error when it is empty, a
// warning when the schedule has no fire time inside it. Bounds that do not
// parse were reported by fields.
func (c *checker) window(prefix string, job *Job) {
	from, errF := parseActiveBound(job.ActiveFrom)
	until, errU := parseActiveBound(job.ActiveUntil)
	if errF != nil || errU != nil || (from.IsZero() && until.IsZero()) {
		return
	}
	if !from.IsZero() && !until.IsZero() && !until.After(from) {
		c.p.err(prefix+"active_until", "%s is not after active_from %s; the window [active_from, active_until) "+
			"would be empty: move active_until later", job.ActiveUntil, job.ActiveFrom)
		return
	}
	job.Sched = job.Sched.InWindow(from, until)
	// An open start is searched from the Unix epoch: a recurring schedule
	// has fire times there, an @at after active_until none.
	start := from
	if start.IsZero() {
		start = time.Unix(0, 0)
	}
	if job.Sched.Next(start.Add(-time.Nanosecond)).IsZero() {
		c.p.warn(prefix+"active_until", fmt.Sprintf("schedule %q has no fire time in the active window [%s, %s); "+
			"the job never fires: widen the window or change the schedule", job.Schedule, job.ActiveFrom, job.ActiveUntil))
	}
}

// jitter warns when jitter exceeds the schedule's interval (measured
// between two consecutive fire times): slots would pile up or reorder.
func (c *checker) jitter(prefix string, job *Job, own JobFields) {
	if job.Jitter <= 0 {
		return
	}
	n1 := job.Sched.Next(time.Now())
	n2 := job.Sched.Next(n1)
	if n1.IsZero() || n2.IsZero() || job.Jitter <= n2.Sub(n1) {
		return
	}
	from := ""
	if own.Jitter == nil {
		from = " (inherited from defaults.jitter)"
	}
	c.p.warn(prefix+"jitter", fmt.Sprintf("%s%s is longer than the %s between runs of schedule %q; "+
		"runs would pile up or change order; use at most %s", job.Jitter, from, n2.Sub(n1), job.Schedule, n2.Sub(n1)))
}

// schedCache shares one parsed Schedule between jobs with the same
// expression and zone (a Schedule is safe for concurrent callers), so a
// config with thousands of similar jobs parses each expression once.
type schedCache map[schedKey]schedResult

type schedKey struct {
	expr string
	loc  *time.Location
}

type schedResult struct {
	s   *schedule.Schedule
	err error
}

// parse returns schedule.Parse(expr, loc), cached.
func (c schedCache) parse(expr string, loc *time.Location) (*schedule.Schedule, error) {
	k := schedKey{expr, loc}
	r, ok := c[k]
	if !ok {
		r.s, r.err = schedule.Parse(expr, loc)
		c[k] = r
	}
	return r.s, r.err
}

// minOneSecond reports a duration that is set (non-zero) but under 1s.
func minOneSecond(p *problems, path string, d time.Duration) {
	minDuration(p, path, d, time.Second, "30s")
}

// minTimeout is the shortest timeout: a run's process is started, timed
// and killed on the daemon's own timers, which keep to a few
// milliseconds; below this a unit was probably forgotten (100 for 100s).
const minTimeout = 100 * time.Millisecond

// minDuration reports a duration that is set (non-zero) but under least.
func minDuration(p *problems, path string, d, least time.Duration, example string) {
	if d > 0 && d < least {
		p.err(path, "%s is under %s; write e.g. %s", d, least, example)
	}
}

// oneOf reports val unless it is one of allowed.
func oneOf(p *problems, path, val string, allowed ...string) {
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	p.err(path, "unknown value %q; want one of %s", val, strings.Join(allowed, ", "))
}

// Bounds of node.heartbeat_interval: below 100ms the beats load Redis for
// nothing; above 1m a dead node stays listed as live for minutes.
const (
	minHeartbeat = 100 * time.Millisecond
	maxHeartbeat = time.Minute
)

// checkHeartbeat checks node.heartbeat_interval.
func checkHeartbeat(d time.Duration, p *problems, path string) {
	if d < minHeartbeat || d > maxHeartbeat {
		p.err(path, "%v is outside %v..%v; e.g. 5s (the default)", d, minHeartbeat, maxHeartbeat)
	}
}

// checkAPIAuth checks http.auth and http.token_file as the daemon reads
// them at start (ReadToken).
func checkAPIAuth(h HTTP, p *problems, purpose Purpose, path func(string) string) {
	oneOf(p, path("http.auth"), h.Auth, AuthWrites, AuthAll)
	if h.Auth == AuthAll && h.TokenFile == "" {
		p.err(path("http.auth"), "%q needs a token: set http.token_file, or use %q", AuthAll, AuthWrites)
	}
	if h.TokenFile != "" {
		_, err := ReadToken(h.TokenFile)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		hostProblem(p, purpose, path("http.token_file"), msg)
	}
}

// ReadToken returns the API token in file, surrounding whitespace
// trimmed. A file that cannot be read or holds no token is an error.
func ReadToken(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, errors.New(fileError(file, err))
	}
	tok := bytes.TrimSpace(data)
	if len(tok) == 0 {
		return nil, fmt.Errorf("file %q holds no token; write one (e.g. head -c 32 /dev/urandom | base64 > %s)", file, file)
	}
	return tok, nil
}
