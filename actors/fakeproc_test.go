package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/cronlock/cronlock/process"
)

// fakeProc stands in for a process inside synctest bubbles, where a real
// child would keep goroutines in syscalls and stop the fake clock. Its
// command language: "sleep D" (a Go duration, then exit 0) or "exit N".
// Terminate ends it at once with exit code -1, like a killed process.
type fakeProc struct {
	started time.Time
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	res     process.Result
	term    chan struct{}
}

func fakeStart(s process.Spec) (Proc, error) {
	var d time.Duration
	var code int
	if _, err := fmt.Sscanf(s.Command, "exit %d", &code); err != nil {
		var ds string
		if _, err := fmt.Sscanf(s.Command, "sleep %s", &ds); err != nil {
			return nil, fmt.Errorf("fakeStart: unknown command %q", s.Command)
		}
		if d, err = time.ParseDuration(ds); err != nil {
			return nil, err
		}
	}
	p := &fakeProc{started: time.Now(), done: make(chan struct{}), term: make(chan struct{})}
	go p.run(d, code)
	return p, nil
}

func (p *fakeProc) run(d time.Duration, code int) {
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

func (p *fakeProc) Pid() int              { return 1 }
func (p *fakeProc) Started() time.Time    { return p.started }
func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Terminate(time.Duration) {
	p.once.Do(func() { close(p.term) })
}
func (p *fakeProc) Wait() process.Result {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}
