package engine

import (
	"context"
	"encoding/json"
	"github.com/cronlock/cronlock/ledger/memory"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/statedir"
	"go.uber.org/zap"
)

// openMemControl opens the memory backend and its control state in dir,
// as a daemon start does; the caller closes both.
func openMemControl(t *testing.T, dir string) (*memControl, *statedir.Dir) {
	t.Helper()
	st, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := memory.OpenMemory(st)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newMemControl(m, st, zap.NewNop(), time.Now, func() cluster.Record {
		return cluster.Record{NodeID: "n1", Instance: "i1", Heartbeat: time.Now().UTC(), EveryMs: 5000, TTLMs: 15000,
			Jobs: map[string]string{"backup": "h"}, Running: map[string]int64{"backup": 1}}
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

// A pause through the memory backend's control state pauses the backend
// (a claim is refused: paused), carries its record (who, when, why,
// until) in State, writes a pause event, and lifts itself at its end; a
// resume returns the pause it lifted and writes a resume event.
func TestMemControl_PauseLiftsItselfAndResumes(t *testing.T) {
	c, st := openMemControl(t, t.TempDir())
	defer st.Close()
	defer c.close()
	ctx := t.Context()
	now := time.Now().UTC()
	p := ledger.Pause{By: "ops@web1", At: now, Note: "migration", Until: now.Add(300 * time.Millisecond)}
	if err := c.PauseFor(ctx, "backup", p); err != nil {
		t.Fatal(err)
	}
	s, err := c.State(ctx, "backup")
	if err != nil || !s.Paused || s.Pause == nil || s.Pause.By != "ops@web1" || s.Pause.Note != "migration" || !s.Pause.Until.Equal(p.Until) {
		t.Fatalf("state after the pause: %+v %v; want paused with its record", s, err)
	}
	claim, err := c.m.Claim(ctx, ledger.ClaimRequest{Job: "backup", Slot: now.Unix(), Trigger: ledger.TriggerSchedule,
		Node: "n1", RunID: "x", TTL: time.Minute, Windows: ledger.Windows{Early: 2 * time.Second, Answer: 2 * time.Second}})
	if err != nil || claim.Outcome != ledger.Paused {
		t.Fatalf("claim while paused: %+v %v; want Paused", claim, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Paused && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		s, _ = c.State(ctx, "backup")
	}
	if s.Paused {
		t.Fatalf("still paused %v after its end", time.Since(p.Until))
	}
	if err := c.PauseFor(ctx, "backup", ledger.Pause{By: "ops@web1", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	old, err := c.ResumeBy(ctx, "backup", "dev@web2", time.Now().UTC())
	if err != nil || old == nil || old.By != "ops@web1" || !old.Until.IsZero() {
		t.Fatalf("resume: %+v %v; want the lifted pause without end", old, err)
	}
	if old, err := c.ResumeBy(ctx, "backup", "dev@web2", time.Now().UTC()); err != nil || old != nil {
		t.Errorf("resume of a job not paused: %+v %v; want nil", old, err)
	}
	evs, err := c.Events(ctx, "backup", 10)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if err != nil || strings.Join(types, ",") != "resume,resume,pause,pause" || evs[0].By != "dev@web2" || evs[0].ID == "" ||
		evs[0].ID == evs[1].ID {
		t.Errorf("events: %+v %v; want resume, resume, pause, pause, newest first, with distinct ids", evs, err)
	}
	if evs, _ := c.Events(ctx, "backup", 1); len(evs) != 1 || evs[0].Type != "resume" {
		t.Errorf("events limit 1: %+v", evs)
	}
}

// The pause records survive a restart: a pause with a future end is
// loaded with its record and still lifts itself; one whose end passed
// while the daemon was stopped is lifted at the start.
func TestMemControl_PausesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	c, st := openMemControl(t, dir)
	ctx := t.Context()
	now := time.Now().UTC()
	for job, until := range map[string]time.Time{"long": now.Add(time.Hour), "short": now.Add(200 * time.Millisecond), "forever": {}} {
		if err := c.PauseFor(ctx, job, ledger.Pause{By: "ops@web1", At: now, Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	c.close()
	st.Close()
	time.Sleep(300 * time.Millisecond) // "short" ends while stopped
	c, st = openMemControl(t, dir)
	defer st.Close()
	defer c.close()
	for job, want := range map[string]bool{"long": true, "short": false, "forever": true} {
		s, err := c.State(ctx, job)
		if err != nil || s.Paused != want || want && (s.Pause == nil || s.Pause.By != "ops@web1") {
			t.Errorf("%s after the restart: %+v %v; want paused %v with its record", job, s, err, want)
		}
	}
}

// On the memory backend the API reads and changes the daemon's own state:
// reads work without Redis, a trusted peer (the control socket) pauses
// without a token and is named as the requester, a request from elsewhere
// without a configured token is refused with a hint, run requests answer
// 501 saying they need Redis, and every error is JSON with a hint.
func TestMemControl_API(t *testing.T) {
	c, st := openMemControl(t, t.TempDir())
	defer st.Close()
	defer c.close()
	cfg, err := config.Parse([]byte("jobs:\n- {name: backup, schedule: '@daily', command: 'true'}\n"), "yaml",
		config.Options{Environ: []string{"CRONLOCK_NODE_STATE_DIR=/tmp/x", "CRONLOCK_NODE_ID=n1"}})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Options{Log: zap.NewNop(), Jobs: func() []config.Job { return cfg.Jobs }, Memory: c, NodeID: "n1"})
	do := func(method, path, body string, peer bool) (int, map[string]any, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if peer {
			req = req.WithContext(api.WithPeer(context.Background(), api.Peer{UID: 0, Name: "root@web1"}))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		data, _ := io.ReadAll(rec.Result().Body)
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		return rec.Code, m, string(data)
	}
	if code, _, body := do("GET", "/api/v1/jobs", "", false); code != 200 || !strings.Contains(body, `"job": "backup"`) ||
		!strings.Contains(body, `"runners": [`+"\n"+`      "n1"`) {
		t.Errorf("GET jobs: %d %s; want 200, backup, runnable on n1", code, body)
	}
	if code, m, body := do("POST", "/api/v1/jobs/backup/pause", `{"for": "1h"}`, false); code != 403 ||
		!strings.Contains(m["hint"].(string), "control socket") {
		t.Errorf("pause without a token, not a peer: %d %s; want 403 with a hint naming the control socket", code, body)
	}
	if code, _, body := do("POST", "/api/v1/jobs/backup/pause", `{"for": "1h", "note": "why"}`, true); code != 200 ||
		!strings.Contains(body, `"by": "root@web1"`) {
		t.Errorf("pause by a peer: %d %s; want 200 by root@web1", code, body)
	}
	if code, m, body := do("GET", "/api/v1/jobs/backup", "", false); code != 200 || m["paused"] != true {
		t.Errorf("GET job after the pause: %d %s; want paused", code, body)
	}
	if code, m, body := do("POST", "/api/v1/jobs/backup/run", `{}`, true); code != 501 ||
		!strings.Contains(m["error"].(string), "need the redis backend") || !strings.Contains(m["hint"].(string), "cronlock run backup") {
		t.Errorf("run request on memory: %d %s; want 501 saying it needs redis, with a hint", code, body)
	}
	if code, m, body := do("GET", "/api/v1/nodes", "", false); code != 200 || !strings.Contains(body, `"node_id": "n1"`) || m["nodes"] == nil {
		t.Errorf("GET nodes: %d %s; want this daemon", code, body)
	}
	if code, m, body := do("GET", "/api/v1/nope", "", false); code != 404 || m["error"] == nil || m["hint"] == nil {
		t.Errorf("unknown path: %d %s; want 404 {error, hint}", code, body)
	}
}

// The engine's HTTP handler answers every error as JSON, an unknown path
// outside the API included (it was Go's plain-text "404 page not found").
func TestHandler_UnknownPathIsJSON(t *testing.T) {
	e := &Engine{}
	for _, path := range []string{"/", "/nope", "/api", "/api/v2/jobs"} {
		rec := httptest.NewRecorder()
		e.handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var m map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &m); rec.Code != http.StatusNotFound || err != nil || m["error"] == "" || m["hint"] == "" ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %q; want 404 with a JSON {error, hint}", path, rec.Code, rec.Body.String())
		}
	}
}

// The control socket admits the daemon's own user and root as trusted
// peers (named user@host), and refuses any other uid, or a connection
// whose credentials could not be read, with a JSON 403 and a hint.
func TestPeerGate(t *testing.T) {
	euid := uint32(os.Geteuid())
	for _, c := range []struct {
		cred *syscall.Ucred
		want int
	}{
		{&syscall.Ucred{Uid: euid}, 200},
		{&syscall.Ucred{Uid: 0}, 200},
		{&syscall.Ucred{Uid: 54321}, 403},
		{nil, 403},
	} {
		if c.cred != nil && c.cred.Uid == 54321 && euid == 54321 {
			continue
		}
		req := httptest.NewRequest("GET", "/api/v1/jobs", nil)
		if c.cred != nil {
			req = req.WithContext(context.WithValue(req.Context(), credKey{}, c.cred))
		}
		rec := httptest.NewRecorder()
		var peer api.Peer
		var trusted bool
		peerGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peer, trusted = api.PeerOf(r)
		})).ServeHTTP(rec, req)
		switch {
		case rec.Code != c.want:
			t.Errorf("cred %+v: got %d %s, want %d", c.cred, rec.Code, rec.Body.String(), c.want)
		case c.want == 200 && (!trusted || int(c.cred.Uid) != peer.UID || !strings.Contains(peer.Name, "@")):
			t.Errorf("cred %+v: peer %+v (trusted %v), want its uid, named user@host", c.cred, peer, trusted)
		case c.want == 403 && !strings.Contains(rec.Body.String(), `"hint"`):
			t.Errorf("cred %+v: body %s, want a JSON error with a hint", c.cred, rec.Body.String())
		}
	}
}

// ApplyMemoryPauses (cronlock run on the daemon's state file while no
// daemon runs) lifts a pause whose end passed while the daemon was
// stopped, and keeps the others.
func TestApplyMemoryPauses(t *testing.T) {
	dir := t.TempDir()
	c, st := openMemControl(t, dir)
	now := time.Now().UTC()
	for job, until := range map[string]time.Time{"ended": now.Add(100 * time.Millisecond), "on": now.Add(time.Hour)} {
		if err := c.PauseFor(t.Context(), job, ledger.Pause{By: "ops@web1", At: now, Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	c.close()
	st.Close()
	time.Sleep(200 * time.Millisecond)
	st, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := memory.OpenMemory(st)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := m.State(t.Context(), "ended"); !s.Paused {
		t.Fatalf("before ApplyMemoryPauses the state file has ended paused: %+v (the test shows nothing)", s)
	}
	if err := ApplyMemoryPauses(m, st); err != nil {
		t.Fatal(err)
	}
	for job, want := range map[string]bool{"ended": false, "on": true} {
		if s, _ := m.State(t.Context(), job); s.Paused != want {
			t.Errorf("%s: paused %v, want %v", job, s.Paused, want)
		}
	}
}
