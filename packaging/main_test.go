package packaging

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain removes what buildDir built and fails the package if a test
// leaves goroutines behind (TestStarterConfig_DaemonStartsAndStops reads
// the daemon's stderr in one).
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
