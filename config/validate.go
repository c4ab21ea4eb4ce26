package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cronlock/cronlock/engine/schedule"
)

// namePattern is the job name rule of SPEC.md §2 (names go into Redis keys
// and metric labels).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// jobPath renders a job's path prefix: `jobs[2] "backup"` or `jobs[2]`.
func jobPath(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("jobs[%d]", i)
	}
	return fmt.Sprintf("jobs[%d] %q", i, name)
}

// zones resolves IANA zone names once per load.
type zones map[string]*time.Location

// load returns the zone named name, or nil after reporting a problem at
// path. The empty name gives fallback.
func (z zones) load(p *problems, path, name string, fallback *time.Location) *time.Location {
	if name == "" {
		return fallback
	}
	if loc, ok := z[name]; ok {
		if loc == nil {
			p.err(path, "unknown time zone %q; use an IANA name such as Europe/Berlin or UTC", name)
		}
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		loc = nil
	}
	z[name] = loc
	return z.load(p, path, name, fallback)
}

// loadJobs decodes `defaults:` and every job of `jobs:`, merges them with
// the built-in defaults and validates each job (SPEC.md §2). Every problem
// is recorded; a bad job does not stop the others from being checked.
func loadJobs(cfg *Config, raw map[string]any, d *decoder, opts Options, z zones) {
	jd := newJobDecoder(d)
	if rd, ok := raw["defaults"]; ok && rd != nil {
		if m, ok := asMap(rd); ok {
			cfg.Defaults = jd.fields(m, "defaults.", jd.dknown)
		} else {
			d.probs.err("defaults", "want a mapping of job fields, got %s", describe(rd))
		}
	}
	rj, ok := raw["jobs"]
	if !ok || rj == nil {
		return
	}
	list, ok := rj.([]any)
	if !ok {
		d.probs.err("jobs", "want a list of jobs, got %s", describe(rj))
		return
	}
	builtin := builtinJobDefaults()
	scheds := schedCache{}
	seen := make(map[string]int, len(list))
	cfg.Jobs = make([]Job, 0, len(list))
	for i, e := range list {
		m, ok := asMap(e)
		if !ok {
			d.probs.err(fmt.Sprintf("jobs[%d]", i), "want a mapping with name, schedule and command, got %s", describe(e))
			continue
		}
		job := jd.decode(i, m, cfg, builtin, seen)
		checkJob(cfg, &job, jobPath(i, job.Name)+": ", d.probs, opts, z, scheds)
		cfg.Jobs = append(cfg.Jobs, job)
	}
}

// decode builds job i from its mapping m and checks its name.
func (jd *jobDecoder) decode(i int, m map[string]any, cfg *Config, builtin JobFields, seen map[string]int) Job {
	p := jd.d.probs
	var job Job
	if v := m["name"]; v != nil {
		job.Name, _ = jd.d.str(jobPath(i, "")+": name", v)
	}
	prefix := jobPath(i, job.Name) + ": "
	switch first, dup := seen[job.Name]; {
	case job.Name == "":
		p.err(jobPath(i, ""), "missing name; every job needs a unique name")
	case !namePattern.MatchString(job.Name):
		p.err(prefix+"name", "%q is not a valid name: use 1-128 of A-Z a-z 0-9 . _ -", job.Name)
	case dup:
		p.err(prefix+"name", "duplicate name %q (also %s); names must be unique", job.Name, jobPath(first, job.Name))
	default:
		seen[job.Name] = i
	}
	if v := m["schedule"]; v != nil {
		job.Schedule, _ = jd.d.str(prefix+"schedule", v)
	}
	own := jd.fields(m, prefix, jd.known)
	jd.merge(&job, own, cfg.Defaults, builtin)
	return job
}

// checkJob validates one merged job and fills its derived fields
// (Location, Sched, LockTTL). prefix is the job's path plus ": ".
func checkJob(cfg *Config, job *Job, prefix string, p *problems, opts Options, z zones, scheds schedCache) {
	if strings.TrimSpace(job.Command) == "" {
		p.err(prefix+"command", "missing command; give the shell command to run")
	}
	if job.Shell == "" {
		p.err(prefix+"shell", "must not be empty; omit it for /bin/sh")
	}
	minOneSecond(p, prefix+"timeout", job.Timeout)
	minOneSecond(p, prefix+"lock_ttl", job.LockTTL)
	if job.LockTTL == 0 {
		job.LockTTL = 5 * time.Minute
		if job.Timeout > 0 {
			job.LockTTL = job.Timeout + time.Minute
		}
	}
	oneOf(p, prefix+"overlap", job.Overlap, OverlapSkip, OverlapAllow)
	oneOf(p, prefix+"on_lock_lost", job.OnLockLost, LockLostKill, LockLostContinue)
	if job.Retries < 0 {
		p.err(prefix+"retries", "%d is negative; use 0 for no retries", job.Retries)
	}
	if job.User != "" && opts.Euid != 0 {
		msg := fmt.Sprintf("user %q needs root, but cronlock runs as uid %d", job.User, opts.Euid)
		if opts.Purpose == ForStart {
			p.err(prefix+"user", "%s", msg)
		} else {
			p.warn(prefix+"user", msg+"; the daemon will refuse to start")
		}
	}
	loc := z.load(p, prefix+"timezone", job.Timezone, cfg.Node.Location)
	if job.Schedule == "" {
		p.err(prefix+"schedule", "missing schedule; e.g. \"0 2 * * *\" or \"@every 1h\"")
		return
	}
	if loc == nil {
		return // unknown zone already reported
	}
	s, err := scheds.parse(job.Schedule, loc)
	if err != nil {
		p.err(prefix+"schedule", "%s", strings.TrimPrefix(err.Error(), "schedule: "))
		return
	}
	job.Sched, job.Location = s, s.Location()
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
	if d > 0 && d < time.Second {
		p.err(path, "%s is under 1s; write e.g. 30s", d)
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
