package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// Issue 8, "What it must show" 1, and the Redis policy guard
// (docs/protocol.md, "Redis policy guard"): Redis with maxmemory 2mb and an
// evicting policy, kept under memory pressure by a filler writing 20 KB
// keys, and two nodes, one with its clock 1.5 s behind.
//
//   - allkeys-lru with three per-second jobs, volatile-lru with one 6 s
//     job (overlap: skip): the nodes refuse to claim. Nothing runs (so no
//     slot runs twice, no fence is reused and no two runs overlap); every
//     slot is skipped redis_unsafe (logged and counted); /readyz is 503
//     naming the policy, cronlock_redis_up 0 and cronlock_redis_unsafe 1;
//     each node logs one error line naming the policy and the fix.
//   - the same with redis.allow_eviction: true: the nodes run the jobs
//     (/readyz 200, cronlock_redis_eviction_allowed 1) and warn, at start
//     and naming the policy. Exactly-once under eviction is not asserted
//     here: it needs the state repair of the claim script (issue 8, "State
//     repair"); duplicates, reused fences and overlaps are logged.
//
// Each case checks that Redis did evict keys meanwhile (INFO stats
// evicted_keys), so that the pressure is real.
func TestGuard_EvictingRedis(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"allkeys-lru", "volatile-lru"} {
		for _, allow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s allow_eviction=%v", policy, allow), func(t *testing.T) {
				t.Parallel()
				testEvictingRedis(t, policy, allow)
			})
		}
	}
}

func testEvictingRedis(t *testing.T, policy string, allow bool) {
	srv := redistest.StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", policy)
	startFiller(t, srv.Addr(), 20<<10, 20*time.Millisecond)
	ledger := newLedger(t)
	var jobs []map[string]any
	var names []string
	if policy == "volatile-lru" {
		jobs = []map[string]any{{"name": "long", "schedule": "* * * * * *", "overlap": "skip",
			"command": intervalCommand(ledger, 6*time.Second), "timeout": "20s", "lock_ttl": "30s"}}
		names = []string{"long"}
	} else {
		jobs, names = everySecondJobs(ledger, "job", 3, nil)
	}
	cfg := redisConfig(srv.Addr(), jobs...)
	cfg["redis"] = map[string]any{"address": srv.Addr(), "allow_eviction": allow}
	listen := map[string]string{"n1": freeAddr(t), "n2": freeAddr(t)}
	nodes, _ := startNodes(t, writeConfig(t, cfg),
		nodeSpec{id: "n1", env: []string{"CRONLOCK_HTTP_LISTEN=" + listen["n1"]}},
		nodeSpec{id: "n2", env: []string{"CRONLOCK_HTTP_LISTEN=" + listen["n2"], "CRONLOCK_INTERNAL_CLOCK_OFFSET=-1.5s"}})
	time.Sleep(6500 * time.Millisecond) // the nodes run under eviction for a fixed span: that is the test
	for _, n := range nodes {
		checkGuardSignals(t, n, listen[n.name], policy, allow, names)
	}
	evicted := infoField(t, srv, "stats", "evicted_keys")
	stopAll(t, 15*time.Second, nodes...)

	if n, _ := strconv.Atoi(evicted); n == 0 {
		t.Errorf("redis evicted_keys: got %q, want > 0 (the filler must put Redis under memory pressure)", evicted)
	}
	started := runsStarted(nodes)
	dupSlots, dupFences := duplicates(started)
	if !allow {
		if len(started) != 0 || len(ledgerLines(t, ledger)) != 0 {
			t.Errorf("refused: got %d runs started (ledger %d lines), want none: the nodes must not claim on an evicting Redis",
				len(started), len(ledgerLines(t, ledger)))
		}
		return
	}
	if len(started) == 0 {
		t.Errorf("allow_eviction: got no run, want the nodes to claim and run")
	}
	overlaps := 0
	if policy == "volatile-lru" {
		overlaps = overlapping(readIntervals(t, ledger))
	}
	t.Logf("allow_eviction under %s: %d runs, %d slots run twice, %d fences reused, %d overlapping runs (not asserted: needs state repair)",
		policy, len(started), dupSlots, dupFences, overlaps)
}

// checkGuardSignals checks what a node says about the evicting Redis: its
// error or warning lines, /readyz, the gauges and the skip reason.
func checkGuardSignals(t *testing.T, n *node, listen, policy string, allow bool, jobs []string) {
	t.Helper()
	why := "ready"
	if !allow {
		why = "unsafe: maxmemory-policy " + policy
	}
	metrics := waitReadiness(t, n.name, listen, allow, why).metrics
	var refusals, warnings, startWarnings int
	for _, e := range n.Logs() {
		msg := e.Msg()
		switch {
		case e.Str("level") == "error" && strings.Contains(msg, "maxmemory-policy "+policy) &&
			strings.Contains(msg, "CONFIG SET maxmemory-policy noeviction") && strings.Contains(msg, "redis.allow_eviction: true"):
			refusals++
		case e.Str("level") == "warn" && strings.Contains(msg, "maxmemory-policy "+policy) && strings.Contains(msg, "claiming anyway"):
			warnings++
		case e.Str("level") == "warn" && strings.HasPrefix(msg, "redis.allow_eviction is true"):
			startWarnings++
		}
	}
	if !allow {
		if refusals != 1 {
			t.Errorf("%s: error lines naming %s and the fix: got %d, want 1", n.name, policy, refusals)
		}
		for _, line := range []string{"cronlock_redis_unsafe 1", "cronlock_redis_eviction_allowed 0"} {
			if !hasLine(metrics, line) {
				t.Errorf("%s: /metrics: no line %q", n.name, line)
			}
		}
		for _, job := range jobs {
			skipped := 0
			for _, e := range logsOf(n, "slot skipped", job) {
				if e.Str("reason") == "redis_unsafe" {
					skipped++
				}
			}
			counted := seriesValue(metrics, fmt.Sprintf(`cronlock_skips_total{job=%q,reason="redis_unsafe"}`, job))
			// /metrics was read before the log: a skip between the two may
			// be in one and not the other.
			if skipped < 4 || counted < 4 || counted < float64(skipped-1) || counted > float64(skipped+1) {
				t.Errorf("%s: job %s: got %d redis_unsafe skips logged, %v counted; want ≥ 4 (6.5 s of per-second slots), the same ±1 in both",
					n.name, job, skipped, counted)
			}
		}
		return
	}
	if warnings != 1 || startWarnings != 1 {
		t.Errorf("%s: got %d warnings naming %s and %d start warnings, want 1 and 1", n.name, warnings, policy, startWarnings)
	}
	for _, line := range []string{"cronlock_redis_unsafe 0", "cronlock_redis_eviction_allowed 1"} {
		if !hasLine(metrics, line) {
			t.Errorf("%s: /metrics: no line %q", n.name, line)
		}
	}
}

// startFiller writes keys of size bytes (each with a 10-minute TTL, so that
// volatile-* policies may evict them too) to addr every period, on one
// pipelined connection, until the test ends. Errors (OOM) are ignored: the
// filler only makes memory pressure.
func startFiller(t *testing.T, addr string, size int, period time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); c.Close(); wg.Wait() })
	value := strings.Repeat("x", size)
	wg.Add(2)
	go func() { // read and drop the replies, one line each
		defer wg.Done()
		r := bufio.NewReader(c)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			key := fmt.Sprintf("filler:%d", i)
			cmd := fmt.Sprintf("*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nPX\r\n$6\r\n600000\r\n", len(key), key, len(value), value)
			if _, err := c.Write([]byte(cmd)); err != nil {
				return
			}
		}
	}()
}

// infoField returns one field of INFO section from srv.
func infoField(t *testing.T, srv *redistest.Server, section, field string) string {
	t.Helper()
	for _, line := range strings.Split(srv.Do("INFO", section), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no field %s", section, field)
	return ""
}

// startedRun is one "run started" log entry.
type startedRun struct {
	job, node   string
	slot, fence int64
}

func runsStarted(nodes []*node) []startedRun {
	var out []startedRun
	for _, n := range nodes {
		for _, e := range logsOf(n, "run started", "") {
			if e.Int("attempt") == 1 {
				out = append(out, startedRun{job: e.Str("job"), node: n.name, slot: e.Slot(), fence: e.Int("fence")})
			}
		}
	}
	return out
}

// duplicates counts slots run more than once and fences handed out more
// than once, per job.
func duplicates(runs []startedRun) (slots, fences int) {
	type key struct {
		job string
		n   int64
	}
	bySlot, byFence := map[key]int{}, map[key]int{}
	for _, r := range runs {
		if bySlot[key{r.job, r.slot}]++; bySlot[key{r.job, r.slot}] == 2 {
			slots++
		}
		if byFence[key{r.job, r.fence}]++; byFence[key{r.job, r.fence}] == 2 {
			fences++
		}
	}
	return slots, fences
}

// overlapping counts pairs of runs that were under way at the same time
// (a run without an end is taken as still running).
func overlapping(ivs []interval) int {
	n := 0
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if a.End.IsZero() || b.Start.Before(a.End) {
				n++
			}
		}
	}
	return n
}

// hasLine reports whether the Prometheus text body has the exact line.
func hasLine(body, line string) bool {
	return strings.Contains("\n"+body, "\n"+line+"\n")
}

// seriesValue returns the value of the series written exactly as series
// (name and labels) in the Prometheus text body, or -1 when absent.
func seriesValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
