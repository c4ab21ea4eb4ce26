package process

import (
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

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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

// alive reports whether pid exists and is not a zombie (PID 1 may not reap).
func alive(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
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
