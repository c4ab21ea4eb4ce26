package process

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain runs the tests as the daemon runs: a child subreaper whose
// reaper waits for every child (nothing in this package's tests waits for
// children through os/exec). Tests of the other mode say so.
func TestMain(m *testing.M) {
	var err error
	if releaseAdopt, err = AdoptOrphans(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	releaseAdopt()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// releaseAdopt undoes TestMain's AdoptOrphans (see notAdopting).
var releaseAdopt func()

// notAdopting runs the rest of the test as a process that is no child
// subreaper (the mode of test binaries that use os/exec), and adopts again
// at cleanup. The tests of this package are not parallel.
func notAdopting(t *testing.T) {
	t.Helper()
	releaseAdopt()
	if children.adopting() {
		t.Fatal("still adopting after release")
	}
	t.Cleanup(func() {
		var err error
		if releaseAdopt, err = AdoptOrphans(); err != nil {
			t.Fatal(err)
		}
	})
}

// testTimeout only bounds a broken test; no test relies on it for ordering.
const testTimeout = 10 * time.Second

// notifyCore tees entries into an observer core and signals each write, so
// tests can wait for a line without sleeping.
type notifyCore struct {
	zapcore.Core
	wrote chan struct{}
}

func (c notifyCore) With(f []zapcore.Field) zapcore.Core {
	return notifyCore{c.Core.With(f), c.wrote}
}

func (c notifyCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c notifyCore) Write(e zapcore.Entry, f []zapcore.Field) error {
	err := c.Core.Write(e, f)
	select {
	case c.wrote <- struct{}{}:
	default:
	}
	return err
}

type harness struct {
	t     *testing.T
	logs  *observer.ObservedLogs
	wrote chan struct{}
}

func newHarness(t *testing.T) (*harness, Spec) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{t: t, logs: logs, wrote: make(chan struct{}, 1)}
	spec := Spec{
		Shell:        "/bin/sh",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		KillGrace:    200 * time.Millisecond,
		Log:          zap.New(notifyCore{core, h.wrote}),
		DrainTimeout: 300 * time.Millisecond,
	}
	return h, spec
}

// start starts spec and registers a cleanup that kills and waits for it.
func (h *harness) start(spec Spec) *Proc {
	h.t.Helper()
	p, err := Start(spec)
	if err != nil {
		h.t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	h.t.Cleanup(func() { p.Terminate(0); p.Wait() })
	return p
}

func (h *harness) wait(p *Proc) Result {
	h.t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(testTimeout):
		h.t.Fatalf("Wait did not return within %v", testTimeout)
		return Result{}
	}
}

// lines returns the logged "line" fields of stream, in order; a partial
// piece is suffixed with "+".
func (h *harness) lines(stream string) []string {
	var out []string
	for _, e := range h.logs.FilterMessage("job output").AllUntimed() {
		m := e.ContextMap()
		if m["stream"] != stream {
			continue
		}
		l := m["line"].(string)
		if m["partial"] == true {
			l += "+"
		}
		out = append(out, l)
	}
	return out
}

// waitLine blocks until stream has logged at least n lines and returns them.
func (h *harness) waitLines(stream string, n int) []string {
	h.t.Helper()
	deadline := time.After(testTimeout)
	for {
		if l := h.lines(stream); len(l) >= n {
			return l
		}
		select {
		case <-h.wrote:
		case <-deadline:
			h.t.Fatalf("got %q on %s, want %d lines", h.lines(stream), stream, n)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.live()
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("atoi(%q): %v", s, err)
	}
	return n
}

func killPid(pid int) { syscall.Kill(pid, syscall.SIGKILL) }
