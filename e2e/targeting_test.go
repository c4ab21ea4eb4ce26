package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// TestTargeting_OnlyTaggedNodeRuns is issue 13, "What it must show" 3: a
// per-second job for role=db on 3 nodes of which one has that tag runs
// every slot on that node only; when it stops, the others report the job
// unrunnable (error log, cronlock_job_unrunnable 1, `cronlock status`)
// within a heartbeat TTL (15 s).
func TestTargeting_OnlyTaggedNodeRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	job := map[string]any{"name": "dbjob", "schedule": "* * * * * *", "command": ledgerCommand(ledger, ""),
		"timeout": "10s", "nodes": []string{"role=db"}}
	cfg := writeConfig(t, redisConfig(srv.Addr(), job))
	listen := map[string]string{"web1": freeAddr(t), "web2": freeAddr(t)}
	db := startNode(t, cfg, withNodeID("db1"), withEnv("CRONLOCK_NODE_TAGS=role=db,zone=a"))
	web1 := startNode(t, cfg, withNodeID("web1"), withEnv("CRONLOCK_NODE_TAGS=role=web", "CRONLOCK_HTTP_LISTEN="+listen["web1"]))
	web2 := startNode(t, cfg, withNodeID("web2"), withEnv("CRONLOCK_HTTP_LISTEN="+listen["web2"]))
	nodes := []*node{db, web1, web2}
	for _, n := range nodes {
		waitEngineRunning(n)
	}
	// The db node runs the job for a while, past the watchers' first
	// judgement (one 5 s beat after the start): its record carries its tags.
	time.Sleep(6 * time.Second)
	const msg = "job unrunnable: no live node's node.tags match its nodes:, so its slots are not run; start a node with these tags or change the job's nodes:"
	for _, id := range []string{"web1", "web2"} {
		if mfs := scrape(t, listen[id]); metricValue(mfs, "cronlock_job_unrunnable", "job", "dbjob") != 0 || mfs["cronlock_job_unrunnable"] == nil {
			t.Errorf("db node live: %s exports cronlock_job_unrunnable{job=\"dbjob\"} %v, want 0", id, metricValue(mfs, "cronlock_job_unrunnable", "job", "dbjob"))
		}
	}
	for _, n := range []*node{web1, web2} {
		for _, e := range n.Logs() {
			if e.is(msg, "dbjob") {
				t.Errorf("%s reported dbjob unrunnable while the db node was live", n.name)
			}
		}
	}
	stopAll(t, 15*time.Second, db)
	stopped := time.Now()
	for _, n := range []*node{web1, web2} {
		e := n.WaitLog(15*time.Second, msg, func(e logEntry) bool { return e.is(msg, "dbjob") })
		if e.Str("level") != "error" {
			t.Errorf("%s: unrunnable logged at %q, want error", n.name, e.Str("level"))
		}
		t.Logf("%s reported dbjob unrunnable %v after the db node stopped", n.name, e.Time().Sub(stopped).Round(10*time.Millisecond))
	}
	for _, id := range []string{"web1", "web2"} {
		if v := metricValue(scrape(t, listen[id]), "cronlock_job_unrunnable", "job", "dbjob"); v != 1 {
			t.Errorf("%s: cronlock_job_unrunnable{job=\"dbjob\"} = %v, want 1", id, v)
		}
	}
	out, err := exec.Command(binary, "status", "-json", "-config", cfg).Output()
	var rows []struct {
		Job        string   `json:"job"`
		Nodes      []string `json:"nodes"`
		Unrunnable bool     `json:"unrunnable"`
	}
	if err != nil || json.Unmarshal(out, &rows) != nil || len(rows) != 1 || !rows[0].Unrunnable || strings.Join(rows[0].Nodes, ",") != "role=db" {
		t.Errorf("cronlock status -json: %v %s; want dbjob unrunnable with nodes [role=db]", err, out)
	}
	stopAll(t, 15*time.Second, web1, web2)

	runs := readLedger(t, ledger)
	if len(runs) < 3 {
		t.Errorf("got %d runs, want at least 3 (the db node ran for 6 s)", len(runs))
	}
	seen := map[int64]bool{}
	for _, r := range runs {
		if r.Node != "db1" {
			t.Errorf("slot %d ran on %s, want only db1 (the node with role=db)", r.Slot, r.Node)
		}
		if seen[r.Slot] {
			t.Errorf("slot %d ran twice", r.Slot)
		}
		seen[r.Slot] = true
	}
	for _, n := range []*node{web1, web2} {
		for _, e := range n.Logs() {
			if e.Str("job") == "dbjob" && (e.Msg() == "slot skipped" || strings.HasPrefix(e.Msg(), "claim")) {
				t.Errorf("%s claimed or skipped dbjob (%s %s), want nothing: the job is not scheduled there", n.name, e.Msg(), e.Str("reason"))
				break
			}
		}
	}
}

// TestTargeting_KilledNodeReportedWithinTTL: a tagged node that is killed
// leaves its heartbeat record behind; the other node stops counting it 10 s
// after its last heartbeat and reports the job unrunnable within one
// heartbeat TTL (15 s) of the kill.
func TestTargeting_KilledNodeReportedWithinTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	job := map[string]any{"name": "dbjob", "schedule": "0 0 1 1 *", "command": "true", "nodes": []string{"role=db"}}
	cfg := writeConfig(t, redisConfig(srv.Addr(), job))
	db := startNode(t, cfg, withNodeID("db1"), withEnv("CRONLOCK_NODE_TAGS=role=db"))
	web := startNode(t, cfg, withNodeID("web1"))
	waitEngineRunning(web)
	db.WaitLog(10*time.Second, "first heartbeat", heartbeatWritten)
	db.Kill()
	killed := time.Now()
	const msg = "job unrunnable: no live node's node.tags match its nodes:, so its slots are not run; start a node with these tags or change the job's nodes:"
	e := web.WaitLog(17*time.Second, msg, func(e logEntry) bool { return e.is(msg, "dbjob") })
	after := e.Time().Sub(killed)
	t.Logf("web1 reported dbjob unrunnable %v after the db node was killed", after.Round(10*time.Millisecond))
	if after > 15*time.Second {
		t.Errorf("reported %v after the kill, want within the heartbeat TTL, 15 s", after)
	}
	if after < 5*time.Second {
		t.Errorf("reported %v after the kill, want not before the record is 10 s old (the killed node's last beat was at most 5 s before)", after)
	}
	stopAll(t, 10*time.Second, web)
}

// TestTargeting_RunRequestTakenByTaggedNode: `cronlock run` of a job with
// nodes: asks the cluster, and only a daemon whose node.tags match takes
// the request (the others have the job in their configuration but do
// not schedule it); with no such daemon live the command runs nothing
// here without -force.
func TestTargeting_RunRequestTakenByTaggedNode(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ledger := newLedger(t)
	cfg := writeConfig(t, controlConfig(srv.Addr(), map[string]any{"name": "dbjob", "schedule": "0 0 1 1 *",
		"command": `echo "$CRONLOCK_NODE_ID $CRONLOCK_TRIGGER" >> ` + shellQuote(ledger), "nodes": []string{"role=db"}}))
	nodes, _ := startNodes(t, cfg, nodeSpec{id: "web1", env: []string{"CRONLOCK_NODE_TAGS=role=web"}},
		nodeSpec{id: "db1", env: []string{"CRONLOCK_NODE_TAGS=role=db"}}, nodeSpec{id: "web2"})
	waitFor(t, 5*time.Second, "three live nodes", func() bool { return len(readNodes(t, cfg).states()) == 3 })
	const runs = 4
	for i := range runs {
		cmd := exec.Command(binary, "run", "dbjob", "-wait", "-timeout", "10s", "-config", cfg)
		cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "taken by db1") {
			t.Fatalf("run %d: %v\n%s\nwant it taken by db1, the node with role=db", i, err, out)
		}
	}
	lines := ledgerLines(t, ledger)
	if len(lines) != runs {
		t.Fatalf("ledger %q: want %d runs", lines, runs)
	}
	for _, l := range lines {
		if l[0] != "db1" || l[1] != "manual" {
			t.Errorf("run %q: want a manual run on db1", l)
		}
	}
	stopAll(t, 10*time.Second, nodes[1])
	cmd := exec.Command(binary, "run", "dbjob", "-config", cfg)
	cmd.Env = append(cmd.Environ(), "CRONLOCK_NODE_STATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "runs only on nodes whose node.tags have role=db") {
		t.Errorf("run with the db node stopped: %v\n%s\nwant a refusal naming the tags", err, out)
	}
	if n := len(ledgerLines(t, ledger)); n != runs {
		t.Errorf("ledger has %d runs after the refusal, want %d", n, runs)
	}
	stopAll(t, 10*time.Second, nodes[0], nodes[2])
}
