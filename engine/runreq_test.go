package engine

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/redislock"
)

// A daemon on a real Redis takes the run request of its enabled job and
// runs it through the job actor (history: trigger manual, the requester;
// status: finished with the exit code); the request of its disabled job
// is not taken, so the requester can withdraw it.
func TestEngine_TakesRunRequestsOfEnabledJobs(t *testing.T) {
	srv := redistest.Start(t)
	cfg := parseConfig(t, `
node: {shutdown_timeout: 5s}
redis: {address: "`+srv.Addr()+`"}
jobs:
  - {name: on, schedule: "0 0 1 1 *", command: "exit 4"}
  - {name: off, schedule: "0 0 1 1 *", command: "exit 0", enabled: false}
`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	te := launchEngine(t, ctx, cfg, Options{State: nil})
	r, err := redislock.New(redislock.Options{Addresses: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	now := time.Now()
	on := ledger.RunRequest{ID: "req-on", Job: "on", Requester: "ops@box", At: now}
	if _, err := r.RequestRun(ctx, on); err != nil {
		t.Fatal(err)
	}
	offValue, err := r.RequestRun(ctx, ledger.RunRequest{ID: "req-off", Job: "off", Requester: "ops@box", At: now})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var st *ledger.RunStatus
	for st == nil || st.State != ledger.RunFinished {
		if time.Now().After(deadline) {
			t.Fatalf("request of the enabled job: status %+v after 10s, want finished", st)
		}
		time.Sleep(50 * time.Millisecond)
		if st, err = r.GetRunStatus(ctx, "on", on.ID); err != nil {
			t.Fatal(err)
		}
	}
	if st.Node != cfg.Node.ID || st.ExitCode != 4 || st.Result != "failure" || st.RunID == "" {
		t.Errorf("status %+v, want finished on %s with exit code 4", st, cfg.Node.ID)
	}
	recs, err := r.History(ctx, "on", 5)
	if err != nil || len(recs) != 1 || recs[0].Trigger != "manual" || recs[0].Requester != "ops@box" || recs[0].RunID != st.RunID {
		t.Errorf("history %+v, %v; want one manual run by ops@box with run id %s", recs, err, st.RunID)
	}
	if withdrawn, err := r.CancelRun(ctx, "off", "req-off", offValue, time.Now()); err != nil || !withdrawn {
		t.Errorf("request of the disabled job: withdrawn %v, %v; want it untaken", withdrawn, err)
	}
	te.stop(t)
}
