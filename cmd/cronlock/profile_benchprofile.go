//go:build benchprofile

package main

// A profiling build for the bench driver (README.md, "Performance"):
// `go build -tags benchprofile` gives a daemon that, when BENCHPROFILE_DIR
// is set, records a CPU profile of its first BENCHPROFILE_SECONDS (default
// 10, or until its first SIGTERM or SIGINT) and then writes cpu-PID.pprof and allocs-PID.pprof into that
// directory, and memstats-PID.txt (runtime.MemStats, one field a line)
// at the same time. Never part of a release build.

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
)

func init() {
	dir := os.Getenv("BENCHPROFILE_DIR")
	if dir == "" {
		return
	}
	secs, err := strconv.Atoi(os.Getenv("BENCHPROFILE_SECONDS"))
	if err != nil || secs <= 0 {
		secs = 10
	}
	name := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, os.Getpid())) }
	// BENCHPROFILE_HZ raises the sampling rate above pprof's 100 Hz (a
	// run costs a few 100 µs: at 100 Hz a 10 s profile has too few samples
	// to split it). StartCPUProfile then warns once on stderr that the rate
	// was already set; the set rate stays.
	if hz, err := strconv.Atoi(os.Getenv("BENCHPROFILE_HZ")); err == nil && hz > 0 {
		runtime.SetCPUProfileRate(hz)
	}
	f, err := os.Create(name("cpu"))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchprofile:", err)
		return
	}
	// The profile ends on its own, or at the first SIGTERM or SIGINT (the
	// daemon's own handler gets the signal too and shuts down).
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-sig:
		}
		signal.Stop(sig)
		pprof.StopCPUProfile()
		f.Close()
		a, err := os.Create(name("allocs"))
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchprofile:", err)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("memstats-%d.txt", os.Getpid())), fmt.Appendf(nil,
			"HeapAlloc %d\nHeapInuse %d\nHeapIdle %d\nHeapReleased %d\nStackInuse %d\nMSpanInuse %d\nGCSys %d\nOtherSys %d\nSys %d\nNumGC %d\nGoroutines %d\n",
			m.HeapAlloc, m.HeapInuse, m.HeapIdle, m.HeapReleased, m.StackInuse, m.MSpanInuse, m.GCSys, m.OtherSys, m.Sys, m.NumGC, runtime.NumGoroutine()), 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchprofile:", err)
		}
	}()
}
