//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cronlockBin and floorBin are the binaries TestMain builds once.
var cronlockBin, floorBin string

// TestMain builds cmd/cronlock (as `make build` does, without -race: the
// daemon is what is measured) and bench/floor into a temporary directory.
func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cronlock-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cronlockBin, floorBin = filepath.Join(dir, "cronlock"), filepath.Join(dir, "floor")
	// CRONLOCK_BENCH_PROFILE=DIR: the daemons are the profiling build
	// (cmd/cronlock/profile_benchprofile.go) and write their profiles to DIR.
	var tags []string
	if dir := os.Getenv("CRONLOCK_BENCH_PROFILE"); dir != "" {
		tags = []string{"-tags", "benchprofile"}
	}
	for bin, pkg := range map[string]string{cronlockBin: "github.com/cronlock/cronlock/cmd/cronlock",
		floorBin: "github.com/cronlock/cronlock/bench/floor"} {
		build := exec.Command("go", append(append([]string{"build", "-trimpath"}, tags...), "-o", bin, pkg)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: build", pkg+":", err)
			return 1
		}
	}
	return m.Run()
}
