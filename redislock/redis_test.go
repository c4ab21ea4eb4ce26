package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger/ledgertest"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/redis/rueidis"
)

// raw is a plain rueidis client for inspecting a test server.
func raw(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatalf("raw client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// cmdstats returns INFO commandstats as "evalsha" -> {"calls": n, ...}.
func cmdstats(t testing.TB, c rueidis.Client) map[string]map[string]int64 {
	t.Helper()
	info, err := c.Do(ledgertest.Ctx(t), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		out[name] = map[string]int64{}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			out[name][k] = n
		}
	}
	return out
}

// waitPing polls Ping until it succeeds (a reconnecting client), bounded.
func waitPing(t testing.TB, r *Redis) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := r.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis still unreachable after 15s: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

func TestRedis_ClaimIsOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed) // loads the scripts (EVALSHA, NOSCRIPT, EVAL)
	if _, err := r.Release(ledgertest.Ctx(t), "j", "x:y"); err != nil {
		t.Fatal(err)
	}
	c := raw(t, srv.Addr())
	if err := c.Do(ledgertest.Ctx(t), c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := int64(2); i < 2+n; i++ {
		req := ledgertest.LeaseReq("j", time.Minute)
		ledgertest.MustClaim(t, r, req, ledger.Claimed)
		if ok, err := r.Release(ledgertest.Ctx(t), "j", req.Owner()); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
	st := cmdstats(t, c)
	if got := st["evalsha"]["calls"]; got != 2*n {
		t.Errorf("evalsha calls for %d claims + %d releases: got %d, want %d", n, n, got, 2*n)
	}
	if got := st["eval"]["calls"]; got != 0 {
		t.Errorf("eval calls: got %d, want 0 (script cached)", got)
	}
}

func TestRedis_ScriptReloadedAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	before := ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed)
	srv.Restart() // no persistence: state and scripts are gone
	waitPing(t, r)
	if c := ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed); c.Token <= before.Token {
		t.Fatalf("token after the restart: got %d, want > %d (docs/protocol.md R4)", c.Token, before.Token)
	}
	st := cmdstats(t, raw(t, srv.Addr()))
	if st["evalsha"]["failed_calls"] != 1 || st["eval"]["calls"] != 1 {
		t.Errorf("after restart: got evalsha %v eval %v, want one NOSCRIPT then one EVAL", st["evalsha"], st["eval"])
	}
}

func TestRedis_ClaimFailsFastWhenDown(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	waitPing(t, r)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Claim(ctx, ledgertest.LeaseReq("j", time.Second))
	if err == nil {
		t.Fatalf("claim against stopped server: got nil error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("claim against stopped server took %v, want ≤ ctx deadline (500ms) + slack", d)
	}
	if !strings.HasPrefix(err.Error(), `claim "j": `) {
		t.Errorf("error: got %q, want prefix claim \"j\": ", err)
	}
}

func TestRedis_NewWhileDownConnectsLater(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	r, err := New(Options{Addresses: []string{srv.Addr()}, DialTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("New with standalone redis down: got %v, want a client", err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := r.Ping(ctx); err == nil {
		t.Fatalf("ping while down: got nil, want error")
	}
	srv.Restart()
	waitPing(t, r)
	ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed)
}

func TestRedis_NoDeadlineUsesCallTimeout(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{CallTimeout: 300 * time.Millisecond})
	waitPing(t, r)
	srv.Pause()
	defer srv.Resume()
	for _, op := range []struct {
		name string
		call func(context.Context) error
	}{
		{"claim", func(ctx context.Context) error {
			_, err := r.Claim(ctx, ledgertest.ManualReq("j"))
			return err
		}},
		{"state", func(ctx context.Context) error { _, err := r.State(ctx, "j"); return err }},
	} {
		start := time.Now()
		err := op.call(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s against paused server: got %v, want deadline exceeded", op.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s against paused server took %v, want about CallTimeout (300ms)", op.name, d)
		}
	}
}

func TestRedis_PartitionTimesOutThenRecovers(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	r := newRedis(t, p.Addr(), Options{CallTimeout: 300 * time.Millisecond})
	ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed)
	p.Cut()
	if _, err := r.Claim(context.Background(), ledgertest.ManualReq("j")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim while cut off: got %v, want deadline exceeded", err)
	}
	p.Restore()
	waitPing(t, r)
	// The timed-out claim of slot 2 may or may not have been applied.
	if c := ledgertest.MustClaim(t, r, ledgertest.ManualReq("j"), ledger.Claimed); c.Token < 2 {
		t.Fatalf("fence after partition: got %d, want ≥ 2", c.Token)
	}
}

// The keys are those of docs/protocol.md ("Keys"), with the ledger
// trimmed to ledger.max_occurrences (R9).
func TestRedis_KeysFollowSpec(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{KeyPrefix: "{cl}:"})
	held := ledgertest.LeaseReq("backup", time.Minute)
	ledgertest.MustClaim(t, r, held, ledger.Claimed)
	base := time.Now().Add(-time.Hour).Unix()
	for i := range int64(5) {
		req := ledgertest.Sched("backup", base+i, "n") // past slots (by backfill): old enough to be trimmed
		req.Trigger, req.Lease, req.IgnorePause, req.Retention = ledger.TriggerBackfill, false, true, ledger.Retention{Max: 3}
		c := ledgertest.MustClaim(t, r, req, ledger.Claimed)
		if _, err := r.Finish(ledgertest.Ctx(t), ledger.FinishRequest{Job: "backup", Record: ledger.RunRecord{RunID: req.RunID,
			Slot: req.Slot, Trigger: ledger.TriggerBackfill, Node: "n", Fence: c.Token, Result: ledger.ResultSuccess, Claimed: c.Now}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Pause(ledgertest.Ctx(t), "backup"); err != nil {
		t.Fatal(err)
	}
	c := raw(t, srv.Addr())
	want := map[string]string{"{cl}:job:backup": "string", "{cl}:state:backup": "hash",
		"{cl}:occ:backup": "hash", "{cl}:occidx:backup": "zset", "{cl}:paused:backup": "string"}
	for k, typ := range want {
		if got, err := c.Do(ledgertest.Ctx(t), c.B().Type().Key(k).Build()).ToString(); err != nil || got != typ {
			t.Errorf("TYPE %s: got %q, %v; want %s", k, got, err, typ)
		}
	}
	if n, _ := c.Do(ledgertest.Ctx(t), c.B().Hlen().Key("{cl}:occ:backup").Build()).AsInt64(); n > 4 {
		t.Errorf("HLEN of the ledger with max 3 records and the held lease's claim: got %d, want at most 4", n)
	}
	if v, _ := c.Do(ledgertest.Ctx(t), c.B().Get().Key("{cl}:job:backup").Build()).ToString(); v != held.Owner() {
		t.Errorf("lease value: got %q, want %s", v, held.Owner())
	}
}

func TestRedis_ErrorsHidePassword(t *testing.T) {
	srv := redistest.Start(t)
	c := raw(t, srv.Addr())
	if err := c.Do(ledgertest.Ctx(t), c.B().ConfigSet().ParameterValue().ParameterValue("requirepass", "right-pw").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Addresses: []string{srv.Addr()}, Password: "wrong-s3cret"})
	if err == nil {
		defer r.Close()
		_, err = r.Claim(ledgertest.Ctx(t), ledgertest.ManualReq("j"))
	}
	if err == nil {
		t.Fatalf("wrong password: got nil error")
	}
	t.Logf("error: %v", err)
	if strings.Contains(err.Error(), "wrong-s3cret") {
		t.Fatalf("error contains the password: %q", err)
	}
}

// TestRedis_Peek: Peek reads a slot's record and the ledger's seq in one
// small script call: the claim's status and reason when there is one, not
// found when the slot (or the job) has none.
func TestRedis_Peek(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedis(t, srv.Addr(), Options{})
	slot := ledgertest.NowSlot(t, r)
	ledgertest.MustClaim(t, r, ledgertest.Sched("j", slot, "a"), ledger.Claimed)
	c := raw(t, srv.Addr())
	if err := c.Do(ledgertest.Ctx(t), c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, found, err := r.Peek(ledgertest.Ctx(t), "j", slot)
	if err != nil || !found || got.Outcome != ledger.ClaimedElsewhere || got.Status != "claimed" || got.Seq < 1 {
		t.Errorf("Peek of a claimed slot: %+v %v %v, want claimed_elsewhere, status claimed, the ledger's seq", got, found, err)
	}
	for _, tc := range []struct {
		job  string
		slot int64
	}{{"j", slot + 1}, {"nojob", slot}} {
		if got, found, err := r.Peek(ledgertest.Ctx(t), tc.job, tc.slot); err != nil || found {
			t.Errorf("Peek of %s's slot %d (no record): %+v %v %v, want not found", tc.job, tc.slot, got, found, err)
		}
	}
	st := cmdstats(t, c)
	// The first finds the script not loaded (EVALSHA answered NOSCRIPT, then EVAL).
	if calls := st["evalsha"]["calls"] - st["evalsha"]["failed_calls"] + st["eval"]["calls"]; calls != 3 || st["hget"]["calls"] != 3 || st["hmget"]["calls"] != 3 {
		t.Errorf("commands of 3 peeks: %v, want 3 script calls, each one HGET and one HMGET", st)
	}
}
