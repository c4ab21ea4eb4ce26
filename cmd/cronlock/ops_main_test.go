package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind:
// `cronlock run` starts a job actor, a lease and Redis clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
