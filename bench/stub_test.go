//go:build bench

package bench

import "testing"

func runHerd(t *testing.T, s settings, wl *Workload)       { t.Skip("todo") }
func runIdle(t *testing.T, s settings, wl *Workload)       { t.Skip("todo") }
func runLoad(t *testing.T, s settings, wl *Workload)       { t.Skip("todo") }
func runRedisCalls(t *testing.T, s settings, wl *Workload) { t.Skip("todo") }
