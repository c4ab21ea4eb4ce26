package actors_test

import (
	"context"
	"github.com/cronlock/cronlock/ledger/memory"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	. "github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/process"
	"github.com/cronlock/cronlock/schedule"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkRunPath is one scheduled run from fire to the result, the path
// the daemon takes for every slot it wins: Fire into the job actor, the
// claim (memory backend), the environment, process.Start of `exit 0`, the
// wait, the release with the history record, the metrics and the result.
// The logger is the daemon's JSON encoder at info (to io.Discard), so the
// "run started" and "run finished" lines are encoded as in production.
// cpu-us/op is this process's user+system CPU per run (getrusage; the
// child's own time is not in it); allocs/op and B/op come from -benchmem.
//
//	go test -run '^$' -bench BenchmarkRunPath -benchmem ./actors
//
// The benchmark adopts orphans as the daemon does (process.AdoptOrphans):
// without it the reaper's goroutine stops after every run and restarts
// its SIGCHLD subscription for the next one, whose signal.Stop spins in
// runtime.Gosched and would be most of what is measured.
func BenchmarkRunPath(b *testing.B) {
	release, err := process.AdoptOrphans()
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	results := make(chan RunFinished, 1)
	cfg := benchJob(b)
	job := runBenchJob(b, cfg, log, memory.NewMemory(), results)

	slot := time.Now().Truncate(time.Second).Add(-benchMaxSkew / 2) // 43,200 iterations before a slot comes after now
	cpu0 := cpuSelf(b)
	for b.Loop() {
		slot = slot.Add(time.Second)
		job.Inbox() <- Fire{Job: cfg.Name, Slot: slot}
		if fin := <-results; fin.Result != ledger.ResultSuccess {
			b.Fatalf("run: got result %q (exit %d), want success", fin.Result, fin.ExitCode)
		}
	}
	b.ReportMetric(float64((cpuSelf(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// runBenchJob runs a job actor for cfg with locker, logging to log and
// sending results to results, until the benchmark ends (a cleanup stops
// it and waits).
func runBenchJob(b *testing.B, cfg config.Job, log *zap.Logger, locker ledger.Locker, results chan RunFinished) *Job {
	kill := make(chan struct{})
	metrics := NewMetrics(nil)
	metrics.InitJob(cfg.Name)
	job := NewJob(cfg, JobDeps{MaxSkew: benchMaxSkew, Log: log, Metrics: metrics, Locker: locker, NodeID: "n1",
		Results: results, Phantoms: make(chan Phantom, 10), Kill: kill,
		Environ: JobEnviron(os.Environ()),
		// As the daemon has them (engine.New; no peers: the claim order ranks this node first).
		Load: cluster.NewLoad(0, true, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	b.Cleanup(func() { cancel(); close(kill); <-done })
	return job
}

// benchMaxSkew and benchLockTTL make a scheduled claim's answer window
// (docs/protocol.md, R2) a day long, so that a benchmark can fire a
// past slot for each of its iterations, many a second, and each is
// claimed and run as a slot of now would be (the claim windows are
// checked, the fork does not wait for a slot in the past).
const (
	benchMaxSkew = 24 * time.Hour
	benchLockTTL = 24 * time.Hour
)

// benchJob is a per-second job running `exit 0`, with the defaults the
// config gives (overlap skip: the run takes a lease) but lock_ttl
// benchLockTTL.
func benchJob(b *testing.B) config.Job {
	sched, err := schedule.Parse("* * * * * *", time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	return config.Job{Name: "bench", Schedule: "* * * * * *", Command: "exit 0", Shell: "/bin/sh",
		KillGrace: 2 * time.Second, LockTTL: benchLockTTL, Enabled: true, InheritEnv: true,
		Overlap: config.OverlapSkip, OnLockLost: config.LockLostKill, RetryBackoff: time.Second,
		HookTimeout: time.Minute, Location: time.UTC, Sched: sched}
}

// cpuSelf is this process's user+system CPU time so far.
func cpuSelf(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLosingClaim is one scheduled fire whose claim finds the slot
// claimed elsewhere, the path two of three nodes take for every slot of
// a 3-node cluster: Fire into the job actor, the run's goroutine, the
// claim (a locker that answers ClaimedElsewhere at once, so the Redis
// round trip is not in it), the skip at debug level (not encoded at the
// daemon's info) and the run's end. cpu-us/op as for BenchmarkRunPath.
//
//	go test -run '^$' -bench BenchmarkLosingClaim -benchmem ./actors
func BenchmarkLosingClaim(b *testing.B) {
	enc := zap.NewProductionEncoderConfig()
	skipped := make(chan struct{}, 1)
	core := &signalCore{Core: zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(io.Discard), zapcore.InfoLevel),
		msg: "slot skipped", ch: skipped}
	log := zap.New(core)
	cfg := benchJob(b)
	job := runBenchJob(b, cfg, log, elsewhere{}, make(chan RunFinished, 1))

	slot := time.Now().Truncate(time.Second).Add(-benchMaxSkew / 2) // 43,200 iterations before a slot comes after now
	cpu0 := cpuSelf(b)
	for b.Loop() {
		slot = slot.Add(time.Second)
		job.Inbox() <- Fire{Job: cfg.Name, Slot: slot}
		<-skipped
	}
	b.ReportMetric(float64((cpuSelf(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// elsewhere is a Locker whose every claim finds the slot claimed by
// another node.
type elsewhere struct{ ledger.Locker }

func (elsewhere) Claim(context.Context, ledger.ClaimRequest) (ledger.Claim, error) {
	return ledger.Claim{Outcome: ledger.ClaimedElsewhere}, nil
}

// signalCore is a zapcore.Core that signals ch for each entry with
// message msg, at any level, when it is checked, and writes none of them.
type signalCore struct {
	zapcore.Core
	msg string
	ch  chan struct{}
}

func (c *signalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == c.msg {
		c.ch <- struct{}{} // signalled here: no entry is built for it, as the daemon at info builds none
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c *signalCore) Enabled(l zapcore.Level) bool { return true }

func (c *signalCore) With(f []zapcore.Field) zapcore.Core {
	return &signalCore{Core: c.Core.With(f), msg: c.msg, ch: c.ch}
}

func (c *signalCore) Write(e zapcore.Entry, f []zapcore.Field) error { return c.Core.Write(e, f) }
