package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is USER_HZ, the unit of /proc/stat's times (proc(5)); 100 on
// every Linux architecture cronlock builds for.
const userHZ = 100

// Sample is the machine's and this process's CPU use at one instant.
type Sample struct {
	At time.Time
	// Busy is the CPU time all processes of the machine have used since
	// boot: /proc/stat's first line, user+nice+system+irq+softirq+steal
	// (idle and iowait excluded).
	Busy time.Duration
	// Ours is this process's CPU time plus that of its children it has
	// waited for (getrusage RUSAGE_SELF + RUSAGE_CHILDREN), which includes
	// their waited-for descendants: the floor program, the daemons, Redis
	// and every command they started, once they have been waited for.
	Ours time.Duration
	// Load1 is the 1-minute load average (/proc/loadavg).
	Load1 float64
}

// Take reads a Sample. It returns an error when /proc cannot be read.
func Take() (Sample, error) {
	s := Sample{At: time.Now()}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, fmt.Errorf("load sample: %w", err)
	}
	if s.Busy, err = parseProcStatBusy(stat); err != nil {
		return s, fmt.Errorf("load sample: %w", err)
	}
	la, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return s, fmt.Errorf("load sample: %w", err)
	}
	if s.Load1, err = strconv.ParseFloat(string(bytes.Fields(la)[0]), 64); err != nil {
		return s, fmt.Errorf("load sample: /proc/loadavg: %w", err)
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return s, fmt.Errorf("load sample: getrusage: %w", err)
		}
		s.Ours += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s, nil
}

// parseProcStatBusy returns the busy time of /proc/stat's aggregate "cpu"
// line.
func parseProcStatBusy(stat []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the aggregate cpu line", line)
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, line, err)
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}

// Load is the machine's load over one run, from two Samples.
type Load struct {
	Seconds float64 `json:"seconds"` // wall time of the run
	Load1   float64 `json:"load1"`   // 1-minute load average at the end
	// OursCores and OthersCores are the CPU time used by this run (this
	// process and the children it waited for) and by every other process
	// of the machine, divided by the wall time: 1.0 is one core busy.
	OursCores   float64 `json:"ours_cores"`
	OthersCores float64 `json:"others_cores"`
}

// Between is the load from a to b. The run's processes must all have been
// waited for before b was taken, or their CPU counts as the others'.
func Between(a, b Sample) Load {
	wall := b.At.Sub(a.At).Seconds()
	if wall <= 0 {
		return Load{Load1: b.Load1}
	}
	ours := (b.Ours - a.Ours).Seconds()
	others := (b.Busy - a.Busy).Seconds() - ours
	// /proc/stat counts in 10 ms ticks and rusage in µs: a quiet machine
	// can come out a tick below zero.
	return Load{Seconds: wall, Load1: b.Load1, OursCores: ours / wall, OthersCores: max(others, 0) / wall}
}

// Polluted is the others' share above which a run is marked in the table
// (a quarter of a core: on 2 cores that is enough to move a ratio by 10%).
const Polluted = 0.25

// ProcessCPU is the CPU time process pid has used so far, to the
// nanosecond where the kernel keeps it: the sum of the first field of
// /proc/PID/task/TID/schedstat (time on CPU, ns) over its threads, whose
// ids it keeps. A thread that has exited is no longer listed, so Ticks,
// the process's utime+stime of /proc/PID/stat (proc(5); USER_HZ ticks of
// 10 ms, exited threads included), comes with it for CPUBetween. Without
// schedstat files (a kernel without scheduler statistics), Precise is
// Ticks. It returns an error when /proc/PID cannot be read (the process
// is gone).
func ProcessCPU(pid int) (ProcCPU, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcCPU{}, err
	}
	ticks, err := parseStatTicks(stat)
	if err != nil {
		return ProcCPU{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	c := ProcCPU{Ticks: ticks, Precise: ticks}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, pid)); err != nil {
		return c, nil // no scheduler statistics on this kernel (the main thread lives as long as the process)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return c, nil
	}
	var sum time.Duration
	tids := make(map[string]bool, len(tasks))
	for _, tk := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, tk.Name()))
		if err != nil {
			continue // the thread exited meanwhile: not counted, not kept
		}
		ns, err := parseSchedstat(data)
		if err != nil {
			return c, fmt.Errorf("/proc/%d/task/%s/schedstat: %w", pid, tk.Name(), err)
		}
		sum += ns
		tids[tk.Name()] = true
	}
	c.Precise, c.tids = sum, tids
	return c, nil
}

// ProcCPU is one reading of ProcessCPU.
type ProcCPU struct {
	Precise time.Duration   // the threads' schedstat sum (Ticks without schedstat)
	Ticks   time.Duration   // utime+stime of /proc/PID/stat, 10 ms steps
	tids    map[string]bool // the threads summed in Precise; nil without schedstat
}

// CPUBetween is the CPU a process used from reading a to reading b: the
// difference of the precise sums when every thread of a is still in b,
// else (a thread exited between them, and its time went with it; or no
// schedstat) the difference of the ticks.
func CPUBetween(a, b ProcCPU) time.Duration {
	if a.tids == nil || b.tids == nil {
		return b.Ticks - a.Ticks
	}
	for tid := range a.tids {
		if !b.tids[tid] {
			return b.Ticks - a.Ticks
		}
	}
	return b.Precise - a.Precise
}

// parseStatTicks returns utime+stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name in parentheses may hold spaces,
// so fields are counted after its closing parenthesis.
func parseStatTicks(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	s, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q: not numbers", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / userHZ, nil
}

// parseSchedstat returns the first field of a schedstat line: time on
// CPU in ns (the kernel's sched-stats documentation).
func parseSchedstat(data []byte) (time.Duration, error) {
	f := bytes.Fields(data)
	if len(f) == 0 {
		return 0, fmt.Errorf("empty")
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time on CPU %q: %w", f[0], err)
	}
	return time.Duration(ns), nil
}
