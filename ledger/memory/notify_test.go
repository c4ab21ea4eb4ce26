package memory

import (
	"testing"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/ledgertest"
)

var _ ledger.OutcomeRecorder = (*Memory)(nil)

func TestNotify_Transitions(t *testing.T) {
	ledgertest.OutcomeTransitions(t, NewMemory())
}
