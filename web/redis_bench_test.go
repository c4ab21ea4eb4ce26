package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
	"golang.org/x/sync/errgroup"
)

// redisFillers is how many goroutines fill the benchmark's Redis (the
// client pipelines their calls on its connection).
const redisFillers = 64

// BenchmarkRedis10k measures the pages at benchJobs jobs against a real
// redis-server, read through the real backend (redislock) with the
// snapshot cache off, as the first request after the cache's 2 s is: the
// Redis round trips are in it. The ledger is written through the
// backend's scripts (redisFixture). It fails when a page took longer than
// pageBudget on average (not under the race detector). Like every Redis
// test here it needs redis-server on PATH (redistest.Start).
func BenchmarkRedis10k(b *testing.B) {
	srv := redistest.Start(b)
	jobs, now := redisFixture(b, srv.Addr())
	rd := newBenchRedis(b, srv.Addr())
	o := api.Options{Jobs: func() []config.Job { return jobs }, Redis: func() (*redislock.Redis, error) { return rd, nil },
		NodeID: "n0", Now: func() time.Time { return now }}
	h := New(Options{API: o, CacheFor: -1})
	for _, p := range []struct{ name, path string }{
		{"overview", "/ui/"},
		{"jobs", "/ui/jobs"},
		{"jobs-filtered", "/ui/jobs?status=failing&tag=role%3Dr1&q=job-0&page=2"},
		{"job", "/ui/jobs/job-05000"},
	} {
		b.Run(p.name, func(b *testing.B) { benchServe(b, h, p.path) })
	}
}

// newBenchRedis returns a client of addr, closed at cleanup.
func newBenchRedis(b *testing.B, addr string) *redislock.Redis {
	rd, err := redislock.New(redislock.Options{Addresses: []string{addr}, CallTimeout: 30 * time.Second})
	if err != nil {
		b.Fatalf("redislock.New: %v", err)
	}
	b.Cleanup(rd.Close)
	return rd
}

// redisFixture writes benchJobs jobs' last 24 hours to the Redis at addr
// through the backend's scripts, as nodes running them would: each job
// fires every 4 hours (6 occurrences in 24 hours), each occurrence claimed
// and finished by one of three nodes with a short output tail; one job in
// ten failed its last two runs, one in fifty started 45 s late once, and
// one in a hundred has a slot no node claimed, recorded missed by the
// audit. Three live nodes, each running a job. It returns the jobs and the
// instant the pages are read at.
func redisFixture(b *testing.B, addr string) ([]config.Job, time.Time) {
	start := time.Now()
	rd := newBenchRedis(b, addr)
	ctx := context.Background()
	now := time.Now()
	exprs := []string{"0 */4 * * *", "15 */4 * * *", "30 */4 * * *", "45 */4 * * *"}
	zones := []string{"UTC", "Europe/Paris", "America/New_York"}
	jobs := make([]config.Job, benchJobs)
	for i := range jobs {
		jobs[i] = testJob(b, fmt.Sprintf("job-%05d", i), exprs[i%len(exprs)], zones[i%len(zones)])
		if i%7 == 0 {
			jobs[i].Nodes = []string{fmt.Sprintf("role=r%d", i%3)}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(redisFillers)
	for i := range jobs {
		g.Go(func() error { return fillJob(gctx, rd, addr, i, &jobs[i], now) })
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("fill: %v", err)
	}
	writeNodes(b, rd, jobs, now)
	b.Logf("filled %d jobs in %v", len(jobs), time.Since(start).Round(time.Millisecond))
	return jobs, now
}

// fillJob writes job i's occurrences of the 24 hours before now.
func fillJob(ctx context.Context, rd *redislock.Redis, addr string, i int, j *config.Job, now time.Time) error {
	var slots []int64
	for t := j.Sched.Next(now.Add(-window)); !t.IsZero() && t.Before(now.Add(-time.Minute)); t = j.Sched.Next(t) {
		slots = append(slots, t.Unix())
	}
	missed := int64(0)
	if i%100 == 0 && len(slots) > 2 {
		missed = slots[len(slots)-3]
	}
	for k, s := range slots {
		if s == missed {
			continue
		}
		failed := i%10 == 0 && k >= len(slots)-2
		delay := time.Duration(200+i%1800) * time.Millisecond
		if i%50 == 1 && k == 1 {
			delay = 45 * time.Second
		}
		if err := runSlot(ctx, rd, j.Name, s, fmt.Sprintf("n%d", k%3), delay, failed); err != nil {
			return err
		}
	}
	if missed == 0 {
		return nil
	}
	return auditMissed(ctx, rd, addr, j.Name, slots, now)
}

// runSlot claims slot of job on node and finishes it as a run that started
// delay after the slot and took a second or two.
func runSlot(ctx context.Context, rd *redislock.Redis, job string, slot int64, node string, delay time.Duration, failed bool) error {
	req := ledger.ClaimRequest{Job: job, Slot: slot, Trigger: ledger.TriggerSchedule, Node: node,
		RunID: job + "-" + strconv.FormatInt(slot, 10), TTL: time.Minute, Lease: true,
		Windows: ledger.Windows{Early: time.Second, Answer: 25 * time.Hour}}
	c, err := rd.Claim(ctx, req)
	if err != nil {
		return err
	}
	if c.Outcome != ledger.Claimed {
		return fmt.Errorf("claim %s %d: outcome %v", job, slot, c.Outcome)
	}
	st := time.Unix(slot, 0).Add(delay)
	rec := ledger.RunRecord{RunID: req.RunID, Slot: slot, Trigger: ledger.TriggerSchedule, Node: node, Start: st,
		End: st.Add(time.Duration(1000+slot%997) * time.Millisecond), Attempts: 1, Result: ledger.ResultSuccess,
		Fence: c.Token, Claimed: c.Now, OutputTail: "fetching feed\nprocessed " + strconv.FormatInt(slot%5000, 10) + " items\ndone\n"}
	if failed {
		rec.Result, rec.ExitCode = ledger.ResultFailure, 2
		rec.OutputTail = strings.Repeat("retrying upstream: connection refused\n", 20) + "error: giving up after 20 attempts\n"
	}
	_, err = rd.Finish(ctx, ledger.FinishRequest{Job: job, Owner: req.Owner(), Record: rec})
	return err
}

// auditMissed records the job's slots without a record missed, as the
// audit of a ledger that began more than 24 hours ago does: its
// audited_to is set a day back first (a new ledger's audit starts at Redis
// time).
func auditMissed(ctx context.Context, rd *redislock.Redis, addr, job string, slots []int64, now time.Time) error {
	from := now.Add(-window - time.Hour).Unix()
	if _, err := redistest.Do(addr, 10*time.Second, "HSET", rd.Key("state", job), "audited_to", strconv.FormatInt(from, 10)); err != nil {
		return err
	}
	a, err := rd.Audit(ctx, ledger.AuditRequest{Job: job, From: from, Slots: slots, Window: time.Minute, Node: "n0",
		Reason: "not_claimed", LockTTL: time.Minute, Early: time.Second})
	if err == nil && len(a.Missed) != 1 {
		err = fmt.Errorf("audit %s: missed %v, want one slot", job, a.Missed)
	}
	return err
}

// writeNodes writes three live nodes' heartbeat records and job hashes.
func writeNodes(b *testing.B, rd *redislock.Redis, jobs []config.Job, now time.Time) {
	jv, err := json.Marshal(cluster.JobHashes{ConfigHash: "c1", Jobs: config.JobHashes(jobs)})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		rec := cluster.Record{NodeID: id, Instance: fmt.Sprint(i), Heartbeat: now, EveryMs: 1000, TTLMs: time.Hour.Milliseconds(),
			ConfigHash: "c1", JobsKey: true, Tags: map[string]string{"role": fmt.Sprintf("r%d", i)},
			Running: map[string]int64{fmt.Sprintf("job-%05d", i): 1}}
		v, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, _, err := rd.SwapNode(ctx, id, v, jv, 2*time.Hour); err != nil {
			b.Fatal(err)
		}
		if err := rd.IndexNode(ctx, id, now); err != nil {
			b.Fatal(err)
		}
	}
}
