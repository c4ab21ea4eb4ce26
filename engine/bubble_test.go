package engine

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/fakeproc"
)

// Tests that need no real process and no Redis run inside a testing/synctest
// bubble: the memory backend, fakeproc as the starter (its "sleep D" runs on
// the bubble's clock), no http.listen (real network I/O does not count as
// durably blocked). The bubble's clock starts at midnight, so with
// "* * * * * *" jobs the slots are whole seconds after the engine started.
// The tests look at the engine only at instants where no engine timer is
// due (a quarter second past a slot, or between watchdog probes), so the
// order in which goroutines woken at one instant run never matters.

// startInBubble runs an engine on cfg inside the current bubble (Start
// defaults to fakeproc.Start, ExitNow to failing the test) until ctx ends or
// a signal stops it. It checks that READY=1 is the first state sent once
// the bubble is idle. A cleanup stops the engine and waits for Run, so that
// a failed test does not leave the bubble's goroutines blocked.
func startInBubble(t *testing.T, ctx context.Context, cfg *config.Config, opts Options) *testEngine {
	t.Helper()
	if cfg.Lock.Backend != "memory" || cfg.HTTP.Listen != "" {
		t.Fatalf("bubble test config: lock.backend %q, http.listen %q; want memory and none",
			cfg.Lock.Backend, cfg.HTTP.Listen)
	}
	if opts.Start == nil {
		opts.Start = fakeproc.Start
	}
	if opts.ExitNow == nil {
		opts.ExitNow = func() { t.Error("ExitNow called") }
	}
	ctx, cancel := context.WithCancel(ctx)
	te := runEngine(t, ctx, cfg, opts)
	t.Cleanup(func() {
		cancel()
		<-te.done
	})
	synctest.Wait()
	if states := te.notes.snapshot(); len(states) == 0 || !strings.HasPrefix(states[0], "READY=1") {
		t.Fatalf("states once the engine is idle: got %q, want READY=1 first", states)
	}
	return te
}

// advance moves the bubble's clock on by d, then waits until every
// goroutine of the bubble is durably blocked: whatever was due by then has
// happened.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// returned reports whether Run has returned.
func (te *testEngine) returned() bool {
	select {
	case <-te.done:
		return true
	default:
		return false
	}
}

// stuckClock is an Options.Now that can be made to hang: while stuck, each
// call blocks on a channel (durably blocked, for synctest.Wait) until
// unstick. With the memory backend and no catch-up window only the ticker
// loop reads Options.Now, so sticking the clock sticks the ticker loop the
// next time it wakes, with no test hook in the engine.
type stuckClock struct {
	mu      sync.Mutex
	gate    chan struct{} // nil: not stuck; closed by unstick
	waiting int           // calls blocked on gate
}

func (c *stuckClock) now() time.Time {
	c.mu.Lock()
	gate := c.gate
	if gate != nil {
		c.waiting++
	}
	c.mu.Unlock()
	if gate != nil {
		<-gate
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
	}
	return time.Now()
}

func (c *stuckClock) stick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate == nil {
		c.gate = make(chan struct{})
	}
}

func (c *stuckClock) unstick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
}

func (c *stuckClock) blocked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// reloadFromFile is an Options.Reload that loads path like main does.
func reloadFromFile(path string) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		return config.Load(path, config.Options{Purpose: config.ForStart, Hostname: "test", Euid: os.Geteuid()})
	}
}
