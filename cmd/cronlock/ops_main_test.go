package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind (STYLE.md
// 19): `cronlock run` starts a lease actor and Redis clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
