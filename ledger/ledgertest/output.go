package ledgertest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// RunOutput runs the conformance cases of ledger.OutputStore against s
// (each on its own job names): kept output, its absence, live chunks in
// order with their dropped counts and end, the cap of MaxLiveChunks, reads
// of at most FollowBatch chunks, and a
// follower woken by a publish.
func RunOutput(t *testing.T, s ledger.OutputStore) {
	t.Run("KeptOutput", func(t *testing.T) {
		ctx := Ctx(t)
		if _, err := s.Output(ctx, "out-kept", "100"); !errors.Is(err, ledger.ErrNoOutput) {
			t.Fatalf("output before any: got err %v, want ErrNoOutput", err)
		}
		want := []byte("line 1\n\x00binary\xff\n")
		if err := s.StoreOutput(ctx, "out-kept", "100", want, ledger.Retention{Age: time.Minute}); err != nil {
			t.Fatalf("store: %v", err)
		}
		if got, err := s.Output(ctx, "out-kept", "100"); err != nil || !bytes.Equal(got, want) {
			t.Errorf("output: got %q, %v; want %q", got, err, want)
		}
		if _, err := s.Output(ctx, "out-kept", "m7"); !errors.Is(err, ledger.ErrNoOutput) {
			t.Errorf("output of another occurrence: got err %v, want ErrNoOutput", err)
		}
		if err := s.StoreOutput(ctx, "out-kept", "m7", []byte("x"), ledger.Retention{Age: 50 * time.Millisecond}); err != nil {
			t.Fatalf("store: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := s.Output(ctx, "out-kept", "m7")
			if errors.Is(err, ledger.ErrNoOutput) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("output with a ttl of 50ms: got err %v after 5s, want ErrNoOutput", err)
			}
			time.Sleep(20 * time.Millisecond) // polls the backend's expiry; not synchronisation
		}
	})
	t.Run("LiveChunksInOrder", func(t *testing.T) {
		ctx := Ctx(t)
		if got, err := s.FollowOutput(ctx, "out-live", "5", "", 10*time.Millisecond); err != nil || len(got) != 0 {
			t.Fatalf("follow before any chunk: got %v, %v; want none", got, err)
		}
		in := []ledger.OutputChunk{{Data: []byte("a\n"), Seq: 1}, {Data: []byte("b\n"), Dropped: 4096, Seq: 2}, {End: true}}
		for _, c := range in {
			if err := s.PublishOutput(ctx, "out-live", "5", c, time.Minute); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		got, err := s.FollowOutput(ctx, "out-live", "5", "", time.Second)
		if err != nil || len(got) != 3 {
			t.Fatalf("follow: got %v, %v; want 3 chunks", got, err)
		}
		for i := range in {
			if string(got[i].Data) != string(in[i].Data) || got[i].Dropped != in[i].Dropped || got[i].End != in[i].End || got[i].Seq != in[i].Seq || got[i].ID == "" {
				t.Errorf("chunk %d: got %+v, want %+v with an id", i, got[i], in[i])
			}
		}
		if more, err := s.FollowOutput(ctx, "out-live", "5", got[0].ID, time.Second); err != nil || len(more) != 2 || more[0].ID != got[1].ID {
			t.Errorf("follow after the first: got %v, %v; want the last 2", more, err)
		}
	})
	t.Run("LiveChunksCapped", func(t *testing.T) {
		ctx := Ctx(t)
		n := 3 * ledger.MaxLiveChunks
		for i := range n {
			if err := s.PublishOutput(ctx, "out-cap", "1", ledger.OutputChunk{Data: fmt.Appendf(nil, "%d\n", i)}, time.Minute); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		var all []ledger.OutputChunk
		for after := ""; ; {
			got, err := s.FollowOutput(ctx, "out-cap", "1", after, 10*time.Millisecond)
			if err != nil {
				t.Fatalf("follow: %v", err)
			}
			if len(got) == 0 {
				break
			}
			if len(got) > ledger.FollowBatch {
				t.Fatalf("one follow: got %d chunks, want at most ledger.FollowBatch (%d)", len(got), ledger.FollowBatch)
			}
			all, after = append(all, got...), got[len(got)-1].ID
		}
		// MAXLEN ~ keeps at least the cap and trims in whole macro nodes.
		if len(all) < ledger.MaxLiveChunks || len(all) > 2*ledger.MaxLiveChunks || string(all[len(all)-1].Data) != fmt.Sprintf("%d\n", n-1) {
			t.Errorf("got %d chunks ending %q, want %d to %d ending with the last", len(all), all[len(all)-1].Data, ledger.MaxLiveChunks, 2*ledger.MaxLiveChunks)
		}
	})
	t.Run("FollowerWokenByPublish", func(t *testing.T) {
		ctx := Ctx(t)
		done := make(chan []ledger.OutputChunk, 1)
		go func() {
			got, _ := s.FollowOutput(ctx, "out-wake", "9", "", 10*time.Second)
			done <- got
		}()
		time.Sleep(100 * time.Millisecond) // let the follower block first; it also works if it has not
		start := time.Now()
		if err := s.PublishOutput(ctx, "out-wake", "9", ledger.OutputChunk{Data: []byte("x\n")}, time.Minute); err != nil {
			t.Fatalf("publish: %v", err)
		}
		select {
		case got := <-done:
			if len(got) != 1 || string(got[0].Data) != "x\n" {
				t.Errorf("follower: got %v, want the chunk", got)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("follower woke %v after the publish, want < 1s", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("follower not woken by the publish within 10s")
		}
	})
}
