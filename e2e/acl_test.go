package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// minimalACL is the ACL of README.md, "Redis ACL": the commands cronlock
// sends (claims, renewals, releases, history and the health checks run as
// Lua scripts, so the commands the scripts call are listed too) on the keys
// of its prefix only.
var minimalACL = []string{"on", ">s3cret", "resetkeys", "~cronlock:*", "resetchannels", "&cronlock:*", "-@all",
	"+hello", "+ping", "+time", "+info", "+config|get", "+evalsha", "+eval", "+script|load",
	"+hmget", "+hset", "+hincrby", "+hgetall", "+set", "+get", "+del", "+exists", "+pttl", "+pexpire",
	"+xadd", "+xrevrange", "+zadd", "+zscore", "+zrange", "+zrem", "+zremrangebyscore", "+zrangebyscore", "+rpush", "+lpop", "+lrem", "+hget", "+publish", "+subscribe",
	"+zcard", "+zrevrange", "+hexists", "+hdel", "+ltrim", "+lrange", "+xread"}

// refusedByACL reports whether s holds a Redis ACL refusal: NOPERM for a
// command or key, or the error of a command a script called.
func refusedByACL(s string) bool {
	return strings.Contains(s, "NOPERM") || strings.Contains(s, "can't run this command")
}

// TestACL_MinimalUser runs a daemon and the operating commands as a Redis
// user with exactly minimalACL: slots run, the node is ready, status,
// history, pause, resume and run work, and no command is refused (NOPERM).
func TestACL_MinimalUser(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Do(append([]string{"ACL", "SETUSER", "cronlock"}, minimalACL...)...)
	ledger := newLedger(t)
	listen := freeAddr(t)
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "tick", "schedule": "* * * * * *",
		"command": ledgerCommand(ledger, "") + "; echo tick ran", "catchup_window": "10s", "on_success": "echo hook ran"},
		// a job for a tag no node has: the targeting watcher lists the node records
		map[string]any{"name": "tagged", "schedule": "0 0 1 1 *", "command": "true", "nodes": []string{"role=none"}})
	cfg["redis"] = map[string]any{"address": srv.Addr(), "username": "cronlock", "password": "s3cret"}
	cfg["http"] = map[string]any{"listen": listen}
	cfgFile := writeConfig(t, cfg)
	nodes, ready := startNodes(t, cfgFile, nodeSpec{id: "n1"})
	waitLedgerSlotAfter(t, ledger, "tick", ready.Add(time.Second))
	nodes[0].WaitLog(15*time.Second, "tagged reported unrunnable", func(e logEntry) bool {
		return e.Str("job") == "tagged" && strings.HasPrefix(e.Msg(), "job unrunnable")
	})
	if code, body := httpGet(t, "http://"+listen+"/readyz"); code != 200 {
		t.Errorf("/readyz: got %d %q, want 200", code, body)
	}
	past := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	backfill := []string{"backfill", "tick", "-from", past.Format(time.RFC3339), "-to", past.Add(time.Second).Format(time.RFC3339)}
	for _, args := range [][]string{{"status"}, {"history", "tick"}, {"logs", "tick"}, {"pause", "tick"}, {"resume", "tick"}, {"run", "tick"},
		backfill, append(backfill, "-dry-run")} {
		cmd := exec.Command(binary, append(args, "-config", cfgFile)...)
		cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || refusedByACL(string(out)) {
			t.Errorf("cronlock %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	stopAll(t, 10*time.Second, nodes...)
	for _, e := range nodes[0].Logs() {
		for _, v := range e {
			if s, ok := v.(string); ok && refusedByACL(s) {
				t.Errorf("daemon log: %s: %s", e.Msg(), s)
			}
		}
	}
	// The manual run's line has no scheduled time: count lines, not slots.
	if lines := ledgerLines(t, ledger); len(lines) < 3 {
		t.Errorf("got %d runs, want the per-second job's and the manual one", len(lines))
	}
}

// With one right of minimalACL missing, the error names it: without
// +evalsha the readiness probe fails and /readyz names the command; without
// +zadd (called by the claim script) every claim fails, is skipped
// redis_error, and the claim warning names the command and the grant.
// Nothing runs.
func TestACL_MissingRightIsNamed(t *testing.T) {
	t.Parallel()
	for _, missing := range []string{"evalsha", "zadd"} {
		t.Run(missing, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			var acl []string
			for _, r := range minimalACL {
				if r != "+"+missing {
					acl = append(acl, r)
				}
			}
			srv.Do(append([]string{"ACL", "SETUSER", "cronlock"}, acl...)...)
			ledger := newLedger(t)
			listen := freeAddr(t)
			cfg := redisConfig(srv.Addr(), map[string]any{"name": "tick", "schedule": "* * * * * *", "command": ledgerCommand(ledger, "")})
			cfg["redis"] = map[string]any{"address": srv.Addr(), "username": "cronlock", "password": "s3cret"}
			cfg["http"] = map[string]any{"listen": listen}
			nodes, _ := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"})
			// Redis names a command a client sends (NOPERM … 'evalsha'), but
			// one a script calls only by the script's SHA1 and line: cronlock
			// reads the command from its script (redislock.ScriptACLError).
			named := func(e logEntry) bool {
				return (strings.Contains(e.Str("error"), "NOPERM") && strings.Contains(e.Str("error"), "'"+missing+"'")) ||
					strings.Contains(e.Str("error"), "grant +"+missing)
			}
			switch missing {
			case "evalsha":
				waitReadiness(t, "n1", listen, false, "'evalsha'")
				nodes[0].WaitLog(5*time.Second, "an error naming evalsha", func(e logEntry) bool { return e.Str("level") == "error" && named(e) })
			case "zadd":
				nodes[0].WaitLog(5*time.Second, "a claim warning naming zadd", func(e logEntry) bool {
					return e.Msg() == "claim failed; not run" && named(e)
				})
			}
			stopAll(t, 10*time.Second, nodes...)
			if runs := ledgerLines(t, ledger); len(runs) != 0 {
				t.Errorf("got %d runs without +%s, want none", len(runs), missing)
			}
		})
	}
}

// In Cluster mode the minimal ACL plus +cluster|slots (README.md, "Redis
// ACL") is enough: the client and the readiness probe read the slot map,
// and jobs spread over the shards run.
func TestACL_MinimalUserCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	for _, m := range c.Masters {
		m.Do(append([]string{"ACL", "SETUSER", "cronlock"}, append(minimalACL, "+cluster|slots")...)...)
	}
	ledger := newLedger(t)
	listen := freeAddr(t)
	jobs, names := everySecondJobs(ledger, "job", 6, nil)
	cfg := redisConfig("", jobs...)
	cfg["redis"] = map[string]any{"addresses": c.Addrs(), "username": "cronlock", "password": "s3cret"}
	cfg["http"] = map[string]any{"listen": listen}
	nodes, ready := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"})
	for _, j := range names {
		waitLedgerSlotAfter(t, ledger, j, ready)
	}
	waitReadiness(t, "n1", listen, true, "ready")
	stopAll(t, 10*time.Second, nodes...)
	for _, e := range nodes[0].Logs() {
		if strings.Contains(e.Str("error"), "NOPERM") || strings.Contains(e.Str("error"), "grant +") {
			t.Errorf("daemon log: %s: %s", e.Msg(), e.Str("error"))
		}
	}
}
