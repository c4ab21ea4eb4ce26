package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/config"
)

// A JobStatus and a Run read back from the API's JSON (the cronlock
// command on the memory backend reads them so) keep their zone, next fire
// time and instants, which the tables print.
func TestJSONRoundTrip(t *testing.T) {
	cfg, err := config.Parse([]byte("jobs:\n- {name: b, schedule: '0 3 * * *', timezone: Europe/Paris, command: 'true'}\n"), "yaml",
		config.Options{Environ: []string{"CRONLOCK_NODE_STATE_DIR=/tmp/x", "CRONLOCK_NODE_ID=n"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 2, 0, 0, 123, time.UTC)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	row := newJobStatus(&cfg.Jobs[0], ledger.JobState{Last: &ledger.RunRecord{RunID: "r", Start: start, End: start.Add(time.Second)}}, now)
	data, err := json.Marshal([]JobStatus{row})
	if err != nil {
		t.Fatal(err)
	}
	var back []JobStatus
	if err := json.Unmarshal(data, &back); err != nil || len(back) != 1 {
		t.Fatalf("%v %v", back, err)
	}
	got := back[0]
	if got.Location().String() != "Europe/Paris" || !got.NextTime().Equal(row.NextTime()) || got.NextTime().Location().String() != "Europe/Paris" {
		t.Errorf("zone %v next %v, want Europe/Paris %v", got.Location(), got.NextTime(), row.NextTime())
	}
	if got.Last == nil || !got.Last.StartTime().Equal(start) || !got.Last.EndTime().Equal(start.Add(time.Second)) {
		t.Errorf("last run %+v, want its instants", got.Last)
	}
}
