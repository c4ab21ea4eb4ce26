//go:build bench

package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// runRedisCalls counts the top-level commands the server receives while 3
// nodes run 50 jobs a second (MONITOR from before the first node starts
// to after the last has stopped; commands called by scripts are dropped).
// Claims and finishes are counted by the slot they carry, over the slots
// every node fired; the others are counted per second.
func runRedisCalls(t *testing.T, s settings, wl *Workload) {
	const nodes, jobs = 3, 50
	a := take(t)
	srv := redistest.Start(t)
	mon := startMonitor(t, srv.Addr())
	ledger := filepath.Join(t.TempDir(), "daemon")
	cfg := writeConfig(t, map[string]any{"redis": map[string]any{"address": srv.Addr()},
		"jobs": jobsConfig(jobs, "* * * * * *", ledger)})
	t0 := time.Now()
	started := startNodes(t, cronlockBin, cfg, nodes)
	from := time.Now().Truncate(time.Second).Add(time.Second)
	end := from.Add(time.Duration(s.seconds(5)) * time.Second)
	sleepUntil(end)
	stopNodes(t, started)
	cmds := mon.stop(t)
	wall := time.Since(t0).Seconds()
	ledgerBytes := ledgerMemory(t, srv.Addr(), jobs)
	srv.Stop()
	wl.Runs = append(wl.Runs, Run{Kind: KindDaemon, Load: Between(a, take(t))})
	// The first slot is counted apart: its claims find the script not yet
	// loaded (EVALSHA answered NOSCRIPT, then EVAL).
	first, lo, hi := from.Unix(), from.Unix()+1, end.Unix()-1
	slots := float64(jobs) * float64(hi-lo+1)
	count := map[string]float64{}
	var firstClaims float64
	for _, c := range cmds {
		kind, slots := Classify(c, "cronlock:")
		if slots == nil {
			count[kind]++
			continue
		}
		for _, slot := range slots {
			if kind == CallClaim && slot == first {
				firstClaims++
			}
			if slot >= lo && slot <= hi {
				count[kind]++
			}
		}
	}
	// One claim per node and slot at most: a lower-ranked node reads the
	// slot's record first and sends no claim when there is one
	// (cluster.Load.Settled); together one call per node and slot, or two
	// when the read found no record.
	add(wl, "claims per slot (claim scripts)", "", &Target{Of: OfDaemon, Max: nodes}, count[CallClaim]/slots)
	add(wl, "record reads per slot (lower-ranked nodes, before a claim)", "", nil, count[CallPeek]/slots)
	add(wl, "claims and record reads per slot", "", nil, (count[CallClaim]+count[CallPeek])/slots)
	add(wl, "Redis memory of a job's ledger after the run (MEMORY USAGE of state, occ, occidx; at most ledger.max_occurrences records)", "KiB",
		nil, ledgerBytes/1024)
	add(wl, "finishes per slot", "", &Target{Of: OfDaemon, Max: 1, Exact: true}, count[CallFinish]/slots)
	add(wl, "renewals and releases per slot", "", zero, count[CallLease]/slots)
	add(wl, "claim calls per slot, first slot after start", "", nil, firstClaims/jobs)
	var others []string
	for k := range count {
		if k != CallClaim && k != CallFinish && k != CallLease && k != CallPeek {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	for _, k := range others {
		add(wl, fmt.Sprintf("other: %s, per node over the %.0f s run", k, wall), "", nil, count[k]/nodes)
	}
}

// ledgerMemory is the mean Redis memory of the jobs' ledger keys (bytes:
// MEMORY USAGE of state, occ and occidx of job0000 …, as jobsConfig
// names them).
func ledgerMemory(t *testing.T, addr string, jobs int) float64 {
	var total float64
	for i := range jobs {
		for _, kind := range []string{"state", "occ", "occidx"} {
			v, err := redistest.Do(addr, 5*time.Second, "MEMORY", "USAGE", fmt.Sprintf("cronlock:%s:job%04d", kind, i))
			if err != nil {
				t.Fatalf("MEMORY USAGE: %v", err)
			}
			var n float64
			fmt.Sscan(v, &n)
			total += n
		}
	}
	return total / float64(jobs)
}
