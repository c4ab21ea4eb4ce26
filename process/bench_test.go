package process

import (
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// discardLogger encodes JSON like production (sampling off) into io.Discard.
func discardLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	return zap.New(core).With(zap.String("job", "bench"), zap.String("run_id", "3f1c"))
}

// floodLine is 100 bytes with its newline.
const floodLine = "cronlock benchmark line: the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrs"

// floodSpec prints n bytes of 100-byte lines on stdout.
func floodSpec(n int) Spec {
	return Spec{
		Shell:   "/bin/sh",
		Env:     []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Command: `yes '` + floodLine + `' | head -c ` + strconv.Itoa(n),
		Log:     discardLogger(),
	}
}

// runMeasuringHeap runs spec to the end, sampling HeapAlloc every 5 ms, and
// returns the largest growth in bytes over the heap before Start.
func runMeasuringHeap(tb testing.TB, spec Spec) (Result, uint64) {
	tb.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	p, err := Start(spec)
	if err != nil {
		tb.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-p.Done():
			done = true
		case <-tick.C:
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	return p.Wait(), peak - base
}

// TestProc_OutputMemoryBounded streams 10 MB (BenchmarkOutputHeap pushes
// 200 MB) and checks that the heap does not grow with the output.
func TestProc_OutputMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 10 MB")
	}
	const n = 10 << 20
	res, growth := runMeasuringHeap(t, floodSpec(n))
	t.Logf("streamed %d MB: max heap growth %.1f MB", n>>20, float64(growth)/(1<<20))
	if res.ExitCode != 0 || len(res.Tail) != DefaultTailSize {
		t.Errorf("got exit %d tail %d bytes, want 0 and %d", res.ExitCode, len(res.Tail), DefaultTailSize)
	}
	if growth > 16<<20 {
		t.Errorf("got heap growth %d bytes, want < 16 MiB", growth)
	}
}

// BenchmarkOutput pushes 50 MB of 100-byte lines through a production-like
// JSON logger; B/s is output throughput, allocs are the daemon's side only.
func BenchmarkOutput(b *testing.B) {
	const n = 50_000_000
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		p, err := Start(floodSpec(n))
		if err != nil {
			b.Fatal(err)
		}
		if res := p.Wait(); res.ExitCode != 0 || res.Err != nil {
			b.Fatalf("got exit %d err %v", res.ExitCode, res.Err)
		}
	}
	b.ReportMetric(float64(n)/float64(len(floodLine)+1), "lines/op")
}

// BenchmarkOutputHeap streams 200 MB per op and reports the largest heap
// growth seen while streaming.
func BenchmarkOutputHeap(b *testing.B) {
	const n = 200_000_000
	b.SetBytes(n)
	var worst uint64
	for b.Loop() {
		_, growth := runMeasuringHeap(b, floodSpec(n))
		worst = max(worst, growth)
	}
	b.ReportMetric(float64(worst)/(1<<20), "max-heap-growth-MB")
}
