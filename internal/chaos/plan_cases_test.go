package chaos

import (
	"reflect"
	"testing"
	"time"
)

// TestNewPlan: a seed always draws the same plan; the plan keeps its
// rules (one fault at a time per target, never every node at once, within
// the fault span); and over many seeds every kind of fault is drawn.
func TestNewPlan(t *testing.T) {
	if a, b := NewPlan(42, 120), NewPlan(42, 120); !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 42 drew two plans:\n%s\n%s", a, b)
	}
	if a, b := NewPlan(42, 120), NewPlan(43, 120); reflect.DeepEqual(a.Faults, b.Faults) {
		t.Errorf("seeds 42 and 43 drew the same faults")
	}
	seen := map[FaultKind]int{}
	for seed := uint64(0); seed < 200; seed++ {
		p := NewPlan(seed, 45+int(seed%4)*30)
		if n := len(p.Nodes); n < 3 || n > 5 {
			t.Fatalf("seed %d: %d nodes", seed, n)
		}
		end := time.Duration(p.Seconds)*time.Second - p.Quiet
		for i, f := range p.Faults {
			seen[f.Kind]++
			if f.At < p.Warmup || f.At+f.Dur > end {
				t.Errorf("seed %d: fault %s outside [%v, %v]", seed, f, p.Warmup, end)
			}
			if i > 0 && f.At < p.Faults[i-1].At {
				t.Errorf("seed %d: faults out of order", seed)
			}
			down := map[string]bool{}
			for _, g := range p.Faults[:i] {
				if g.Target == f.Target && g.At+g.Dur > f.At {
					t.Errorf("seed %d: %s starts while %s is on", seed, f, g)
				}
				if g.Target != RedisTarget && g.At+g.Dur > f.At {
					down[g.Target] = true
				}
			}
			if f.Target != RedisTarget {
				down[f.Target] = true
			}
			if len(down) >= len(p.Nodes) {
				t.Errorf("seed %d: at %s every node is faulted", seed, f)
			}
		}
	}
	for _, k := range kinds {
		if seen[k.kind] == 0 {
			t.Errorf("no %s fault in 200 seeds", k.kind)
		}
	}
	t.Logf("200 seeds: %v; seed 1 at 120 s:\n%s", seen, NewPlan(1, 120))
}
