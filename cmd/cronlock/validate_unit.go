package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
)

// What -validate knows of the systemd unit the daemon runs under. Two
// things are knowable on a host with systemd:
//
//   - whether -validate itself runs inside a cronlock service, as the
//     shipped unit's ExecReload= runs it before the SIGHUP: then it runs as
//     the daemon's user, in the daemon's sandbox and environment, and a
//     host problem (a missing work_dir, `user:` while not root) is certain
//     to make the daemon reject the file, so it is an error, as at start,
//     and `systemctl reload` fails;
//   - the unit's settings, from `systemctl show`, when the unit's ExecStart=
//     names the same config file: then jobs whose work_dir or user cannot
//     work under those settings get a warning (unitWarnings).
//
// Elsewhere (no systemd, another config file, another machine) nothing is
// known and nothing is said.

// unitProps are the properties -validate reads with systemctl show.
var unitProps = []string{"LoadState", "ExecStart", "WorkingDirectory", "User", "CapabilityBoundingSet",
	"ProtectSystem", "ProtectHome", "PrivateTmp", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
	"StateDirectory", "CacheDirectory", "LogsDirectory", "RuntimeDirectory"}

// defaultUnit is the unit -validate asks about when it does not run in one.
const defaultUnit = "cronlock.service"

// serviceUnit returns the systemd service whose cgroup this process is in,
// from the content of /proc/self/cgroup, when it is a cronlock service
// (cronlock.service, cronlock@x.service, …) and environ has the
// INVOCATION_ID that systemd gives every process it starts for a unit;
// else "". The service is the cgroup's last component, or the one before
// it (a control process in a sub-cgroup).
func serviceUnit(environ []string, cgroup string) string {
	if id, _ := envValue(environ, "INVOCATION_ID"); id == "" {
		return ""
	}
	for _, line := range strings.Split(cgroup, "\n") {
		// hierarchy-ID:controllers:path; the unified hierarchy (0::) or
		// systemd's own (name=systemd) of cgroup v1.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || (parts[0] != "0" && parts[1] != "name=systemd") {
			continue
		}
		elems := strings.Split(strings.Trim(parts[2], "/"), "/")
		for _, e := range []string{elems[len(elems)-1], elems[max(0, len(elems)-2)]} {
			if strings.HasSuffix(e, ".service") && strings.HasPrefix(e, "cronlock") {
				return e
			}
		}
	}
	return ""
}

// unitContext is what -validate found out about the unit.
type unitContext struct {
	inside string            // the cronlock service this process runs in ("" = none)
	unit   string            // the unit asked about: inside, or cronlock.service
	props  map[string]string // its systemctl show properties; nil when not known or not for this config
}

// probeUnit finds the unit context of validating path: the service this
// process runs in (/proc/self/cgroup) and, with systemctl on environ's PATH
// and systemd running, that unit's (or cronlock.service's) settings when
// its ExecStart= names path.
func probeUnit(path string, environ []string) unitContext {
	cg, _ := os.ReadFile("/proc/self/cgroup")
	uc := unitContext{inside: serviceUnit(environ, string(cg)), unit: defaultUnit}
	if uc.inside != "" {
		uc.unit = uc.inside
	}
	props := systemctlShow(environ, uc.unit)
	if props["LoadState"] == "loaded" && unitConfigIs(props, path) {
		uc.props = props
	}
	return uc
}

// systemctlShow runs `systemctl show UNIT -p …` with the systemctl found on
// environ's PATH and returns its KEY=VALUE lines as a map; nil when there
// is no systemctl or it fails (no systemd running, no permission).
func systemctlShow(environ []string, unit string) map[string]string {
	pathList, _ := envValue(environ, "PATH")
	bin := lookPathIn(pathList, "systemctl")
	if bin == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "show", unit, "--no-pager", "-p", strings.Join(unitProps, ","))
	cmd.Env = environ
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	props := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			props[k] = v
		}
	}
	return props
}

// lookPathIn is exec.LookPath with pathList instead of the process's PATH.
func lookPathIn(pathList, name string) string {
	for _, dir := range filepath.SplitList(pathList) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 && filepath.IsAbs(p) {
			return p
		}
	}
	return ""
}

// unitConfigIs reports whether the unit's ExecStart= runs cronlock with
// the config file path (-config, default cronlock.yaml in the unit's
// WorkingDirectory), compared as files when both exist.
func unitConfigIs(props map[string]string, path string) bool {
	// ExecStart={ path=/usr/bin/cronlock ; argv[]=/usr/bin/cronlock -config /etc/… ; ignore_errors=no ; … }
	_, rest, ok := strings.Cut(props["ExecStart"], "argv[]=")
	if !ok {
		return false
	}
	argv, _, _ := strings.Cut(rest, " ;")
	args := strings.Fields(argv)
	unitPath := "cronlock.yaml"
	for i := 1; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "-")
		switch {
		case a == "-config" || a == "config":
			if i+1 < len(args) {
				unitPath = args[i+1]
			}
		case strings.HasPrefix(a, "config=") || strings.HasPrefix(a, "-config="):
			_, unitPath, _ = strings.Cut(a, "=")
		}
	}
	if !filepath.IsAbs(unitPath) {
		unitPath = filepath.Join(props["WorkingDirectory"], unitPath)
	}
	a, errA := os.Stat(unitPath)
	b, errB := os.Stat(path)
	if errA == nil && errB == nil {
		return os.SameFile(a, b)
	}
	abs, err := filepath.Abs(path)
	return err == nil && filepath.Clean(unitPath) == abs
}

// access is what a unit lets its processes do with a directory.
type access int

const (
	writable     access = iota
	readOnly            // ProtectSystem=, ProtectHome=read-only, ReadOnlyPaths=
	hidden              // ProtectHome=yes|tmpfs, InaccessiblePaths=: empty or absent
	privateTmpfs        // PrivateTmp=yes: the unit's own, empty /tmp and /var/tmp
)

// mountRule is one path setting of the unit: what it makes of dir and
// everything below, and which setting says so.
type mountRule struct {
	dir     string
	access  access
	setting string
}

// unitRules turns the unit's sandbox properties into path rules.
func unitRules(props map[string]string) []mountRule {
	var rules []mountRule
	add := func(a access, setting string, dirs ...string) {
		for _, d := range dirs {
			d = strings.TrimLeft(d, "-+") // "-": ignore if missing; "+": relative to RootDirectory=
			if d == "" {
				continue
			}
			name := setting
			if strings.HasSuffix(setting, "=") {
				name += d // ReadWritePaths=/srv/x
			}
			rules = append(rules, mountRule{filepath.Clean(d), a, name})
		}
	}
	switch ps := props["ProtectSystem"]; ps {
	case "strict":
		add(readOnly, "ProtectSystem=strict", "/")
	case "full":
		add(readOnly, "ProtectSystem=full", "/usr", "/boot", "/efi", "/etc")
	case "yes":
		add(readOnly, "ProtectSystem=yes", "/usr", "/boot", "/efi")
	}
	homes := []string{"/home", "/root", "/run/user"}
	switch ph := props["ProtectHome"]; ph {
	case "read-only":
		add(readOnly, "ProtectHome=read-only", homes...)
	case "yes", "tmpfs":
		add(hidden, "ProtectHome="+ph, homes...)
	}
	if props["PrivateTmp"] == "yes" {
		add(privateTmpfs, "PrivateTmp=yes", "/tmp", "/var/tmp")
	}
	// The unit's own directories are writable under any ProtectSystem=.
	for key, base := range map[string]string{"StateDirectory": "/var/lib", "CacheDirectory": "/var/cache",
		"LogsDirectory": "/var/log", "RuntimeDirectory": "/run"} {
		for _, d := range strings.Fields(props[key]) {
			add(writable, key+"="+d+" ("+filepath.Join(base, d)+")", filepath.Join(base, d))
		}
	}
	add(writable, "ReadWritePaths=", strings.Fields(props["ReadWritePaths"])...)
	add(readOnly, "ReadOnlyPaths=", strings.Fields(props["ReadOnlyPaths"])...)
	add(hidden, "InaccessiblePaths=", strings.Fields(props["InaccessiblePaths"])...)
	return rules
}

// accessOf returns what the rules make of dir: the rule of the longest
// directory that contains it wins (systemd mounts deeper paths over
// shallower ones); of two for one directory, the stricter. No rule: writable.
func accessOf(rules []mountRule, dir string) (access, mountRule) {
	dir = filepath.Clean(dir)
	best := mountRule{access: writable}
	found := false
	for _, r := range rules {
		if dir != r.dir && !strings.HasPrefix(dir, strings.TrimSuffix(r.dir, "/")+"/") {
			continue
		}
		if !found || len(r.dir) > len(best.dir) || (len(r.dir) == len(best.dir) && r.access > best.access) {
			best, found = r, true
		}
	}
	return best.access, best
}

// dropins is where the package puts the ready drop-ins (docs/systemd.md).
const dropins = "/usr/share/cronlock/dropins/"

// unitWarnings are the warnings for cfg's jobs under the unit's settings
// (uc.props): a job's user while the unit does not run as root (or as a
// root without CAP_SETUID and CAP_SETGID), a work_dir the unit hides or
// makes read-only. A read-only work_dir is a problem only if the job
// writes there, which -validate cannot know: the warning says so.
func unitWarnings(cfg *config.Config, uc unitContext) []config.Problem {
	if uc.props == nil {
		return nil
	}
	var out []config.Problem
	unit := uc.unit
	runsAs := uc.props["User"]
	root := runsAs == "" || runsAs == "root" || runsAs == "0"
	caps := strings.Fields(uc.props["CapabilityBoundingSet"])
	rules := unitRules(uc.props)
	for i, j := range cfg.Jobs {
		base := "jobs[" + strconv.Itoa(i) + "] " + strconv.Quote(j.Name) + ": "
		switch {
		case j.User == "":
		case !root:
			out = append(out, config.Problem{Path: base + "user", Warning: true, Msg: fmt.Sprintf(
				"%s runs cronlock as User=%s, so the daemon refuses to start with a job that sets user: (switching users needs root); "+
					"run it as root with the drop-in %srun-as-root.conf (see `systemctl edit %s`, docs/systemd.md), or remove user:",
				unit, runsAs, dropins, strings.TrimSuffix(unit, ".service"))})
		case !slices.Contains(caps, "cap_setuid") || !slices.Contains(caps, "cap_setgid"):
			out = append(out, config.Problem{Path: base + "user", Warning: true, Msg: fmt.Sprintf(
				"%s runs cronlock as root but without CAP_SETUID and CAP_SETGID (CapabilityBoundingSet=%s), so every run of this job "+
					"fails to switch to user %q; add CapabilityBoundingSet=~ in a drop-in (as %srun-as-root.conf does)",
				unit, uc.props["CapabilityBoundingSet"], j.User, dropins)})
		}
		if j.WorkDir == "" {
			continue // the unit's WorkingDirectory=, checked by systemd itself
		}
		switch a, r := accessOf(rules, j.WorkDir); a {
		case readOnly:
			out = append(out, config.Problem{Path: base + "work_dir", Warning: true, Msg: fmt.Sprintf(
				"%q is read-only for %s's jobs (%s): a job that writes there fails with \"Read-only file system\"; "+
					"if it does, add ReadWritePaths=%s in a drop-in (%swrite-paths.conf, docs/systemd.md)",
				j.WorkDir, unit, r.setting, j.WorkDir, dropins)})
		case hidden:
			out = append(out, config.Problem{Path: base + "work_dir", Warning: true, Msg: fmt.Sprintf(
				"%q is hidden from %s (%s): the daemon refuses to start, as the directory does not exist for it; "+
					"use another directory or change that setting in a drop-in (docs/systemd.md)",
				j.WorkDir, unit, r.setting)})
		case privateTmpfs:
			out = append(out, config.Problem{Path: base + "work_dir", Warning: true, Msg: fmt.Sprintf(
				"%q is in %s, which %s's processes see as their own empty directory (PrivateTmp=yes), not this host's: the daemon "+
					"refuses to start, as it does not exist there; use another directory, or PrivateTmp=no in a drop-in (%srun-as-root.conf)",
				j.WorkDir, r.dir, unit, dropins)})
		}
	}
	return out
}
