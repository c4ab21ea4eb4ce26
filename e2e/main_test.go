package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the path of the cronlock binary built once by TestMain.
var binary string

// screenshotDir is $CRONLOCK_SCREENSHOTS, where TestDashboard writes its
// screenshots ("" = under its temporary directory).
var screenshotDir string

// TestMain builds cmd/cronlock once (without -race: the daemon is the
// subject, not the test's own goroutines) into a temporary directory, runs
// the tests and removes the directory. The tests start only subprocesses,
// which every test kills in its cleanup, so goleak is not needed here.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cronlock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "cronlock")
	build := exec.Command("go", "build", "-o", binary, "github.com/cronlock/cronlock/cmd/cronlock")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build cronlock:", err)
		return 1
	}
	// The daemons inherit the environment and warn about a CRONLOCK_
	// variable that is no setting: the dashboard test's screenshot
	// directory is taken out of it.
	screenshotDir = os.Getenv("CRONLOCK_SCREENSHOTS")
	os.Unsetenv("CRONLOCK_SCREENSHOTS")
	return m.Run()
}
