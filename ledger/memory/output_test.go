package memory

import (
	"testing"

	"github.com/cronlock/cronlock/ledger/ledgertest"
)

// TestOutput_Conformance runs the OutputStore cases in process.
func TestOutput_Conformance(t *testing.T) {
	ledgertest.RunOutput(t, NewOutput())
}

func TestHooks_Conformance(t *testing.T) {
	ledgertest.RunHooks(t, NewOutput())
}

func TestKeptBound_Conformance(t *testing.T) {
	ledgertest.RunKeptBound(t, NewOutput())
}
