package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/redislock"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.uber.org/zap"
)

const testToken = "t0k3n"

// fixture is a handler on a real Redis with two jobs (one for role=db
// nodes, with an active window), one finished run, a node record (of a
// role=web node) and an event.
type fixture struct {
	t      *testing.T
	r      *redislock.Redis
	h      http.Handler
	opts   Options // h's options
	router routers.Router
}

func newFixture(t *testing.T, token []byte, auth string) *fixture {
	t.Helper()
	srv := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	cfg, err := config.Parse([]byte(`
redis: {address: "`+srv.Addr()+`"}
jobs:
  - {name: backup, schedule: "0 3 * * *", command: "true", timezone: Europe/Paris}
  - {name: report, schedule: "@daily", command: "true", nodes: [role=db], active_from: "2020-01-01T00:00:00Z", active_until: "2099-01-01T00:00:00Z"}
`), "yaml", config.Options{Hostname: "web1", Environ: []string{"CRONLOCK_NODE_STATE_DIR=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	start := time.Now().Add(-time.Hour).UTC()
	if _, err := r.Finish(ctx, ledger.FinishRequest{Job: "backup", Record: ledger.RunRecord{RunID: "r1", Slot: start.Unix(), Node: "web1", Start: start,
		End: start.Add(time.Second), Attempts: 1, Result: "success", Trigger: ledger.TriggerSchedule, Fence: 3, OutputTail: "done\n"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	// The record as the heartbeat writes it: the job hashes in their own key.
	rec, _ := json.Marshal(cluster.Record{NodeID: "web1", Instance: "i1", Hostname: "web1", PID: 1, Version: "test", Started: now,
		Heartbeat: now, EveryMs: 5000, TTLMs: 15000, ConfigHash: "h", JobsKey: true, Running: map[string]int64{"backup": 1},
		Tags: map[string]string{"role": "web"}})
	hashes, _ := json.Marshal(cluster.JobHashes{ConfigHash: "h", Jobs: config.JobHashes(cfg.Jobs)})
	if _, _, err := r.SwapNode(ctx, "web1", rec, hashes, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.IndexNode(ctx, "web1", now); err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	// The document's server is relative (/api/v1); the router matches
	// absolute URLs.
	doc.Servers = openapi3.Servers{{URL: "http://localhost/api/v1"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	var tokenOf func() []byte
	if token != nil {
		tokenOf = func() []byte { return token }
	}
	o := Options{Log: zap.NewNop(), Jobs: func() []config.Job { return cfg.Jobs }, Token: tokenOf, Auth: auth, NodeID: "web1",
		Redis: func() (*redislock.Redis, error) { return r, nil }}
	return &fixture{t: t, r: r, h: New(o), opts: o, router: router}
}

// do sends a request and checks the response against the OpenAPI
// document (status code declared, body valid against its schema). It
// returns the status and the body.
func (f *fixture) do(method, path, token, body string) (int, []byte) {
	f.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	res := rec.Result()
	data, _ := io.ReadAll(res.Body)
	route, params, err := f.router.FindRoute(httptest.NewRequest(method, "http://localhost"+path, nil))
	if err != nil {
		if res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
			f.t.Errorf("%s %s: not in the OpenAPI document (%v) but answered %d", method, path, err, res.StatusCode)
		}
		f.checkError(method, path, res, data)
		return res.StatusCode, data
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(data)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		f.t.Errorf("%s %s → %d: response does not match the OpenAPI document: %v\n%s", method, path, res.StatusCode, err, data)
	}
	if res.StatusCode >= 400 {
		f.checkError(method, path, res, data)
	}
	return res.StatusCode, data
}

// checkError checks that an error answer is {"error": message} or
// {"error": message, "hint": what to do}.
func (f *fixture) checkError(method, path string, res *http.Response, data []byte) {
	f.t.Helper()
	checkError(f.t, method+" "+path, res, data)
}

// checkError checks that an error answer is {"error": message} or
// {"error": message, "hint": what to do}, as JSON.
func checkError(t *testing.T, what string, res *http.Response, data []byte) {
	t.Helper()
	var e map[string]string
	err := json.Unmarshal(data, &e)
	if err != nil || e["error"] == "" || !(len(e) == 1 || len(e) == 2 && e["hint"] != "") ||
		res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s → %d: body %s, want a JSON object {\"error\": message, \"hint\": …}", what, res.StatusCode, data)
	}
}

// Every endpoint's answers, successes and errors, validate against
// openapi.json, and the auth rules hold: writes need the token (401
// without or with a wrong one), reads do not with auth "writes".
func TestAPI_ResponsesMatchOpenAPI(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	for _, c := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/api/v1/jobs", "", "", 200},
		{"GET", "/api/v1/jobs/backup", "", "", 200},
		{"GET", "/api/v1/jobs/report", "", "", 200},
		{"GET", "/api/v1/jobs/nope", "", "", 404},
		{"GET", "/api/v1/jobs/backup/runs?limit=5", "", "", 200},
		{"GET", "/api/v1/jobs/backup/runs?limit=0", "", "", 400},
		{"GET", "/api/v1/nodes", "", "", 200},
		{"GET", "/api/v1/openapi.json", "", "", 200},
		{"POST", "/api/v1/jobs/backup/pause", "", `{"for": "1h"}`, 401},
		{"POST", "/api/v1/jobs/backup/pause", "wrong", `{"for": "1h"}`, 401},
		{"POST", "/api/v1/jobs/backup/pause", testToken, `{"for": "soon"}`, 400},
		{"POST", "/api/v1/jobs/backup/pause", testToken, `{"for": "1h", "until": "2099-01-01T00:00:00Z"}`, 400},
		{"POST", "/api/v1/jobs/backup/pause", testToken, `{"bogus": 1}`, 400},
		{"POST", "/api/v1/jobs/nope/pause", testToken, ``, 404},
		{"POST", "/api/v1/jobs/backup/pause", testToken, `{"for": "1h", "note": "db migration"}`, 200},
		{"GET", "/api/v1/jobs/backup", "", "", 200},
		{"GET", "/api/v1/jobs/backup/events", "", "", 200},
		{"POST", "/api/v1/jobs/backup/resume", testToken, ``, 200},
		{"POST", "/api/v1/jobs/backup/resume", testToken, ``, 200},
		{"POST", "/api/v1/jobs/backup/run", "", `{}`, 401},
		{"POST", "/api/v1/jobs/backup/run", testToken, `{"timeout": "20m"}`, 400},
		{"POST", "/api/v1/jobs/backup/run", testToken, `{"timeout": "300ms"}`, 504},
		{"DELETE", "/api/v1/jobs/backup", "", "", 405},
		{"GET", "/api/v1/nothing", "", "", 404},
	} {
		if got, body := f.do(c.method, c.path, c.token, c.body); got != c.want {
			t.Errorf("%s %s (token %q, body %s): got %d %s, want %d", c.method, c.path, c.token, c.body, got, body, c.want)
		}
	}
	var job struct {
		RunningOn []string `json:"running_on"`
		Last      struct {
			RunID string `json:"run_id"`
		} `json:"last"`
		NextTimes []string `json:"next_fire_times"`
	}
	_, body := f.do("GET", "/api/v1/jobs/backup", "", "")
	if err := json.Unmarshal(body, &job); err != nil || len(job.RunningOn) != 1 || job.Last.RunID != "r1" || len(job.NextTimes) != 3 {
		t.Errorf("GET /api/v1/jobs/backup: %s; want running on web1, last run r1, 3 next fire times", body)
	}
	var report struct {
		Window     string   `json:"window"`
		Nodes      []string `json:"nodes"`
		Runners    []string `json:"runners"`
		Unrunnable bool     `json:"unrunnable"`
	}
	_, body = f.do("GET", "/api/v1/jobs/report", "", "")
	if err := json.Unmarshal(body, &report); err != nil || report.Window != "active" || len(report.Nodes) != 1 ||
		len(report.Runners) != 0 || !report.Unrunnable {
		t.Errorf("GET /api/v1/jobs/report: %s; want window active, nodes [role=db], no runners, unrunnable", body)
	}
	var nodes struct {
		Nodes []struct {
			Jobs map[string]string `json:"jobs"`
		} `json:"nodes"`
	}
	_, body = f.do("GET", "/api/v1/nodes", "", "")
	if err := json.Unmarshal(body, &nodes); err != nil || len(nodes.Nodes) != 1 || len(nodes.Nodes[0].Jobs) != 2 ||
		nodes.Nodes[0].Jobs["backup"] != config.JobHashes(f.opts.Jobs())["backup"] {
		t.Errorf("GET /api/v1/nodes: %s; want web1 with the 2 job hashes of its job hashes key", body)
	}
	var evs []struct{ Type, By string }
	_, body = f.do("GET", "/api/v1/jobs/backup/events", "", "")
	if err := json.Unmarshal(body, &evs); err != nil || len(evs) != 4 || !strings.HasPrefix(evs[3].By, "api(") {
		t.Errorf("events: %s; want run_request (the timed-out run), resume, resume, pause by api(…)@web1", body)
	}
	for i, want := range []string{"run_request", "resume", "resume", "pause"} {
		if len(evs) == 4 && evs[i].Type != want {
			t.Errorf("event %d: %s, want %s", i, evs[i].Type, want)
		}
	}
}

// POST …/run answers once a daemon took the request (here the test plays
// the daemon on the real Redis: it pops the request and reports it
// finished), and with "wait" once it finished.
func TestAPI_RunTakenAndFinished(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	daemon := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for {
			req, err := f.r.TakeRun(ctx, "backup", "web1", time.Now())
			if err != nil || req != nil {
				if err == nil {
					time.Sleep(200 * time.Millisecond) // the requester sees "taken" first
					err = f.r.SetRunStatus(ctx, "backup", ledger.RunStatus{ID: req.ID, State: ledger.RunFinished, Node: "web1",
						At: time.Now(), RunID: "run-9", Result: "failure", ExitCode: 3})
				}
				daemon <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	code, body := f.do("POST", "/api/v1/jobs/backup/run", testToken, `{"wait": true, "reason": "test"}`)
	if err := <-daemon; err != nil {
		t.Fatal(err)
	}
	var res struct {
		Request string
		Status  ledger.RunStatus
	}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || res.Status.State != "finished" || res.Status.ExitCode != 3 ||
		res.Status.Node != "web1" {
		t.Errorf("POST run with wait: %d %s; want 200, finished on web1 with exit code 3", code, body)
	}
	if st, err := f.r.GetRunStatus(t.Context(), "backup", res.Request); err != nil || st == nil || st.RunID != "run-9" {
		t.Errorf("request status in Redis: %+v, %v", st, err)
	}
}

// Without a token configured the mutating endpoints are disabled (403,
// with the reason), whatever the request sends.
func TestAPI_NoTokenConfiguredForbidsWrites(t *testing.T) {
	f := newFixture(t, nil, config.AuthWrites)
	for _, tok := range []string{"", "anything"} {
		code, body := f.do("POST", "/api/v1/jobs/backup/pause", tok, "")
		if code != 403 || !strings.Contains(string(body), "http.token_file") {
			t.Errorf("pause with token %q: got %d %s, want 403 naming http.token_file", tok, code, body)
		}
	}
	if st, _ := f.r.State(t.Context(), "backup"); st.Paused {
		t.Errorf("a refused pause paused the job")
	}
}

// With auth "all" reads need the token too.
func TestAPI_AuthAllGuardsReads(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthAll)
	for tok, want := range map[string]int{"": 401, "wrong": 401, testToken: 200} {
		if code, body := f.do("GET", "/api/v1/jobs", tok, ""); code != want {
			t.Errorf("GET /api/v1/jobs with token %q: got %d %s, want %d", tok, code, body, want)
		}
	}
}
