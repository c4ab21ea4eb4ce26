package memory

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines (the state file's writer).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
