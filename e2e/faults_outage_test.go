package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// Issue 4, item 2: Redis unavailable for 5 s while 3 nodes run 5 jobs every
// second with catchup_window 10s. Two models of the outage:
//
//   - Unreachable: every node reaches Redis through one proxy, which is cut
//     (connections blackholed: claims and pings time out) and restored.
//     Redis keeps its data.
//   - Stopped: redis-server is stopped (SIGTERM) and started again on the
//     same port. It has no persistence, so it comes back empty: the first
//     claim after it (the catch-up) finds the ledger behind what the node
//     saw and repairs it (docs/protocol-v2.md, R5), and the slots up to
//     node.max_clock_skew (2 s) after that are refused state_lost, the
//     catch-up slot with them; the checks after the outage begin after
//     that window.
//
// The outage begins 400 ms into second D and ends 400 ms into second U =
// D+5. What is asserted, per job:
//
//   - no slot runs twice (the whole run);
//   - every slot from the one after all nodes ran up to D (fired before the
//     outage) and from U+1 up to the one before SIGTERM runs exactly once:
//     no margin is needed around the outage;
//   - catch-up (docs/protocol.md) runs exactly one slot of the outage: on
//     reconnect a node claims the latest slot S ≤ now within the window,
//     unless its record exists. The health monitor pings every 250 ms while
//     Redis is down, so the first node sees Redis back within second U, and
//     S = U: slot U — fired at U.000 while Redis was still down — runs once,
//     late, as a catch-up (the node that ran it logged the catch-up claim);
//   - the older outage slots D+1 … U−1 never run: catch-up runs only the
//     latest missed slot, never more than one per job;
//   - no daemon exits; all exit 0 at SIGTERM;
//   - every node reports the outage: /readyz 503 and cronlock_redis_up 0
//     during it, 200 and 1 before and after; "redis unreachable" and
//     "redis reachable" (within 1 s of the end) logged; redis_error skips.
//
// None of the three outage tests is parallel: the outage starts 400 ms into
// second D and must end within second D+5 (600 ms for the test to wake and
// restore Redis), the catch-up of slot U needs a node to see Redis back
// before U+1 (about 350 ms of slack past the 250 ms ping period), and
// "redis reachable" must be logged within 1 s. Run in parallel with all
// the other tests, the last failed (1.0002 s).
func TestOutage_RedisUnreachable5s(t *testing.T) {
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr())
	testOutage(t, px.Addr(), px.Cut, px.Restore, catchupRuns)
}

func TestOutage_RedisStopped5s(t *testing.T) {
	srv := redistest.Start(t)
	testOutage(t, srv.Addr(), srv.Stop, srv.Restart, catchupStateLost)
}

// TestOutage_RedisHung5s models a hung Redis: redis-server is paused
// (SIGSTOP) for 5 s. The requests sent meanwhile wait in its socket buffers
// and are executed at the resume, after their clients gave up: claims whose
// callers skipped the slot (redis_error) are applied by Redis, and leave
// phantom leases until the claiming node's janitor releases them
// (docs/protocol.md). Everything of the other outage tests is asserted
// except the catch-up, which is only logged: at the resume the catch-up
// claims race with those phantom leases (released within the janitor's
// 250 ms period), and a catch-up claim that finds one is recorded as an
// overlap skip, so the latest missed slot may not run (known issue,
// reported with issue 4).
func TestOutage_RedisHung5s(t *testing.T) {
	srv := redistest.Start(t)
	testOutage(t, srv.Addr(), srv.Pause, srv.Resume, catchupLogged)
}

// What an outage test expects of the catch-up of slot U.
const (
	catchupRuns      = iota // it runs once, late, as a catch-up
	catchupLogged           // not asserted, only logged
	catchupStateLost        // Redis came back empty: refused state_lost (R5)
)

// testOutage runs the outage scenario with down and up as the fault;
// catchup says what is asserted of the catch-up of slot U.
func testOutage(t *testing.T, addr string, down, up func(), catchup int) {
	ledger := newLedger(t)
	jobs, names := everySecondJobs(ledger, "job", 5, map[string]any{"catchup_window": "10s"})
	var specs []nodeSpec
	listen := map[string]string{} // node → http.listen
	for _, id := range []string{"n1", "n2", "n3"} {
		listen[id] = freeAddr(t)
		specs = append(specs, nodeSpec{id: id, env: []string{"CRONLOCK_HTTP_LISTEN=" + listen[id]}})
	}
	nodes, allReady := startNodes(t, writeConfig(t, redisConfig(addr, jobs...)), specs...)

	downAt := nextPhase(allReady.Add(3*time.Second), 400*time.Millisecond)
	sleepUntil(downAt)
	checkReady(t, nodes, listen, true, "before the outage")
	down()
	// The health monitor pings every second with a 1 s timeout: 3 s in,
	// every node knows.
	sleepUntil(downAt.Add(3 * time.Second))
	checkReady(t, nodes, listen, false, "3 s into the outage")
	sleepUntil(downAt.Add(5 * time.Second))
	up()
	upAt := time.Now()
	sleepUntil(upAt.Add(1500 * time.Millisecond))
	checkReady(t, nodes, listen, true, "1.5 s after the outage")
	after := 3500 * time.Millisecond // three slots after the outage
	if catchup == catchupStateLost {
		after += 2 * time.Second // and after the repair's refusal window
	}
	sleepUntil(upAt.Add(after))
	checkNotExited(t, "during or after the outage", nodes...)
	stopAt := time.Now()
	stopAll(t, 15*time.Second, nodes...)

	d, u := downAt.Unix(), upAt.Unix()
	if u != d+5 {
		t.Fatalf("outage from %s to %s: the test overslept (got second %d, want %d)", downAt.Format("15:04:05.000"), upAt.Format("15:04:05.000"), u, d+5)
	}
	repaired := lastRepairs(nodes)
	byJob := slotsByJob(readLedger(t, ledger))
	for _, job := range names {
		ran := byJob[job]
		from := u + 1
		if catchup == catchupStateLost {
			if repaired[job].IsZero() {
				t.Errorf("job %s: no %q warning after Redis came back empty", job, repairWarning)
				continue
			}
			from = repaired[job].Add(2*time.Second).Unix() + 1 // node.max_clock_skew's default
		}
		want := append(slotsBetween(ceilSecond(allReady)+1, d, 1), slotsBetween(from, stopAt.Unix()-1, 1)...)
		checkOncePerSlot(t, nodes, job, ran, want)
		if n := len(slotsBetween(from, stopAt.Unix()-1, 1)); n < 2 {
			t.Errorf("job %s: checked %d slots after the outage, want at least 2", job, n)
		}
		for s := d + 1; s < u; s++ {
			if len(ran[s]) > 0 {
				t.Errorf("job %s slot %d (inside the outage, older than the catch-up slot %d): got runs on %v, want none%s", job, s, u, ran[s], describeSlot(nodes, job, s))
			}
		}
		switch catchup {
		case catchupLogged:
			t.Logf("job %s slot %d (latest missed, catch-up; not asserted): got runs on %v%s", job, u, ran[u], describeSlot(nodes, job, u))
			continue
		case catchupStateLost:
			if len(ran[u]) != 0 {
				t.Errorf("job %s slot %d (latest missed; Redis came back empty): got runs on %v, want none (state_lost)%s", job, u, ran[u], describeSlot(nodes, job, u))
			}
			continue
		}
		if len(ran[u]) != 1 {
			t.Errorf("job %s slot %d (latest missed, catch-up): got runs on %v, want exactly 1%s", job, u, ran[u], describeSlot(nodes, job, u))
		} else if !caughtUp(nodes, ran[u][0], job, u) {
			t.Errorf("job %s slot %d: ran on %s without a catch-up claim logged there, want a catch-up run%s", job, u, ran[u][0], describeSlot(nodes, job, u))
		}
	}
	checkOutageSeen(t, nodes, downAt, upAt)
	t.Logf("outage %s–%s; checked %d jobs, catch-up slot %d; ledger holds %d runs",
		downAt.Format("15:04:05.000"), upAt.Format("15:04:05.000"), len(names), u, len(readLedger(t, ledger)))
}

// lastRepairs returns, per job, the time of the last "ledger state
// repaired" warning on any node (every node that saw more of the ledger
// than Redis holds repairs it, a few ms apart; the last sets lost_at).
func lastRepairs(nodes []*node) map[string]time.Time {
	out := map[string]time.Time{}
	for _, n := range nodes {
		for _, e := range n.Logs() {
			if strings.HasPrefix(e.Msg(), repairWarning) && e.Time().After(out[e.Str("job")]) {
				out[e.Str("job")] = e.Time()
			}
		}
	}
	return out
}

// caughtUp reports whether the node named name logged a catch-up claim of
// job's slot.
func caughtUp(nodes []*node, name, job string, slot int64) bool {
	for _, n := range nodes {
		if n.name != name {
			continue
		}
		for _, e := range logsOf(n, "catch-up: claiming the latest missed slot", job) {
			if e.Slot() == slot {
				return true
			}
		}
	}
	return false
}

// checkOutageSeen checks that every node noticed the outage (health
// monitor: "redis unreachable", then "redis reachable" within a second of
// the end) and skipped slots with reason redis_error.
func checkOutageSeen(t *testing.T, nodes []*node, downAt, upAt time.Time) {
	t.Helper()
	for _, n := range nodes {
		var downLogged, upLogged time.Time
		redisErrors := 0
		for _, e := range n.Logs() {
			switch {
			case e.Msg() == "redis unreachable: slots are skipped (redis_error) until it answers; retrying" && e.Time().After(downAt):
				downLogged = e.Time()
			case e.Msg() == "redis reachable" && !downLogged.IsZero() && upLogged.IsZero():
				// The first after the outage was noticed (a hung Redis
				// answers at once: this may be logged before the test
				// read its clock after SIGCONT).
				upLogged = e.Time()
			case e.Msg() == "slot skipped" && e.Str("reason") == "redis_error":
				redisErrors++
			}
		}
		if downLogged.IsZero() || upLogged.IsZero() || redisErrors == 0 {
			t.Errorf("%s: got unreachable logged %v, reachable logged %v, %d redis_error skips; want both logs and some skips",
				n.name, !downLogged.IsZero(), !upLogged.IsZero(), redisErrors)
			continue
		}
		if d := upLogged.Sub(upAt); d > time.Second {
			t.Errorf("%s: redis reachable logged %v after Redis returned, want within 1s", n.name, d)
		}
		t.Logf("%s: unreachable logged +%v after the outage began, reachable +%v after it ended, %d redis_error skips",
			n.name, downLogged.Sub(downAt).Round(time.Millisecond), upLogged.Sub(upAt).Round(time.Millisecond), redisErrors)
	}
}

// checkReady checks every node's /readyz (200 when Redis is reachable, 503
// when not) and its cronlock_redis_up gauge.
func checkReady(t *testing.T, nodes []*node, listen map[string]string, want bool, when string) {
	t.Helper()
	wantCode, wantUp := http.StatusOK, "cronlock_redis_up 1\n"
	if !want {
		wantCode, wantUp = http.StatusServiceUnavailable, "cronlock_redis_up 0\n"
	}
	for _, n := range nodes {
		if code, body := httpGet(t, "http://"+listen[n.name]+"/readyz"); code != wantCode {
			t.Errorf("%s: /readyz %s: got %d %q, want %d", n.name, when, code, strings.TrimSpace(body), wantCode)
		}
		if _, body := httpGet(t, "http://"+listen[n.name]+"/metrics"); !strings.Contains(body, wantUp) {
			t.Errorf("%s: /metrics %s: no line %q", n.name, when, strings.TrimSpace(wantUp))
		}
	}
}
