package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
)

// followAll follows job j's occurrence id of out from after to its end
// and returns the text sent and the number of chunks.
func followAll(t *testing.T, out ledger.OutputStore, id, after string) (string, int) {
	t.Helper()
	var text strings.Builder
	n := 0
	err := FollowOutput(t.Context(), claimedRuns{}, out, "j", id, after, time.Now, func(c ledger.OutputChunk) error {
		text.Write(c.Text())
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("follow %s: %v", id, err)
	}
	return text.String(), n
}

// TestFollowOutput_SaysWhenTheStartWasTrimmed: a follower from the start
// of a run whose first chunks were trimmed (MaxLiveChunks) first gets a
// line saying how many; one of a run with all its chunks, or one that
// resumes, gets none.
func TestFollowOutput_SaysWhenTheStartWasTrimmed(t *testing.T) {
	out := memory.NewOutput()
	const n = ledger.MaxLiveChunks + 10
	for i := 1; i <= n; i++ {
		for _, id := range []string{"1", "2"} {
			if id == "2" && i > 3 {
				continue
			}
			c := ledger.OutputChunk{Data: fmt.Appendf(nil, "line %d\n", i), Seq: int64(i), End: i == n || id == "2" && i == 3}
			if err := out.PublishOutput(t.Context(), "j", id, c, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	text, _ := followAll(t, out, "1", "")
	want := "[cronlock: the run's first 10 chunks of output were trimmed from its live output, which keeps the last 128; " +
		"its kept output (output.max_bytes) can be read once it ends]\nline 11\n"
	if !strings.HasPrefix(text, want) || !strings.HasSuffix(text, fmt.Sprintf("line %d\n", n)) {
		t.Errorf("follow from the start of a trimmed run: got %q…, want it to begin %q", text[:min(len(text), 200)], want)
	}
	if text, _ := followAll(t, out, "2", ""); text != "line 1\nline 2\nline 3\n" {
		t.Errorf("follow of a run with all its chunks: got %q, want its lines alone", text)
	}
	if text, _ := followAll(t, out, "1", "100"); strings.Contains(text, "trimmed") || !strings.HasPrefix(text, "line 101\n") {
		t.Errorf("a resumed follow: got %q…, want the lines after chunk 100 alone", text[:min(len(text), 80)])
	}
}
