//go:build bench

package bench

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

const herdJobs = 3000

// herdNodes is the herd's number of nodes, and of floor processes.
const herdNodes = 3

// runHerd measures one top-of-minute herd of herdJobs jobs on herdNodes
// nodes between two floors (so the daemon's values are those of its one
// minute in both pairs). A floor is herdNodes floor processes at once,
// each starting its share of the herdJobs commands at one instant: the
// issue's "the floor's time for the same number of spawns split over 3
// machines' worth of nodes", split as the nodes split them (README.md,
// "Performance").
func runHerd(t *testing.T, s settings, wl *Workload) {
	last := wl.Metric("last start after the instant", "ms", nil)
	floor := func(pair int) {
		ledger := filepath.Join(t.TempDir(), "floor")
		at := time.Now().Truncate(time.Second).Add(time.Second)
		load := runFloors(t, ledger, herdNodes, func(i int) []string {
			return []string{"-jobs", strconv.Itoa(herdJobs / herdNodes), "-first", strconv.Itoa(i * herdJobs / herdNodes),
				"-at", strconv.FormatInt(at.Unix(), 10)}
		})
		wl.Runs = append(wl.Runs, Run{Pair: pair, Kind: KindFloor, Load: load})
		runs := readLedger(t, ledger)
		jobs := map[string]bool{}
		for _, r := range runs {
			jobs[r.job] = true
		}
		if len(runs) != herdJobs || len(jobs) != herdJobs {
			t.Fatalf("floor: %d runs of %d jobs, want %d of %d", len(runs), len(jobs), herdJobs, herdJobs)
		}
		last.Floor = append(last.Floor, maxStartMs(runs))
	}
	floor(0)
	a := take(t)
	srv := redistest.Start(t)
	// No MONITOR here: it makes Redis write every command a script runs to
	// the monitor, several times slower at a herd (the claims per slot are
	// counted under MONITOR by the redis workload).
	ledger := filepath.Join(t.TempDir(), "daemon")
	cfg := writeConfig(t, map[string]any{"redis": map[string]any{"address": srv.Addr()},
		"jobs": jobsConfig(herdJobs, "* * * * *", ledger)})
	nodes := startNodes(t, cronlockBin, cfg, herdNodes)
	minute := time.Now().Add(time.Second).Truncate(time.Minute).Add(time.Minute)
	t.Logf("herd: waiting for %s", minute.Format(time.TimeOnly))
	// The script calls are counted from 1 s before the minute: the start-up
	// audit (docs/protocol.md, R8) is not the herd's.
	sleepUntil(minute.Add(-time.Second))
	before, err := redistest.Do(srv.Addr(), 5*time.Second, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	sleepUntil(minute)
	// Until every slot ran, or nothing was added for 3 s (missed slots).
	for n, quiet := 0, 0; n < herdJobs && quiet < 30; time.Sleep(100 * time.Millisecond) {
		if m := len(readLedger(t, ledger)); m > n {
			n, quiet = m, 0
		} else {
			quiet++
		}
	}
	time.Sleep(time.Second) // a duplicate would come now
	stopNodes(t, nodes)
	logProblems(t, nodes)
	stats, err := redistest.Do(srv.Addr(), 5*time.Second, "INFO", "commandstats")
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	decided, notClaimed := ledgerDecidedMs(t, srv.Addr(), minute.Unix())
	srv.Stop()
	load := Between(a, take(t))
	slot := minute.Unix()
	dups, missed, in := slotStats(readLedger(t, ledger), herdJobs, slot, slot)
	perNode := map[string]int{}
	for _, r := range in {
		perNode[r.node]++
	}
	busiest := 0
	for _, n := range perNode {
		busiest = max(busiest, n)
	}
	won := claimedMs(t, nodes, slot)
	var claimFailed, unreachable, inconclusive int
	for _, nd := range nodes {
		log := nd.read(t)
		claimFailed += strings.Count(log, `"msg":"claim failed; not run"`)
		unreachable += strings.Count(log, `"msg":"redis unreachable`)
		inconclusive += strings.Count(log, `"msg":"readiness probe inconclusive`)
	}
	d := maxStartMs(in)
	calls := cmdStat(stats, "evalsha", "calls") - cmdStat(before, "evalsha", "calls")
	usecPerCall := (cmdStat(stats, "evalsha", "usec") - cmdStat(before, "evalsha", "usec")) / calls
	for pair := range 2 {
		if pair == 1 {
			floor(1)
		} else {
			wl.Runs = append(wl.Runs, Run{Pair: 0, Kind: KindDaemon, Load: load})
		}
		last.Daemon = append(last.Daemon, d)
		add(wl, "slots claimed: last decided by a claim, from the minute (Redis time, the ledger's claimed)", "ms",
			&Target{Of: OfDaemon, Max: 1000}, Percentile(decided, 1))
		add(wl, "slots claimed: median decided by a claim (Redis time, the ledger's claimed)", "ms", nil, Percentile(decided, 0.5))
		add(wl, "slots not decided by a claim (the ledger: missed, or no record)", "", zero, float64(notClaimed))
		add(wl, "runs started: last won claim decided, from the minute (Redis time, claimed_us)", "ms", nil, Percentile(won, 1))
		add(wl, "claims failed (daemon logs: claim failed; not run)", "", nil, float64(claimFailed))
		// Redis answers an outside client within milliseconds at the herd:
		// a node that reports it unreachable (an error, not ready, and a
		// return's sweep and catch-up) gives a false signal.
		add(wl, "redis reported unreachable (daemon logs, all nodes)", "", zero, float64(unreachable))
		add(wl, "readiness probes inconclusive: node waited for a CPU (daemon logs, all nodes)", "", nil, float64(inconclusive))
		add(wl, "Redis CPU per EVALSHA from 1 s before the minute (server's usec: claims, finishes, audits, probes)", "µs", nil, usecPerCall)
		add(wl, "EVALSHA calls per slot from 1 s before the minute (claims, finishes, audits, probes; INFO commandstats)", "", nil, calls/herdJobs)
		add(wl, "runs on the busiest node", "%", &Target{Of: OfDaemon, Max: 40}, 100*float64(busiest)/herdJobs)
		add(wl, "duplicates", "", zero, float64(dups))
		add(wl, "missed", "", zero, float64(missed))
	}
}

// ledgerScript reads, for jobs job0000… (ARGV[2] of them, key format
// ARGV[3]), the record of slot ARGV[1]: "status claimed_ms" each, "none 0"
// when there is none.
const ledgerScript = `local out = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  local v = redis.call("HGET", string.format(ARGV[3], i), ARGV[1])
  if v then
    out[#out + 1] = (string.match(v, '"status":"(%a+)"') or "") .. " " .. (string.match(v, '"claimed":(%d+)') or "0")
  else
    out[#out + 1] = "none 0"
  end
end
return out`

// ledgerDecidedMs reads the herd's slot from every job's ledger (one EVAL,
// after the measured window): when Redis decided each slot by a claim
// (the record's claimed, Redis time, ms after the slot; whether it then
// ran, was skipped at the fork (lock_lost) or its node died), and how many
// slots no claim decided (missed by the audit, whose claimed is the audit's
// time, or no record at all). Unlike claimed_us of "run started" this
// counts every won claim, not only those that started.
func ledgerDecidedMs(t *testing.T, addr string, slot int64) (ms []float64, notClaimed int) {
	out, err := redistest.Do(addr, 10*time.Second, "EVAL", ledgerScript, "0", strconv.FormatInt(slot, 10),
		strconv.Itoa(herdJobs), "cronlock:occ:job%04d")
	if err != nil {
		t.Fatalf("ledger of the herd's slot: %v", err)
	}
	for _, l := range strings.Split(out, "\n") {
		status, claimed, _ := strings.Cut(l, " ")
		at, _ := strconv.ParseInt(claimed, 10, 64)
		if status == "none" || status == "missed" || at == 0 {
			notClaimed++
			continue
		}
		ms = append(ms, float64(at-slot*1000))
	}
	return ms, notClaimed
}

// maxStartMs is the latest job-measured start of runs, in ms after the slot.
func maxStartMs(runs []ledgerRun) float64 {
	if len(runs) == 0 {
		return Percentile(nil, 1)
	}
	return Percentile(startsMs(runs), 1)
}

// cmdStat is field (calls, usec_per_call, …) of cmd in INFO commandstats
// (NaN if absent).
func cmdStat(info, cmd, field string) float64 {
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_"+cmd+":"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, field+"="); ok {
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						return f
					}
				}
			}
		}
	}
	return Percentile(nil, 0.5)
}
