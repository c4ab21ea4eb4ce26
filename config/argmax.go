package config

import (
	"fmt"
	"strings"
	"syscall"
)

// The kernel's limits on exec(2) arguments (Linux, fs/exec.c and
// include/uapi/linux/binfmts.h). A run executes `<shell> -c <command>`
// (process/), so the whole command is one argument string; hooks likewise.
// Past a limit every run fails with E2BIG, "argument list too long".
const (
	// maxArgStrlen bounds one argument or environment string, its
	// terminating NUL included: MAX_ARG_STRLEN = 32 pages of 4 KiB.
	maxArgStrlen = 32 * 4096
	// minArgSpace is ARG_MAX, the space exec always grants to all strings
	// and their pointers together, whatever the stack limit.
	minArgSpace = 128 << 10
	// maxArgSpace is ¾ of _STK_LIM (8 MiB), the kernel's cap on that space.
	maxArgSpace = 6 << 20
	// runVarsReserve is kept free for what the daemon adds at run time: the
	// run variables, the run user's HOME/USER/LOGNAME/SHELL and, for hooks,
	// the result variables with the 4 KiB output tail (actors/env.go).
	runVarsReserve = 8 << 10
)

// argSpace is the space exec grants to argv and envp together, strings
// and pointers, on this host: a quarter of the stack rlimit (what
// sysconf(_SC_ARG_MAX) reports), within [minArgSpace, maxArgSpace]. The
// daemon's children inherit the daemon's rlimit, so at -validate this is
// the validating shell's value.
func argSpace() int {
	space := uint64(maxArgSpace)
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &r); err == nil {
		space = min(space, r.Cur/4)
	}
	return int(max(space, minArgSpace))
}

// argSize is what a string takes in exec's argument space: its bytes, its
// NUL and its pointer.
func argSize(s string) int { return len(s) + 1 + 8 }

// argTooLong reports a command string (command, on_success, on_failure)
// that cannot be one argument, or "".
func argTooLong(what, s string) string {
	if len(s)+1 <= maxArgStrlen {
		return ""
	}
	return fmt.Sprintf("%s is %d bytes, more than the %d bytes Linux allows in one argument (MAX_ARG_STRLEN, "+
		"NUL included); every run would fail with \"argument list too long\"; put it in a script file and run that",
		what, len(s), maxArgStrlen-1)
}

// envTooLong reports an env entry that cannot be one environment string,
// or "".
func envTooLong(name, val string) string {
	n := len(name) + 1 + len(val)
	if n+1 <= maxArgStrlen {
		return ""
	}
	return fmt.Sprintf("%s=… is %d bytes, more than the %d bytes Linux allows in one environment string "+
		"(MAX_ARG_STRLEN, NUL included); every run would fail with \"argument list too long\"", name, n, maxArgStrlen-1)
}

// argStrings reports the commands and env entries set in f (a job's own
// fields or `defaults:`) that cannot be one exec(2) string.
func argStrings(p *problems, prefix string, f JobFields) {
	for _, c := range []struct {
		key string
		cmd *string
	}{{"command", f.Command}, {"on_success", f.OnSuccess}, {"on_failure", f.OnFailure}} {
		if c.cmd != nil {
			if msg := argTooLong("the "+c.key, *c.cmd); msg != "" {
				p.err(prefix+c.key, "%s", msg)
			}
		}
	}
	for _, k := range sortedKeys(f.Env) {
		if msg := envTooLong(k, f.Env[k]); msg != "" {
			p.err(prefix+"env."+k, "%s", msg)
		}
	}
}

// argLimits checks, for a merged job, that each of its commands fits in
// exec's argument space together with the environment the run gets
// (inherited or minimal, the job's env, runVarsReserve). Commands that are
// too long as one argument are reported by fields, not again here. The
// space and the inherited environment are this host's, so the finding is
// a host problem (a warning at -validate).
func (c *checker) argLimits(prefix string, job *Job) {
	env := runVarsReserve + len(c.cfg.Node.ID)
	if job.InheritEnv {
		env += c.inheritedEnv()
	} else {
		env += 6 * argSize("PATH=/usr/bin:/bin") // PATH, SHELL, HOME, USER, LOGNAME, LANG, TZ
	}
	for k, v := range job.Env {
		env += argSize(k + "=" + v)
	}
	for _, f := range []struct{ key, cmd string }{{"command", job.Command}, {"on_success", job.OnSuccess}, {"on_failure", job.OnFailure}} {
		if f.cmd == "" || len(f.cmd)+1 > maxArgStrlen {
			continue
		}
		total := env + 2*argSize(job.Shell) + argSize("-c") + argSize(f.cmd) // the shell is argv[0] and the file name
		if total > c.argSpace {
			c.hostProblem(prefix+f.key, fmt.Sprintf("%s -c <%s> and the run's environment take %d bytes, more than the %d bytes "+
				"exec allows on this host (a quarter of the stack limit, ulimit -s, at most 6 MiB); every run would fail with "+
				"\"argument list too long\"; make env or the %s smaller", job.Shell, f.key, total, c.argSpace, f.key))
		}
	}
}

// inheritedEnv is the size in exec's argument space of the environment a
// run inherits from the daemon: Options.Environ without the CRONLOCK_*
// variables (actors.JobEnviron also drops a few systemd variables; they
// are small). It is computed once per load.
func (c *checker) inheritedEnv() int {
	if c.inherited < 0 {
		c.inherited = 0
		for _, kv := range c.opts.Environ {
			if !strings.HasPrefix(kv, "CRONLOCK_") {
				c.inherited += argSize(kv)
			}
		}
	}
	return c.inherited
}
