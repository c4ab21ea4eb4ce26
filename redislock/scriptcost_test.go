package redislock

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/redis/rueidis"
)

// scriptCostJobs is how many jobs BenchmarkScriptCost spreads its calls
// over; each starts with a full ledger (DefaultRetentionMax records), as a
// minutely job has after 100 minutes, so that every won claim trims one.
const scriptCostJobs = 200

// BenchmarkScriptCost measures Redis's CPU per script call (INFO
// commandstats, usec of EVALSHA: the server's time in the script, far less
// noisy than wall-clock latency) for the calls of a scheduled slot as a
// herd makes them: the won claim (lease taken, record written, one record
// trimmed), the two lost claims of the other nodes (claimed_elsewhere), the
// other nodes' two reads of the record that mostly replace those lost
// claims (Peek), and the winner's finish. Reported as
// redis-µs/<call>; ns/op is the client's wall time of the whole loop.
//
//	go test -run '^$' -bench ScriptCost -benchtime 3000x ./redislock
//
// CRONLOCK_SCRIPTCOST_ADDR names a running redis-server to use instead
// (e.g. one under valgrind --tool=callgrind, for instruction counts); it
// is flushed first. CRONLOCK_SCRIPTCOST_HOOK is a shell command run after
// each phase (e.g. callgrind_control --dump).
func BenchmarkScriptCost(b *testing.B) {
	addr := os.Getenv("CRONLOCK_SCRIPTCOST_ADDR")
	if addr == "" {
		addr = redistest.Start(b).Addr()
	}
	r := newRedis(b, addr, Options{})
	c := raw(b, addr)
	if err := c.Do(context.Background(), c.B().Flushall().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Unix()
	fillLedgers(b, r, c, now-3*3600)
	w := ledger.Windows{Early: time.Second, Answer: time.Hour}
	req := func(i int, node string) ledger.ClaimRequest {
		return ledger.ClaimRequest{Job: "job" + strconv.Itoa(i%scriptCostJobs), Slot: now - 1 - int64(i/scriptCostJobs),
			Trigger: ledger.TriggerSchedule, Node: node, RunID: node + "r" + strconv.Itoa(i), TTL: time.Minute,
			Lease: true, Windows: w}
	}
	claims := make([]ledger.Claim, scriptCostJobs)
	var won, lost, read, fin cost
	for round := 0; round*scriptCostJobs < b.N; round++ {
		base := round * scriptCostJobs
		won.measure(b, c, func() {
			for j := range scriptCostJobs {
				var err error
				if claims[j], err = r.Claim(ctx, req(base+j, "n1")); err != nil || claims[j].Outcome != ledger.Claimed {
					b.Fatalf("claim %d: got %v, %v", base+j, claims[j].Outcome, err)
				}
			}
		})
		lost.measure(b, c, func() {
			for j := range scriptCostJobs {
				for _, node := range []string{"n2", "n3"} {
					if got, err := r.Claim(ctx, req(base+j, node)); err != nil || got.Outcome != ledger.ClaimedElsewhere {
						b.Fatalf("claim %d: got %v, %v", base+j, got.Outcome, err)
					}
				}
			}
		})
		read.measure(b, c, func() {
			for j := range scriptCostJobs {
				for range 2 { // the other nodes' reads before a claim (actors, run.peek)
					q := req(base+j, "n2")
					if _, found, err := r.Peek(ctx, q.Job, q.Slot); err != nil || !found {
						b.Fatalf("read %d: got %v, %v", base+j, found, err)
					}
				}
			}
		})
		fin.measure(b, c, func() {
			for j := range scriptCostJobs {
				q := req(base+j, "n1")
				t := time.Unix(q.Slot, 0)
				rec := ledger.RunRecord{RunID: q.RunID, Slot: q.Slot, Trigger: q.Trigger, Node: q.Node, Start: t,
					End: t.Add(time.Millisecond), Attempts: 1, Result: ledger.ResultSuccess, Fence: claims[j].Token,
					OutputTail: "ok\n", Claimed: claims[j].Now}
				if _, err := r.Finish(ctx, ledger.FinishRequest{Job: q.Job, Owner: q.Owner(), Record: rec}); err != nil {
					b.Fatalf("finish %d: %v", base+j, err)
				}
			}
		})
	}
	won.report(b, "claim-won")
	lost.report(b, "claim-lost")
	read.report(b, "record-read")
	fin.report(b, "finish")
}

// cost sums Redis's EVALSHA calls and usec over measured phases.
type cost struct{ calls, usec int64 }

// measure runs phase between a CONFIG RESETSTAT and an INFO commandstats.
func (k *cost) measure(b *testing.B, c rueidis.Client, phase func()) {
	b.Helper()
	if err := c.Do(context.Background(), c.B().ConfigResetstat().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	runHook(b)
	phase()
	runHook(b)
	st := cmdstats(b, c)["evalsha"]
	k.calls += st["calls"]
	k.usec += st["usec"]
}

// runHook runs CRONLOCK_SCRIPTCOST_HOOK, if set, before and after each
// phase (e.g. "callgrind_control --dump": a profile of each phase alone).
func runHook(b *testing.B) {
	if hook := os.Getenv("CRONLOCK_SCRIPTCOST_HOOK"); hook != "" {
		if out, err := exec.Command("sh", "-c", hook).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", hook, err, out)
		}
	}
}

func (k *cost) report(b *testing.B, name string) {
	if k.calls > 0 {
		b.ReportMetric(float64(k.usec)/float64(k.calls), "redis-µs/"+name)
	}
}

// fillLedgers gives every job DefaultRetentionMax records at slots a
// minute apart from before, written directly in one pipeline.
func fillLedgers(b *testing.B, r *Redis, c rueidis.Client, before int64) {
	b.Helper()
	ctx := context.Background()
	cmds := make(rueidis.Commands, 0, 2*scriptCostJobs*ledger.DefaultRetentionMax)
	for i := range scriptCostJobs {
		job := "job" + strconv.Itoa(i)
		for k := range ledger.DefaultRetentionMax {
			s := strconv.FormatInt(before-int64(k)*60, 10)
			rec := `{"id":"` + s + `","slot":` + s + `,"status":"ran","reason":"","node":"n1","token":1,"trigger":"schedule","run_id":"x","claimed":1,"started":1,"finished":1,"result":"success","exit_code":0,"attempts":1,"output_tail":"ok\n","requester":""}`
			cmds = append(cmds, c.B().Hset().Key(r.key("occ", job)).FieldValue().FieldValue(s, rec).Build(),
				c.B().Zadd().Key(r.key("occidx", job)).ScoreMember().ScoreMember(float64(before-int64(k)*60), s).Build())
		}
		cmds = append(cmds, c.B().Hset().Key(r.key("state", job)).FieldValue().FieldValue("since", "1").Build())
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			b.Fatal(err)
		}
	}
}
