// Package fakeproc is a stand-in for started processes inside
// testing/synctest bubbles, where a real child would keep goroutines in
// syscalls and stop the fake clock. Pass Start as actors.Starter (in
// actors.JobDeps, actors.NewHookRunner or engine.Options.Start).
package fakeproc

import (
	"fmt"
	"sync"
	"time"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/process"
)

// proc is a fake started process.
type proc struct {
	started time.Time
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	res     process.Result
	term    chan struct{}
}

// Start "starts" s.Command, which must be "sleep D" (a Go duration, then
// exit 0) or "exit N"; anything else is an error, like a command that
// cannot start. Terminate ends it at once with exit code -1, like a killed
// process. Its timers run on the bubble's clock.
func Start(s process.Spec) (actors.Proc, error) {
	var d time.Duration
	var code int
	if _, err := fmt.Sscanf(s.Command, "exit %d", &code); err != nil {
		var ds string
		if _, err := fmt.Sscanf(s.Command, "sleep %s", &ds); err != nil {
			return nil, fmt.Errorf("fakeproc: unknown command %q", s.Command)
		}
		if d, err = time.ParseDuration(ds); err != nil {
			return nil, err
		}
	}
	p := &proc{started: time.Now(), done: make(chan struct{}), term: make(chan struct{})}
	go p.run(d, code)
	return p, nil
}

func (p *proc) run(d time.Duration, code int) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.term:
		code = -1
	}
	p.mu.Lock()
	p.res = process.Result{ExitCode: code, Started: p.started, Finished: time.Now()}
	p.mu.Unlock()
	close(p.done)
}

func (p *proc) Pid() int              { return 1 }
func (p *proc) Group() process.Group  { return process.Group{} } // no real group: never recorded to kill
func (p *proc) Started() time.Time    { return p.started }
func (p *proc) Done() <-chan struct{} { return p.done }
func (p *proc) Terminate(time.Duration) {
	p.once.Do(func() { close(p.term) })
}
func (p *proc) Wait() process.Result {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}
