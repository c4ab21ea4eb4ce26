package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/schedule"
)

// nextResult is one entry of `cronlock next -json`.
type nextResult struct {
	Job      string   `json:"job"`      // "" for the ad-hoc -schedule form
	Timezone string   `json:"timezone"` // IANA name of the schedule's zone
	Times    []string `json:"times"`    // RFC 3339 with the zone's offset
	// DSTNotice describes the next DST transition within a year of -from
	// that changes the schedule's fire times (dstNotice); omitted when none.
	DSTNotice string `json:"dst_notice,omitempty"`
	// ActiveFrom and ActiveUntil are the job's active window as configured
	// (RFC 3339; omitted when unbounded): Times lists only fire times inside it.
	ActiveFrom  string      `json:"active_from,omitempty"`
	ActiveUntil string      `json:"active_until,omitempty"`
	job         *config.Job // nil for -schedule
	path        string      // where the notice points: `jobs[i] "name": schedule`, or -schedule
	sched       *schedule.Schedule
	loc         *time.Location
	times       []time.Time
	note        string
}

// nextFlags are the flags of `cronlock next`.
type nextFlags struct {
	config, from, expr, zone string
	n                        int
	json                     bool
	jobs                     []string
}

// parseNextFlags parses flags and JOB names in any order.
func parseNextFlags(args []string, env *runEnv) (*nextFlags, int) {
	f := &nextFlags{}
	fs := flag.NewFlagSet("cronlock next", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.StringVar(&f.config, "config", defaultConfig, "configuration file")
	fs.IntVar(&f.n, "n", 5, "fire times per job (1..1000)")
	fs.StringVar(&f.from, "from", "", "list times strictly after this RFC 3339 instant (default now)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.StringVar(&f.expr, "schedule", "", "ad-hoc schedule; no config needed")
	fs.StringVar(&f.zone, "timezone", "", "zone of the -schedule expression (default: host local)")
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageExit(err)
		}
		if fs.NArg() == 0 {
			break
		}
		f.jobs = append(f.jobs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return f, 0
}

// runNext implements `cronlock next [-config FILE] [-n 5] [-from RFC3339]
// [-json] [JOB...]` and `cronlock next -schedule EXPR [-timezone ZONE] …`.
// Errors print one line naming the problem and return 1.
func runNext(_ context.Context, args []string, env *runEnv) int {
	f, code := parseNextFlags(args, env)
	if f == nil {
		return code
	}
	from, err := nextFrom(f.from)
	if err == nil && (f.n < 1 || f.n > 1000) {
		err = fmt.Errorf("-n %d: want 1..1000", f.n)
	}
	var results []nextResult
	if err == nil {
		results, err = nextResults(f, env)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "cronlock next: %v\n", err)
		return 1
	}
	if results == nil {
		return 1 // config problems already printed
	}
	for i := range results {
		results[i].fill(from, f.n)
	}
	if f.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
		return 0
	}
	printNextTable(env, results)
	for _, r := range results {
		if r.DSTNotice != "" {
			fmt.Fprintf(env.stderr, "notice: %s: %s\n", r.path, r.DSTNotice)
		}
	}
	return 0
}

// nextFrom parses -from (RFC 3339), defaulting to now.
func nextFrom(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad -from %q: want RFC 3339, e.g. 2026-01-01T00:00:00Z", s)
	}
	return t, nil
}

// nextResults returns one unfilled result per selected schedule: the ad-hoc
// -schedule, or the config's jobs (all, or those named). A nil slice with a
// nil error means the config was invalid and its problems were printed.
func nextResults(f *nextFlags, env *runEnv) ([]nextResult, error) {
	if f.expr != "" {
		if len(f.jobs) > 0 {
			return nil, fmt.Errorf("give either -schedule or JOB names, not both")
		}
		loc := config.HostZone(env.environ)
		if f.zone != "" {
			var err error
			if loc, err = time.LoadLocation(f.zone); err != nil {
				return nil, fmt.Errorf("unknown time zone %q for -timezone", f.zone)
			}
		}
		s, err := schedule.Parse(f.expr, loc)
		if err != nil {
			return nil, err
		}
		return []nextResult{{Job: "", loc: s.Location(), sched: s, path: "-schedule"}}, nil
	}
	if f.zone != "" {
		return nil, fmt.Errorf("-timezone applies only with -schedule; set timezone in the job instead")
	}
	cfg, _ := loadConfig(f.config, config.ForValidate, nil, env)
	if cfg == nil {
		return nil, nil
	}
	return jobResults(cfg, f.jobs)
}

// jobResults selects the named jobs of cfg (all when names is empty).
func jobResults(cfg *config.Config, names []string) ([]nextResult, error) {
	byName := make(map[string]int, len(cfg.Jobs))
	all := make([]string, 0, len(cfg.Jobs))
	for i := range cfg.Jobs {
		byName[cfg.Jobs[i].Name] = i
		all = append(all, cfg.Jobs[i].Name)
	}
	if len(names) == 0 {
		names = all
	}
	out := make([]nextResult, 0, len(names))
	for _, n := range names {
		i, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown job %q in %s (jobs: %s)", n, cfg.Path, shortList(all))
		}
		j := &cfg.Jobs[i]
		r := nextResult{Job: j.Name, loc: j.Location, sched: j.Sched, path: fmt.Sprintf("jobs[%d] %q: schedule", i, j.Name),
			ActiveFrom: j.ActiveFrom, ActiveUntil: j.ActiveUntil, job: j}
		if !j.Enabled {
			r.note = "disabled"
		}
		if at, once := j.Sched.Once(); once && !at.After(time.Now()) {
			r.note = "done: its @at time " + at.Format(time.RFC3339) + " has passed"
		}
		out = append(out, r)
	}
	return out, nil
}

// shortList joins up to 10 names.
func shortList(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	return strings.Join(names, ", ")
}
