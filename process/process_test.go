package process

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProc_ExitCodes(t *testing.T) {
	for _, want := range []int{0, 3} {
		h, spec := newHarness(t)
		spec.Command = "exit " + string(rune('0'+want))
		p := h.start(spec)
		res := h.wait(p)
		if res.ExitCode != want || res.Signal != 0 || res.Err != nil {
			t.Errorf("%q: got exit %d signal %v err %v, want exit %d", spec.Command, res.ExitCode, res.Signal, res.Err, want)
		}
		if p.Pid() <= 0 || res.Started != p.Started() || res.Finished.Before(res.Started) {
			t.Errorf("got pid %d started %v finished %v", p.Pid(), res.Started, res.Finished)
		}
	}
}

func TestProc_OutputLinesByStream(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `printf 'one\ntwo\r\n\nthree'; echo oops >&2; printf 'no newline' >&2`
	res := h.wait(h.start(spec))
	if got, want := h.lines("stdout"), []string{"one", "two", "", "three"}; !slices.Equal(got, want) {
		t.Errorf("stdout: got %q, want %q", got, want)
	}
	if got, want := h.lines("stderr"), []string{"oops", "no newline"}; !slices.Equal(got, want) {
		t.Errorf("stderr: got %q, want %q", got, want)
	}
	// Streams are read concurrently: only each stream's own order is fixed.
	tail := string(res.Tail)
	if len(tail) != 30 || !strings.Contains(tail, "one\ntwo\r\n\nthree") || !strings.Contains(tail, "no newline") {
		t.Errorf("tail: got %q, want both streams' 30 bytes", tail)
	}
}

func TestProc_LongLineIsCutAndChildDoesNotBlock(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `head -c 102400 /dev/zero | tr '\0' x; echo; echo after`
	res := h.wait(h.start(spec))
	if res.ExitCode != 0 {
		t.Fatalf("got exit %d, want 0", res.ExitCode)
	}
	piece := strings.Repeat("x", DefaultMaxLine)
	var want []string
	for range 6 {
		want = append(want, piece+"+")
	}
	want = append(want, strings.Repeat("x", 102400-6*DefaultMaxLine), "after")
	if got := h.lines("stdout"); !slices.Equal(got, want) {
		t.Errorf("got %d pieces, want %d (6 partial of %d bytes, 4096, after)", len(got), len(want), DefaultMaxLine)
	}
}

func TestProc_TailIsBoundedAndLast(t *testing.T) {
	h, spec := newHarness(t)
	spec.TailSize = 1000
	spec.Command = `seq 1 20000`
	res := h.wait(h.start(spec))
	var all strings.Builder
	for i := 1; i <= 20000; i++ {
		all.WriteString(strconv.Itoa(i) + "\n")
	}
	want := all.String()[all.Len()-1000:]
	if string(res.Tail) != want {
		t.Errorf("got tail %d bytes ending %q, want %d bytes ending %q", len(res.Tail), last(res.Tail, 20), len(want), want[len(want)-20:])
	}
	if n := len(h.lines("stdout")); n != 20000 {
		t.Errorf("got %d lines, want 20000", n)
	}
}

func TestProc_TerminateKillsAfterGrace(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `trap "" TERM; echo ready; sleep 1000; echo survived`
	p := h.start(spec)
	h.waitLines("stdout", 1)
	t0 := time.Now()
	p.Terminate(200 * time.Millisecond)
	res := h.wait(p)
	if took := time.Since(t0); took < 200*time.Millisecond {
		t.Errorf("got SIGKILL after %v, want >= 200ms grace", took)
	}
	if res.Signal != syscall.SIGKILL || res.ExitCode != -1 {
		t.Errorf("got signal %v exit %d, want SIGKILL -1", res.Signal, res.ExitCode)
	}
}

func TestProc_TerminateSendsTermFirst(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `sleep 1000 & sleep 1000`
	p := h.start(spec)
	p.Terminate(time.Hour)
	res := h.wait(p)
	if res.Signal != syscall.SIGTERM {
		t.Errorf("got signal %v, want SIGTERM", res.Signal)
	}
	if groupAlive(p.Pid()) {
		t.Errorf("process group %d still has live members", p.Pid())
	}
}

func TestProc_ShorterGraceBringsKillForward(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `trap "" TERM; echo ready; sleep 1000`
	p := h.start(spec)
	h.waitLines("stdout", 1)
	p.Terminate(time.Hour)
	p.Terminate(100 * time.Millisecond)
	p.Terminate(time.Hour) // must not push the SIGKILL back
	res := h.wait(p)
	if res.Signal != syscall.SIGKILL {
		t.Errorf("got signal %v, want SIGKILL", res.Signal)
	}
}

func TestProc_TerminateZeroGraceKillsNow(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `trap "" TERM; sleep 1000`
	p := h.start(spec)
	p.Terminate(0)
	if res := h.wait(p); res.Signal != syscall.SIGKILL {
		t.Errorf("got signal %v, want SIGKILL", res.Signal)
	}
	p.Terminate(time.Second) // after Done: no-op
}

func TestProc_GrandchildIsKilledAfterLeaderExits(t *testing.T) {
	for name, cmd := range map[string]string{
		"term": `sleep 1000 & echo $!`,
		"kill": `(trap "" TERM; exec sleep 1000) & echo $!`,
	} {
		t.Run(name, func(t *testing.T) {
			h, spec := newHarness(t)
			spec.Command = cmd
			p := h.start(spec)
			res := h.wait(p)
			pid := atoi(t, h.lines("stdout")[0])
			t.Cleanup(func() { killPid(pid) })
			if res.ExitCode != 0 || res.Err != nil {
				t.Errorf("got exit %d err %v, want 0 nil", res.ExitCode, res.Err)
			}
			if alive(pid) || groupAlive(p.Pid()) {
				t.Errorf("grandchild %d alive after Wait, want gone", pid)
			}
		})
	}
}

func TestProc_EscapedGrandchildDoesNotHangWait(t *testing.T) {
	h, spec := newHarness(t)
	// The leader waits until the grandchild has its own session (field 6 of
	// /proc/pid/stat), else the group SIGTERM could catch it before setsid.
	spec.Command = `setsid sleep 1000 & p=$!
		until [ "$(cut -d' ' -f6 /proc/$p/stat)" = "$p" ]; do :; done; echo $p`
	p := h.start(spec)
	res := h.wait(p)
	pid := atoi(t, h.lines("stdout")[0])
	t.Cleanup(func() { killPid(pid) })
	if !res.DrainTimedOut {
		t.Errorf("got DrainTimedOut false, want true")
	}
	if took := res.Finished.Sub(res.Started); took > time.Second {
		t.Errorf("leader took %v", took)
	}
	if got := h.logs.FilterMessage("job output still open after process group exited; stopped reading").Len(); got != 1 {
		t.Errorf("got %d drain warnings, want 1", got)
	}
}

func TestProc_DirAndEnv(t *testing.T) {
	t.Setenv("CRONLOCK_TEST_LEAK", "1")
	h, spec := newHarness(t)
	spec.Dir = t.TempDir()
	spec.Env = append(spec.Env, "FOO=bar baz")
	spec.Command = `pwd; echo "$FOO"; echo "leak=${CRONLOCK_TEST_LEAK-}"`
	h.wait(h.start(spec))
	dir, _ := os.Readlink(spec.Dir) // TempDir may be a symlink
	if dir == "" {
		dir = spec.Dir
	}
	if got, want := h.lines("stdout"), []string{dir, "bar baz", "leak="}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestProc_User(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	h, spec := newHarness(t)
	spec.User, spec.Dir = "nobody", "/"
	spec.Command = `id -u; id -g; id -G`
	h.wait(h.start(spec))
	if got, want := h.lines("stdout"), []string{u.Uid, u.Gid, u.Gid}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStart_Errors(t *testing.T) {
	_, base := newHarness(t)
	for name, mod := range map[string]func(*Spec){
		"bad dir":      func(s *Spec) { s.Dir = "/nonexistent/dir" },
		"bad shell":    func(s *Spec) { s.Shell = "/nonexistent/sh" },
		"empty shell":  func(s *Spec) { s.Shell = "" },
		"unknown user": func(s *Spec) { s.User = "no-such-user-cronlock" },
	} {
		spec := base
		spec.Command = "true"
		mod(&spec)
		p, err := Start(spec)
		if err == nil {
			p.Wait()
			t.Errorf("%s: got nil error, want one", name)
			continue
		}
		if name == "bad dir" || name == "bad shell" {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: got %v, want fs.ErrNotExist", name, err)
			}
		}
	}
}

func TestProc_WaitIsRepeatableAndConcurrent(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `echo hi; exit 7`
	p := h.start(spec)
	var wg sync.WaitGroup
	results := make([]Result, 4)
	for i := range results {
		wg.Go(func() { results[i] = p.Wait() })
	}
	wg.Wait()
	again := p.Wait()
	for i, r := range results {
		if r.ExitCode != 7 || string(r.Tail) != "hi\n" || !r.Finished.Equal(again.Finished) {
			t.Errorf("result %d: got exit %d tail %q, want 7 %q", i, r.ExitCode, r.Tail, "hi\n")
		}
	}
}

func last(b []byte, n int) string { return string(b[max(0, len(b)-n):]) }

func TestProc_TerminateConcurrently(t *testing.T) {
	h, spec := newHarness(t)
	spec.Command = `trap "" TERM; echo ready; sleep 1000 & sleep 1000`
	p := h.start(spec)
	h.waitLines("stdout", 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { p.Terminate(time.Duration(i+1) * 50 * time.Millisecond) })
	}
	wg.Wait()
	if res := h.wait(p); res.Signal != syscall.SIGKILL || groupAlive(p.Pid()) {
		t.Errorf("got signal %v, group alive %v; want SIGKILL, false", res.Signal, groupAlive(p.Pid()))
	}
}

// TestProc_StdinShellByNameAndDescriptors: the child's stdin is /dev/null,
// a shell given by name is found in $PATH, and the shell holds no
// descriptor of the daemon's beyond 0, 1 and 2 (but those the test
// process itself inherited without close-on-exec from whoever started
// it, which every child inherits).
func TestProc_StdinShellByNameAndDescriptors(t *testing.T) {
	extra, err := os.Open(os.DevNull) // a descriptor of this process the child must not inherit
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	inherited := map[string]bool{"0": true, "1": true, "2": true}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fd, _ := strconv.Atoi(e.Name())
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			inherited[e.Name()] = true
		}
	}
	h, spec := newHarness(t)
	spec.Shell = "sh"
	spec.Command = `readlink /proc/$$/fd/0; ls /proc/$$/fd`
	h.wait(h.start(spec))
	got := h.lines("stdout")
	if len(got) < 4 || got[0] != "/dev/null" {
		t.Fatalf("got %q, want /dev/null as stdin, then the descriptors", got)
	}
	for _, fd := range got[1:] {
		if !inherited[fd] || fd == strconv.Itoa(int(extra.Fd())) {
			t.Errorf("the shell holds descriptor %s of the daemon's (all: %q; inherited without close-on-exec: %v)", fd, got[1:], inherited)
		}
	}
}
