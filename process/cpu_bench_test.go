package process

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the user plus system CPU time this process has used so far
// (getrusage(2) RUSAGE_SELF: the daemon's own work, not its children's).
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunCPU measures the daemon-side CPU time of one Start+Wait
// (cpu-us/op), for a command that leaves nothing behind and for commands
// whose group outlives the leader: a background sleep that SIGTERM ends,
// and one that ignores SIGTERM and so keeps the group alive for 0.2 s
// after the leader exited (kill_grace is 10 s).
func BenchmarkRunCPU(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"exit", `exit 0`},
		{"background", `sleep 0.2 & exit 0`},
		{"background-ignoring-TERM", `trap '' TERM; sleep 0.2 & exit 0`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			spec := Spec{Shell: "/bin/sh", Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
				Command: bc.cmd, KillGrace: 10 * time.Second}
			cpu0 := cpuTime(b)
			for b.Loop() {
				p, err := Start(spec)
				if err != nil {
					b.Fatal(err)
				}
				if res := p.Wait(); res.ExitCode != 0 || res.Err != nil {
					b.Fatalf("got exit %d err %v", res.ExitCode, res.Err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}
