package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := Percentile(v, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if v[0] != 5 {
		t.Errorf("Percentile sorted its input: %v", v)
	}
	if got := Percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{math.NaN(), 7, 1}, 4},
		{[]float64{9}, 9},
	} {
		if got := Median(tc.v); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := Median([]float64{math.NaN()}); !math.IsNaN(got) {
		t.Errorf("Median(NaN) = %v, want NaN", got)
	}
}

func TestPairRatios_MedianOfPairsNotRatioOfMedians(t *testing.T) {
	floor := []float64{10, 20, 40}
	daemon := []float64{11, 30, 40} // ratios 1.1, 1.5, 1.0
	m := Metric{Floor: floor, Daemon: daemon, Target: &Target{Of: OfRatio, Max: 1.10}}
	m.Evaluate()
	if m.Ratio != 1.1 {
		t.Errorf("ratio = %v, want 1.1 (median of 1.1, 1.5, 1.0)", m.Ratio)
	}
	if m.FloorMedian != 20 || m.DaemonMedian != 30 {
		t.Errorf("medians = %v, %v, want 20, 30", m.FloorMedian, m.DaemonMedian)
	}
	if m.Verdict != Pass {
		t.Errorf("verdict = %q, want PASS (1.1 ≤ 1.10)", m.Verdict)
	}
	if r := PairRatios([]float64{0, 2}, []float64{1, 1}); !math.IsNaN(r[0]) || r[1] != 0.5 {
		t.Errorf("PairRatios with a zero floor = %v, want [NaN 0.5]", r)
	}
}

func TestEvaluate_Verdicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		daemon []float64
		target Target
		want   string
	}{
		{"under max", []float64{0.5, 0.9, 2}, Target{Of: OfDaemon, Max: 1}, Pass},
		{"over max", []float64{1.5, 0.9, 2}, Target{Of: OfDaemon, Max: 1}, Fail},
		{"exact", []float64{3, 3, 3}, Target{Of: OfDaemon, Max: 3, Exact: true}, Pass},
		{"not exact", []float64{3, 3.02, 3.02}, Target{Of: OfDaemon, Max: 3, Exact: true}, Fail},
		{"nothing measured", []float64{math.NaN()}, Target{Of: OfDaemon, Max: 1}, Fail},
		{"ratio without floor", []float64{1}, Target{Of: OfRatio, Max: 1}, Fail},
	} {
		m := Metric{Daemon: tc.daemon, Target: &tc.target}
		m.Evaluate()
		if m.Verdict != tc.want {
			t.Errorf("%s: verdict = %q, want %q", tc.name, m.Verdict, tc.want)
		}
	}
	m := Metric{Daemon: []float64{1}}
	m.Evaluate()
	if m.Verdict != NoGoal {
		t.Errorf("no target: verdict = %q, want none", m.Verdict)
	}
}

func TestResults_TableAndJSON(t *testing.T) {
	w := &Workload{Name: "3x50"}
	w.Metric("job start p50", "ms", &Target{Of: OfRatio, Max: 1.1}).Floor = []float64{20, 22, 21}
	w.Metric("job start p50", "", nil).Daemon = []float64{30, 33, 31.5}
	w.Metric("runs", "", nil).Daemon = []float64{900, 900, 900}
	w.Runs = []Run{{Pair: 0, Kind: KindFloor, Load: Load{Seconds: 6, OthersCores: 0.5}}}
	r := Results{Started: time.Unix(0, 0), Workloads: []*Workload{w, {Name: "idle", Err: "daemon did not start"}}}
	if failed := r.Evaluate(); failed != 2 {
		t.Errorf("failed = %d, want 2 (the ratio 1.5 and the workload with an error)", failed)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 3x50 | job start p50 (ms) | 21 | 31.5 | 1.50× | ≤ 1.10× | FAIL |",
		"| 3x50 | runs | - | 900 | - |  |  |",
		"| idle | not measured: daemon did not start |",
		"| 3x50 | 1 | floor | 6.0 | 0.00 | 0.00 | 0.50 polluted |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal with NaN values: %v", err)
	}
	if !strings.Contains(string(data), `"ratio":null`) || !strings.Contains(string(data), `"ratio":1.5`) {
		t.Errorf("JSON lacks a null ratio (no floor) or the 1.5 ratio: %s", data)
	}
}

func TestParseProcStatBusy(t *testing.T) {
	stat := []byte("cpu  100 5 50 9000 40 3 2 1 0 0\ncpu0 50 2 25 4500 20 1 1 0 0 0\n")
	got, err := parseProcStatBusy(stat)
	if want := 161 * 10 * time.Millisecond; err != nil || got != want {
		t.Errorf("busy = %v, %v, want %v (user+nice+system+irq+softirq+steal ticks)", got, err, want)
	}
	if _, err := parseProcStatBusy([]byte("intr 1 2 3\n")); err == nil {
		t.Error("a first line that is not the cpu line: got no error")
	}
}

func TestBetween(t *testing.T) {
	a := Sample{At: time.Unix(100, 0), Busy: 10 * time.Second, Ours: 2 * time.Second}
	b := Sample{At: time.Unix(104, 0), Busy: 16 * time.Second, Ours: 5 * time.Second, Load1: 1.5}
	l := Between(a, b)
	if l.Seconds != 4 || l.OursCores != 0.75 || l.OthersCores != 0.75 || l.Load1 != 1.5 {
		t.Errorf("Between = %+v, want 4 s, ours 0.75, others 0.75, load 1.5", l)
	}
}

func TestParseStatTicksAndSchedstat(t *testing.T) {
	// The command name may hold spaces and parentheses: fields count from
	// its last ')'.
	stat := []byte("42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 9 0 1234 1000 200\n")
	if got, err := parseStatTicks(stat); err != nil || got != 100*time.Millisecond {
		t.Errorf("parseStatTicks = %v, %v, want 100ms (utime 7 + stime 3 ticks)", got, err)
	}
	if _, err := parseStatTicks([]byte("42 (x) S 1 2")); err == nil {
		t.Error("a short stat line: got no error")
	}
	if got, err := parseSchedstat([]byte("123456789 5000 17\n")); err != nil || got != 123456789*time.Nanosecond {
		t.Errorf("parseSchedstat = %v, %v, want 123.456789ms", got, err)
	}
	if _, err := parseSchedstat([]byte("x 1 2\n")); err == nil {
		t.Error("a schedstat line without a number: got no error")
	}
}

func TestCPUBetween(t *testing.T) {
	ms := time.Millisecond
	two := map[string]bool{"10": true, "11": true}
	for _, c := range []struct {
		name string
		a, b ProcCPU
		want time.Duration
	}{
		{"every thread still there: the precise sums", ProcCPU{1000 * ms, 1000 * ms, two}, ProcCPU{1093 * ms, 1100 * ms, map[string]bool{"10": true, "11": true, "12": true}}, 93 * ms},
		{"a thread exited and took its time with it: the ticks", ProcCPU{1000 * ms, 1000 * ms, two}, ProcCPU{1040 * ms, 1500 * ms, map[string]bool{"10": true}}, 500 * ms},
		{"no schedstat: the ticks", ProcCPU{1000 * ms, 1000 * ms, nil}, ProcCPU{1100 * ms, 1100 * ms, nil}, 100 * ms},
	} {
		if got := CPUBetween(c.a, c.b); got != c.want {
			t.Errorf("%s: CPUBetween = %v, want %v", c.name, got, c.want)
		}
	}
}

// ProcessCPU of this process: a thread's CPU is counted to the ns (not
// in 10 ms steps) and agrees with the ticks.
func TestProcessCPU_CountsThreads(t *testing.T) {
	a := readSelf(t)
	done := make(chan struct{})
	go spinCPU(100*time.Millisecond, done)
	<-done
	b := readSelf(t)
	precise, ticks := b.Precise-a.Precise, b.Ticks-a.Ticks
	// The ticks are utime and stime scaled to the precise total and kept
	// monotonic, each truncated to 10 ms: their difference strays a little
	// more than one tick.
	if slack := 20*time.Millisecond + ticks/10; precise < 100*time.Millisecond || precise > ticks+slack || precise < ticks-slack {
		t.Errorf("CPU between the readings: precise %v, ticks %v; want at least the 100ms spun, within %v of the ticks", precise, ticks, slack)
	}
	if a.Precise%(10*time.Millisecond) == 0 && b.Precise%(10*time.Millisecond) == 0 {
		t.Errorf("precise readings %v and %v are both whole ticks: not read from schedstat", a.Precise, b.Precise)
	}
	if got := CPUBetween(a, b); got != precise {
		t.Errorf("CPUBetween = %v, want the precise %v", got, precise)
	}
}

// A thread that used CPU and exited between two readings is no longer in
// /proc/PID/task: CPUBetween then takes the ticks, which kept its time.
func TestProcessCPU_ExitedThread(t *testing.T) {
	a := readSelf(t)
	done, tid := make(chan struct{}), make(chan int, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine (init keeps the main one)
		tid <- syscall.Gettid()
		spinCPU(200*time.Millisecond, done)
	}()
	<-done
	id := <-tid
	if id == os.Getpid() {
		t.Fatal("the spinning goroutine ran on the main thread, which init locked to the main goroutine")
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", id)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("thread %d still there 5 s after its locked goroutine ended", id)
		}
	}
	b := readSelf(t)
	precise, ticks := b.Precise-a.Precise, b.Ticks-a.Ticks
	if precise > ticks-150*time.Millisecond {
		t.Errorf("precise %v, ticks %v: want the precise sum to lack the exited thread's 200ms", precise, ticks)
	}
	if got := CPUBetween(a, b); got != ticks {
		t.Errorf("CPUBetween = %v, want the ticks %v", got, ticks)
	}
}

// The main goroutine keeps the main thread, which the runtime never ends:
// a goroutine that locks its thread and returns ends another one.
func init() { runtime.LockOSThread() }

// readSelf is ProcessCPU of this process; the test skips without
// schedstat.
func readSelf(t *testing.T) ProcCPU {
	t.Helper()
	c, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.tids == nil {
		t.Skip("no /proc/PID/task/TID/schedstat on this kernel: ProcessCPU falls back to the ticks")
	}
	return c
}

// spinCPU keeps its thread on a CPU until that thread has used d of CPU
// (its /proc/thread-self/schedstat), then closes done.
func spinCPU(d time.Duration, done chan<- struct{}) {
	runtime.LockOSThread() // thread-self stays this thread (calls nest: a caller's lock stays)
	defer runtime.UnlockOSThread()
	defer close(done)
	start := threadCPU()
	for threadCPU()-start < d {
		for range 100000 {
		}
	}
}

// threadCPU is the calling thread's time on CPU (0 when unreadable).
func threadCPU() time.Duration {
	data, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	ns, _ := parseSchedstat(data)
	return ns
}
