package actors

import (
	"testing"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/ledger"
)

// TestTimingRelations checks the relations of this package's unexported
// timing constants with other packages' (the relations across packages
// that need no unexported name are in engine/timing_test.go, with the list
// of those derived in code). busyWait is 2 × cluster.MaxDelay by
// construction (capacity.go), so it is not checked against it here.
func TestTimingRelations(t *testing.T) {
	cfg, err := config.Parse([]byte("jobs:\n  - {name: j, schedule: '* * * * *', command: 'true'}\n"), "yaml",
		config.Options{Purpose: config.ForValidate, Hostname: "test"})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	window := ledger.AnswerWindow(cfg.Node.MaxClockSkew, cfg.Jobs[0].LockTTL, 0) // the defaults'
	for _, r := range []struct {
		relation string
		holds    bool
	}{
		{"cluster.MaxDelay + busyWait < the default answer window: a run that waited its rank and a place still claims while the slot can be claimed",
			cluster.MaxDelay+busyWait < window},
		{"auditLookBack < ledger.DefaultRetentionAge: the records a first audit looks back at are still kept",
			auditLookBack < ledger.DefaultRetentionAge},
	} {
		if !r.holds {
			t.Errorf("timing relation broken: %s", r.relation)
		}
	}
}
