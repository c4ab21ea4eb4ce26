package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Tests of per-job isolation (issue 9, "What it must show" 1).

// scrape fetches http://addr/metrics and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: got status %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics: parse: %v", err)
	}
	return mfs
}

// metricValue is the value of the counter or gauge name whose labels
// include labels (pairs), 0 when there is none.
func metricValue(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range mfs[name].GetMetric() {
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				delete(want, l.GetName())
			}
		}
		if len(want) == 0 {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// One job fails every second and its on_failure hook hangs (sleep 3600,
// hook_timeout 1h); 30 other jobs run every second with an on_success
// hook, for 60 s. The hanging job delays only its own hooks: every other
// job runs every slot, each of those runs' hooks runs, cronlock_runs_total
// keeps up with the runs while it happens, the daemon's RSS stays under
// 64 MiB, and the hanging job's hooks beyond its queue are dropped,
// counted and logged in summary (not once per slot).
func TestHooks_HangingHookDelaysOnlyItsJob(t *testing.T) {
	t.Parallel()
	const span, others, rssLimit = 60 * time.Second, 30, 64 << 20
	ledger, hooks := newLedger(t), newLedger(t)+".hooks"
	// One shell and no other process per run and per hook: the test is about
	// the daemon, and 60 shells a second already load a shared machine.
	line := func(path string) string {
		return fmt.Sprintf(`echo "$CRONLOCK_JOB $CRONLOCK_SCHEDULED_TIME" >> %s`, shellQuote(path))
	}
	// overlap: allow, so that a run that a loaded machine slows past its
	// second does not make the next slot overlap_local: a skip from CPU
	// starvation would say nothing about hooks. (The previous engine fails
	// this test all the same: its runs_total and hooks froze after ~8 s.)
	jobs, names := everySecondJobs(ledger, "j", others,
		map[string]any{"command": line(ledger), "on_success": line(hooks), "overlap": "allow"})
	jobs = append(jobs, map[string]any{"name": "hang", "schedule": "* * * * * *", "command": "exit 1",
		"overlap": "allow", "on_failure": "sleep 3600", "hook_timeout": "1h", "kill_grace": "1s"})
	listen := freeAddr(t)
	cfg := memoryConfig(jobs...)
	cfg["node"] = map[string]any{"id": "solo", "shutdown_timeout": "1s"}
	cfg["log"] = map[string]any{"level": "info"}
	cfg["http"] = map[string]any{"listen": listen}
	n := startNode(t, writeConfig(t, cfg))
	began := waitEngineRunning(n).Time()
	first := began.Truncate(time.Second).Add(time.Second).Unix() // the first slot after the start

	var maxRSS int64
	end := began.Add(span)
	nextCheck := began.Add(20 * time.Second)
	for time.Now().Before(end) {
		rss, err := vmRSS(n.Pid())
		if err != nil {
			t.Fatalf("daemon RSS: %v (daemon exited?)", err)
		}
		maxRSS = max(maxRSS, rss)
		if time.Now().After(nextCheck) {
			checkRunsKeepUp(t, listen, ledger, names)
			nextCheck = nextCheck.Add(20 * time.Second)
		}
		time.Sleep(500 * time.Millisecond) // the sampling period
	}
	mfs := scrape(t, listen)
	last := time.Now().Unix() - 2 // slots whose run and hook have surely ended
	stopAll(t, 10*time.Second, n)

	t.Logf("daemon max RSS: %.1f MiB", float64(maxRSS)/(1<<20))
	if maxRSS >= rssLimit {
		t.Errorf("daemon max RSS: got %.1f MiB, want < %d MiB", float64(maxRSS)/(1<<20), rssLimit>>20)
	}
	runs, hooked := slotCounts(t, ledger), slotCounts(t, hooks)
	for _, name := range names {
		bad := 0
		for s := first; s <= last; s++ {
			if runs[name][s] != 1 || hooked[name][s] != 1 {
				bad++
				t.Errorf("%s slot %d: got %d runs and %d hooks, want 1 and 1", name, s, runs[name][s], hooked[name][s])
			}
		}
		if bad > 0 {
			var skips []string
			for _, r := range []string{"claimed_elsewhere", "overlap_local", "shutting_down", "redis_error"} {
				skips = append(skips, fmt.Sprintf("%s %v", r, metricValue(mfs, "cronlock_skips_total", "job", name, "reason", r)))
			}
			t.Logf("%s: at the end, skips by reason %v, fires dropped %v, slots missed %v, failed runs %v", name, skips,
				metricValue(mfs, "cronlock_fires_dropped_total", "job", name),
				metricValue(mfs, "cronlock_occurrences_missed_total", "job", name),
				metricValue(mfs, "cronlock_runs_total", "job", name, "result", "failure"))
		}
	}
	failed := metricValue(mfs, "cronlock_runs_total", "job", "hang", "result", "failure")
	dropped := metricValue(mfs, "cronlock_hook_failures_total", "job", "hang", "hook", "on_failure", "reason", "dropped")
	// One hook of hang runs and 4 wait; every other one was dropped (one
	// more may be between its run's end and the hook runner).
	if failed < span.Seconds()-3 || dropped < failed-6 || dropped > failed-5 {
		t.Errorf("hang: got %v failed runs and %v dropped hooks, want ≥ %v runs and all but 5 hooks dropped",
			failed, dropped, span.Seconds()-3)
	}
	if got := len(logsOf(n, "hook dropped: the job's hook queue is full; its oldest waiting hook is not run", "hang")); got < 1 || got > 3 {
		t.Errorf("hook dropped lines of hang over %v: got %d, want 1 to 3 (the first, then one a minute)", span, got)
	}
}

// checkRunsKeepUp scrapes cronlock_runs_total while the jobs run and
// compares it with each job's ledger: the metric lags a run by at most the
// moment between its ledger line and its end (here ≤ 2 runs).
func checkRunsKeepUp(t *testing.T, listen, ledger string, names []string) {
	t.Helper()
	mfs := scrape(t, listen)
	counted := map[string]int{}
	for _, fs := range ledgerLines(t, ledger) {
		counted[fs[0]]++
	}
	for _, name := range names {
		got := metricValue(mfs, "cronlock_runs_total", "job", name, "result", "success")
		// Within 5 runs (5 s): a run is in the ledger when its command ran
		// and in the counter once its finish reached the hook runner, a few
		// seconds apart on a loaded machine; a frozen counter falls behind
		// by 20 between two checks.
		if int(got) < counted[name]-5 {
			t.Errorf("%s: cronlock_runs_total{success} %v while its ledger has %d runs; want it to keep up", name, got, counted[name])
		}
	}
}

// slotCounts counts the lines `JOB SLOT …` of a ledger by job and slot
// (Unix seconds).
func slotCounts(t *testing.T, path string) map[string]map[int64]int {
	t.Helper()
	out := map[string]map[int64]int{}
	for _, fs := range ledgerLines(t, path) {
		slot, err := time.Parse(time.RFC3339, fs[1])
		if err != nil {
			t.Fatalf("ledger %s line %q: %v", path, fs, err)
		}
		if out[fs[0]] == nil {
			out[fs[0]] = map[int64]int{}
		}
		out[fs[0]][slot.Unix()]++
	}
	return out
}
