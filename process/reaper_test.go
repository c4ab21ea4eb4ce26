package process

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitExit receives a leader's status from the reaper, or fails the test.
func waitExit(t *testing.T, ch <-chan exitStatus) exitStatus {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(testTimeout):
		t.Fatalf("no exit status from the reaper within %v", testTimeout)
		return exitStatus{}
	}
}

// The fork lock is what keeps a child that exits at once from being reaped
// (and, adopting, discarded as an orphan) before it is registered: here the
// child is a zombie and a pass is requested while Start still holds it.
func TestReaper_ChildExitingBeforeRegistration(t *testing.T) {
	for _, adopting := range []bool{true, false} {
		t.Run(fmt.Sprintf("adopting=%v", adopting), func(t *testing.T) {
			if !adopting {
				notAdopting(t)
			}
			_, ch, err := children.startChild("/bin/sh", []string{"/bin/sh", "-c", "exit 5"}, &syscall.ProcAttr{}, func(pid int) {
				deadline := time.Now().Add(testTimeout)
				// Gone from /proc would mean reaped by a pass: the test fails below.
				for st, ok := readStat(pid); ok && st.live(); st, ok = readStat(pid) {
					if time.Now().After(deadline) {
						t.Errorf("child %d did not exit", pid)
						return
					}
					time.Sleep(time.Millisecond) // the child's exit is not ours to signal
				}
				children.poke() // a pass is due now; it must wait for the lock
			})
			if err != nil {
				t.Fatal(err)
			}
			if st := waitExit(t, ch); st.err != nil || !st.ws.Exited() || st.ws.ExitStatus() != 5 {
				t.Errorf("got status %v err %v, want exit 5", st.ws, st.err)
			}
		})
	}
}

// An orphan re-parented to the subreaper is reaped and discarded: no
// zombie stays behind.
func TestReaper_AdoptedOrphanIsReaped(t *testing.T) {
	h, spec := newHarness(t)
	// The grandchild leaves the run's group and session (setsid), so that
	// the run ends without killing it; its parent exits, so it is an
	// orphan. It waits for its pid to be printed before it exits.
	spec.Command = `setsid sh -c 'sleep 0.3' </dev/null >/dev/null 2>&1 & echo $!`
	before := children.orphansReaped()
	res := h.wait(h.start(spec))
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("got exit %d err %v", res.ExitCode, res.Err)
	}
	pid := atoi(t, h.lines("stdout")[0])
	t.Cleanup(func() { killPid(pid) })
	if st, ok := readStat(pid); ok && st.ppid != os.Getpid() {
		t.Fatalf("orphan %d has parent %d, want this process %d (child subreaper)", pid, st.ppid, os.Getpid())
	}
	deadline := time.Now().Add(testTimeout)
	for {
		_, exists := readStat(pid)
		if !exists {
			break // reaped: not even a zombie
		}
		if time.Now().After(deadline) {
			st, _ := readStat(pid)
			t.Fatalf("orphan %d still in the process table (state %c) after %v", pid, st.state, testTimeout)
		}
		time.Sleep(10 * time.Millisecond) // the orphan's own sleep decides when
	}
	// The pass that reaped it counts it after wait4 returned: the pid can
	// be gone from /proc a moment before the count.
	for children.orphansReaped()-before < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := children.orphansReaped() - before; got < 1 {
		t.Errorf("got %d orphans reaped, want at least 1", got)
	}
}

// Not adopting, the reaper waits only for the leaders it started: a child
// that os/exec waits for keeps its exit status.
func TestReaper_NotAdoptingLeavesOtherChildren(t *testing.T) {
	notAdopting(t)
	h, spec := newHarness(t)
	spec.Command = "sleep 0.1; exit 6"
	p := h.start(spec)
	other := exec.Command("/bin/sh", "-c", "sleep 0.05; exit 4")
	if err := other.Run(); err == nil || other.ProcessState.ExitCode() != 4 {
		t.Errorf("os/exec child: got %v (exit %d), want exit 4", err, other.ProcessState.ExitCode())
	}
	if res := h.wait(p); res.ExitCode != 6 || res.Err != nil {
		t.Errorf("got exit %d err %v, want 6 nil", res.ExitCode, res.Err)
	}
}

// Not adopting, a group member that outlives the leader is re-parented to
// init and its end reaches us by no event: the re-check still ends the run.
func TestProc_NotAdoptingGroupMemberIsWaitedFor(t *testing.T) {
	notAdopting(t)
	h, spec := newHarness(t)
	spec.KillGrace = time.Hour
	spec.Command = `trap '' TERM; sleep 0.3 & echo $!`
	t0 := time.Now()
	res := h.wait(h.start(spec))
	took := time.Since(t0)
	pid := atoi(t, h.lines("stdout")[0])
	if res.ExitCode != 0 || res.Err != nil || alive(pid) {
		t.Errorf("got exit %d err %v, member alive %v; want 0 nil false", res.ExitCode, res.Err, alive(pid))
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("run took %v, want the member's 0.3 s plus at most a re-check", took)
	}
}

// Many runs at once, each leaving a member that outlives its leader: every
// exit code arrives at its own Proc and every group is waited for.
func TestReaper_ManyConcurrentRuns(t *testing.T) {
	const n = 40
	h, spec := newHarness(t)
	var wg sync.WaitGroup
	results := make([]Result, n)
	pgids := make([]int, n)
	for i := range n {
		s := spec
		s.Command = `trap '' TERM; sleep 0.1 & exit ` + strconv.Itoa(i)
		p := h.start(s)
		pgids[i] = p.Pid()
		wg.Go(func() { results[i] = h.wait(p) })
	}
	wg.Wait()
	for i, res := range results {
		if res.ExitCode != i || res.Err != nil {
			t.Errorf("run %d: got exit %d err %v, want %d nil", i, res.ExitCode, res.Err, i)
		}
		if !groupGone(pgids[i]) {
			t.Errorf("run %d: process group %d still exists after Wait", i, pgids[i])
		}
		if d := res.Finished.Sub(res.Started); d > time.Second {
			t.Errorf("run %d: leader took %v to exit", i, d)
		}
	}
}

// The reaper's goroutine runs only while it has something to wait for.
func TestReaper_StopsWhenIdle(t *testing.T) {
	notAdopting(t)
	h, spec := newHarness(t)
	spec.Command = "exit 0"
	h.wait(h.start(spec))
	deadline := time.Now().Add(testTimeout)
	for {
		children.mu.Lock()
		running := children.running
		children.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("reaper goroutine still running with no leader registered and no adopter")
		}
		time.Sleep(time.Millisecond) // its last pass is asynchronous
	}
}
