package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Defaults applied by Start to zero Spec fields.
const (
	DefaultMaxLine      = 16 << 10        // bytes
	DefaultTailSize     = 64 << 10        // bytes
	DefaultDrainTimeout = 2 * time.Second // see Spec.DrainTimeout
)

// Spec describes one run of a job command.
type Spec struct {
	// Shell runs the command as `Shell -c Command`, e.g. "/bin/sh". A name
	// without a slash is looked up in the daemon's PATH.
	Shell   string
	Command string
	// Dir is the work_dir; "" means the daemon's working directory.
	Dir string
	// Env is the child's complete environment (KEY=VALUE); nil means an
	// empty environment, not the daemon's.
	Env []string
	// User, if not "", runs the command as this user (name, or numeric uid)
	// with its primary group and no supplementary groups. Needs root.
	User string
	// KillGrace is the delay between SIGTERM and SIGKILL used when the leader
	// exits while other members of its group are still alive. <= 0 means
	// SIGKILL at once.
	KillGrace time.Duration
	// Log receives each output line at Info as "job output" with fields
	// stream ("stdout"/"stderr"), line, and partial=true on every piece but
	// the last of an over-long line. It should carry job and run_id. nil
	// discards output. Sampling, if configured, drops lines.
	Log *zap.Logger
	// MaxLine is the longest line in bytes logged as one entry; longer lines
	// are cut. Default DefaultMaxLine.
	MaxLine int
	// Redact, when not nil, redacts each line (without its "\n"; a piece
	// of at most MaxLine bytes of a longer line, cut where no secret crosses
	// the cut, see Redactor) before it is logged, kept in Result.Tail or
	// handed to Lines. Reading holds up to the Redactor's longest secret
	// more than MaxLine bytes per stream.
	Redact *Redactor
	// Lines, when not nil, receives each redacted line without its "\n"
	// (partial: a piece of an over-long line that goes on in the next
	// call; the unterminated last line of a stream also comes without
	// partial). It is called by the two reader goroutines concurrently, must
	// not keep b and must not block: it delays reading the job's output.
	Lines func(b []byte, partial bool)
	// TailSize is how many bytes of combined output Result.Tail keeps.
	// Default DefaultTailSize.
	TailSize int
	// DrainTimeout bounds how long Wait keeps reading output after the
	// process group is gone (a process that escaped the group may still hold
	// the pipes). Default DefaultDrainTimeout.
	DrainTimeout time.Duration
}

func (s Spec) withDefaults() Spec {
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	if s.MaxLine <= 0 {
		s.MaxLine = DefaultMaxLine
	}
	if s.TailSize <= 0 {
		s.TailSize = DefaultTailSize
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = DefaultDrainTimeout
	}
	return s
}

// Result is the outcome of one run.
type Result struct {
	// ExitCode is the leader's exit status; -1 if it was killed by a signal.
	ExitCode int
	// Signal is the signal that killed the leader, or 0.
	Signal syscall.Signal
	// Started is when exec succeeded; Finished is when the leader exited.
	Started, Finished time.Time
	// Tail is the last TailSize bytes of stdout and stderr, interleaved as
	// received.
	Tail []byte
	// DrainTimedOut reports that output was still open DrainTimeout after the
	// group was gone (an escaped process held it) and reading was cut short.
	DrainTimedOut bool
	// Err holds unexpected errors (wait, read, signal failures, group
	// members surviving SIGKILL); a non-zero exit is not an error.
	Err error
}

// Start starts spec.Command through spec.Shell in a new process group whose
// id is the child's pid; stdin is /dev/null. It returns once
// exec has succeeded (Proc.Started is that instant), or an error
// wrapping the cause (empty shell, unknown shell, bad Dir, unknown user,
// pipe creation). On success the caller must eventually call Wait (or wait
// on Done) and may call Terminate; Start itself never blocks on the child.
// The child's exit status is taken by the package's reaper (see
// AdoptOrphans), never by exec.Cmd.Wait.
func Start(spec Spec) (*Proc, error) {
	spec = spec.withDefaults()
	if spec.Shell == "" {
		return nil, errors.New("start: empty shell")
	}
	cred, err := credential(spec.User)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	var r [2]*os.File
	var w [2]int // the write ends, the child's stdout and stderr
	for i := range r {
		if r[i], w[i], err = outputPipe(); err != nil {
			closeAll(r[:i])
			closeFds(w[:i])
			return nil, fmt.Errorf("start: pipe: %w", err)
		}
	}
	closePipes := func() { closeAll(r[:]); closeFds(w[:]) } // every pipe is open from here
	path, err := shellPath(spec.Shell)
	if err != nil {
		closePipes()
		return nil, fmt.Errorf("start %s -c: %w", spec.Shell, err)
	}
	if spec.Dir != "" {
		// As os.StartProcess does: a missing directory is named as such,
		// not as a failed exec of the shell.
		if _, err := os.Stat(spec.Dir); err != nil {
			closePipes()
			return nil, fmt.Errorf("start %s -c: %w", spec.Shell, &os.PathError{Op: "chdir", Path: spec.Dir, Err: errors.Unwrap(err)})
		}
	}
	null, err := devNull()
	if err != nil {
		closePipes()
		return nil, fmt.Errorf("start: %w", err)
	}
	env := spec.Env
	if env == nil {
		env = []string{} // an empty environment, as documented
	}
	// syscall.ForkExec, not os/exec: os/exec would open /dev/null, copy and
	// de-duplicate the environment (already built once per job, see
	// actors/env.go) and make a pidfd on every start: a standalone program
	// starting `/bin/sh -c true` 2,000 times used 115–124 µs of its own CPU
	// per start through os/exec and 82–106 µs through syscall.ForkExec
	// (BenchmarkRunCPU measures the whole Start and Wait). The child
	// gets /dev/null as stdin and the pipes' write ends as stdout and
	// stderr; every other descriptor of the daemon is close-on-exec.
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: env, Files: []uintptr{null, uintptr(w[0]), uintptr(w[1])},
		// Pdeathsig: if the daemon itself dies (SIGKILL, crash), the kernel
		// kills the command's shell, so a dead node does not keep running a
		// job whose lease will expire and be taken by a survivor. (It
		// reaches only the shell; under systemd, KillMode=mixed kills the
		// rest of the group.)
		Sys: &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}}
	var group Group
	var started time.Time
	forkFrom := bootTicks()
	pid, exit, err := children.startChild(path, []string{spec.Shell, "-c", spec.Command}, attr, func(pid int) {
		started = time.Now() // exec succeeded: the fire-delay instant
		group = Group{ID: pid}
		first, last, ok := forkTicks(forkFrom, bootTicks())
		if sid, known := ownSession(); ok && known {
			group.Session, group.LeaderStart, group.LeaderStartLast = sid, first, last
			return
		}
		// No usable bracket: ask the kernel. Not reaped yet (the reaper
		// waits for the fork lock): /proc/pid is the leader, even if it
		// has already exited.
		if st, ok := readStat(pid); ok {
			group.Session, group.LeaderStart, group.LeaderStartLast = st.session, st.startTime, st.startTime
		}
	})
	closeFds(w[:])
	if err != nil {
		closeAll(r[:])
		return nil, fmt.Errorf("start %s -c: %w", spec.Shell, err)
	}
	p := newProc(spec, pid, group, started, exit, r)
	p.run()
	return p, nil
}

// shellPath is the file to execute for shell: itself when it names a
// path, else its place in $PATH (exec.LookPath, as exec.Command does).
func shellPath(shell string) (string, error) {
	if strings.Contains(shell, "/") {
		return shell, nil
	}
	return exec.LookPath(shell)
}

// devNull returns the descriptor of /dev/null, opened once (read-only,
// close-on-exec) and kept: every child gets it as its stdin.
var devNull = sync.OnceValues(func() (uintptr, error) {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: os.DevNull, Err: err}
	}
	return uintptr(fd), nil
})

// outputPipe is os.Pipe for a child's output, with fewer system calls and
// objects per run: the read end is made non-blocking with one fcntl(2)
// (F_SETFL: a new pipe's end has no other status flag to keep) and goes to
// the runtime's poller as an *os.File; the write end, which the child
// inherits and the daemon closes after the fork, is a bare descriptor
// that stays blocking and is never registered. (os.Pipe makes both ends
// non-blocking and pollable *os.Files, and exec then makes the write end
// blocking again.)
func outputPipe() (r *os.File, w int, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, -1, os.NewSyscallError("pipe2", err)
	}
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, -1, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), fds[1], nil
}

// LookupUser resolves Spec.User: a user name, or else a numeric uid (a
// name is tried first, as crontab(5) user fields are names). The error
// names the user.
func LookupUser(name string) (*user.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if _, perr := strconv.Atoi(name); perr != nil || !errors.As(err, &unknown) {
			return nil, fmt.Errorf("lookup user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("lookup user %q: %w", name, err)
		}
	}
	return u, nil
}

// credential resolves name to the uid and primary gid to run as; "" means
// no change.
func credential(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := LookupUser(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: gid %q: %w", name, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// closeFds closes bare descriptors (outputPipe's write ends).
func closeFds(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

func closeAll(groups ...[]*os.File) {
	for _, g := range groups {
		for _, f := range g {
			f.Close()
		}
	}
}
