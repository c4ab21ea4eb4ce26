package redistest

import (
	"os"
	"testing"
)

// TopologiesEnv names the environment variable that enables the heavy
// failover tests (Sentinel and Cluster failovers with daemons): `make
// test-topologies` sets it, and .ci/run runs that target after `make test`.
// It does not start with CRONLOCK_: the daemons the tests start would warn
// about a CRONLOCK_ variable that is no setting.
const TopologiesEnv = "TEST_TOPOLOGIES"

// RequireTopologies skips the test, saying how to run it, unless
// TEST_TOPOLOGIES=1: the failover tests take tens of seconds and
// stay out of `make test`'s time budget.
func RequireTopologies(t testing.TB) {
	t.Helper()
	if os.Getenv(TopologiesEnv) != "1" {
		t.Skipf("a failover test: run it with `make test-topologies` (%s=1); .ci/run does", TopologiesEnv)
	}
}
