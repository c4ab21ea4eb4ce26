package actors_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"go.uber.org/zap"

	. "github.com/cronlock/cronlock/actors"
)

// A real run: its output is redacted (env values, patterns), the last
// OutputMaxBytes are stored with its occurrence, and its lines were
// published live while it ran, in chunks numbered from 1 that end with
// whole lines, ending with the end mark.
func TestOutput_RunKeepsRedactedTailAndPublishesLive(t *testing.T) {
	cfg := testJob(t, "out", `for i in 1 2 3; do echo "live $i $SECRET tok-42"; sleep 0.2; done; `+
		`i=0; while [ $i -lt 2000 ]; do echo "bulk $i $SECRET"; i=$((i+1)); done; echo "last line"`)
	cfg.Env = map[string]string{"SECRET": "hunter2-xyz"}
	out := memory.NewOutput()
	locker := memory.NewMemory()
	results := make(chan RunFinished, 1)
	job := NewJob(cfg, JobDeps{MaxSkew: testMaxSkew, Log: zap.NewNop(), Metrics: NewMetrics(nil), Locker: locker, NodeID: "n1",
		Results: results, Phantoms: make(chan Phantom, 10), Kill: make(chan struct{}),
		Output: out, OutputMaxBytes: 1000, Redact: []*regexp.Regexp{regexp.MustCompile(`tok-\d+`)}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	defer func() { cancel(); <-done }()
	reply := make(chan Ran, 1)
	job.Inbox() <- RunNow{Reply: reply}
	var ran Ran
	select {
	case ran = <-reply:
	case <-time.After(20 * time.Second):
		t.Fatal("run did not end within 20s")
	}
	if ran.Finished.Result != ledger.ResultSuccess {
		t.Fatalf("got %+v, want a successful run", ran)
	}
	occ := ledger.OccurrenceID(0, ran.Finished.Fence)
	kept, err := out.Output(t.Context(), "out", occ)
	if err != nil {
		t.Fatalf("stored output of %s: %v", occ, err)
	}
	if len(kept) != 1000 || !bytes.HasSuffix(kept, []byte("bulk 1999 [redacted env SECRET]\nlast line\n")) || bytes.Contains(kept, []byte("hunter2")) {
		t.Errorf("stored output: got %d bytes ending %q, want the last 1000, redacted", len(kept), kept[max(0, len(kept)-60):])
	}
	if fin := <-results; bytes.Contains(fin.Tail, []byte("hunter2")) {
		t.Errorf("the hooks' tail holds the secret")
	}
	var live []byte
	var end bool
	var seq int64
	for after := ""; !end; {
		chunks, err := out.FollowOutput(t.Context(), "out", occ, after, 10*time.Millisecond)
		if err != nil || len(chunks) == 0 {
			t.Fatalf("follow after %q: got %d chunks, %v; want more up to the end mark", after, len(chunks), err)
		}
		for _, c := range chunks {
			if seq++; c.Seq != seq {
				t.Errorf("chunk %s: got Seq %d, want %d (numbered from 1 as published)", c.ID, c.Seq, seq)
			}
			if len(c.Data) > 0 && c.Data[len(c.Data)-1] != '\n' {
				t.Errorf("chunk %s ends within a line: %q", c.ID, c.Data[max(0, len(c.Data)-20):])
			}
			live, end, after = append(live, c.Text()...), c.End, c.ID
		}
	}
	for i := 1; i <= 3; i++ {
		if want := fmt.Sprintf("live %d [redacted env SECRET] [redacted]\n", i); !bytes.Contains(live, []byte(want)) {
			t.Errorf("live output lacks %q", want)
		}
	}
	if strings.Contains(string(live), "hunter2") || strings.Contains(string(live), "tok-42") {
		t.Errorf("live output holds a secret")
	}
}
