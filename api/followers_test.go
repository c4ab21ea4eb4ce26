package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/ledger/memory"
	"github.com/cronlock/cronlock/redislock"
)

// claimedRuns is a ReadStore whose every occurrence is running (claimed):
// a follower follows until it goes. Only Occurrences is implemented.
type claimedRuns struct{ ReadStore }

func (claimedRuns) Occurrences(_ context.Context, _ string, from, _ int64) ([]ledger.Occurrence, error) {
	return []ledger.Occurrence{{ID: fmt.Sprint(from), Slot: from, Status: "claimed"}}, nil
}

// followServer serves ServeFollow of job "j" over out, counted in f, the
// occurrence id the path's last element.
func followServer(t *testing.T, f *Followers, out ledger.OutputStore) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ServeFollow(w, r, f, claimedRuns{}, out, "j", r.URL.Path[1:], time.Now)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// follow starts a follower of occurrence id and returns its response
// (its body open: the follower stays until it is closed).
func follow(t *testing.T, ctx context.Context, base, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/"+id, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("follow %s: %v", id, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// waitUntil polls cond every 20 ms for up to 5 s (it watches a server
// process or a count; not synchronisation between goroutines of ours).
func waitUntil(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestServeFollow_CapAnswers429AndBoundsRedisConnections: on a real Redis,
// the followers beyond MaxFollowers get 429 with a JSON error, the
// daemon's Redis connections stay within one per follower while they
// follow, and fall back to what they were once the followers left.
func TestServeFollow_CapAnswers429AndBoundsRedisConnections(t *testing.T) {
	rs := redistest.Start(t)
	r, err := redislock.New(redislock.Options{Addresses: []string{rs.Addr()}, BlockingIdle: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	const runs = 5 // 8 followers each: 40, 8 beyond the daemon's bound
	for i := range runs {
		if err := r.PublishOutput(t.Context(), "j", fmt.Sprint(100+i), ledger.OutputChunk{Data: []byte("hello\n")}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	before := rs.Clients()
	f := NewFollowers()
	base := followServer(t, f, r).URL
	ctx, cancel := context.WithCancel(t.Context())
	var refused []string
	for i := range runs * MaxFollowersPerRun {
		res := follow(t, ctx, base, fmt.Sprint(100+i%runs))
		if res.StatusCode == http.StatusTooManyRequests {
			var e Error
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil || !strings.Contains(e.Error, "too many live output followers") ||
				res.Header.Get("Retry-After") == "" {
				t.Errorf("429: got %+v, %v, Retry-After %q; want a JSON error naming the bound, and Retry-After", e, err, res.Header.Get("Retry-After"))
			}
			refused = append(refused, fmt.Sprint(i))
			continue
		}
		if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || res.StatusCode != 200 || !strings.HasPrefix(line, "id: ") {
			t.Fatalf("follower %d: got %d, %q, %v; want 200 and the first chunk", i, res.StatusCode, line, err)
		}
	}
	if len(refused) != runs*MaxFollowersPerRun-MaxFollowers || f.Count() != MaxFollowers {
		t.Errorf("got %d refused, %d counted; want %d refused, %d counted", len(refused), f.Count(), runs*MaxFollowersPerRun-MaxFollowers, MaxFollowers)
	}
	peak := 0
	waitUntil(func() bool { peak = max(peak, rs.Clients()); return peak >= before+MaxFollowers })
	if peak > before+MaxFollowers {
		t.Errorf("Redis connections while %d followed: got %d, want at most %d (%d before)", MaxFollowers, peak, before+MaxFollowers, before)
	}
	cancel()
	if !waitUntil(func() bool { return f.Count() == 0 }) {
		t.Fatalf("followers counted after they left: got %d, want 0", f.Count())
	}
	if after := 0; !waitUntil(func() bool { after = rs.Clients(); return after <= before }) {
		t.Errorf("Redis connections after the followers left: got %d, want %d as before", after, before)
	}
}

// TestServeFollow_PerRunCap: the follower beyond MaxFollowersPerRun of one
// run gets 429 naming the run, while another run's follower is served.
func TestServeFollow_PerRunCap(t *testing.T) {
	out := memory.NewOutput()
	for _, id := range []string{"1", "2"} {
		if err := out.PublishOutput(t.Context(), "j", id, ledger.OutputChunk{Data: []byte("x\n")}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFollowers()
	base := followServer(t, f, out).URL
	for range MaxFollowersPerRun {
		if res := follow(t, t.Context(), base, "1"); res.StatusCode != 200 {
			t.Fatalf("follower within the bound: got %d, want 200", res.StatusCode)
		}
	}
	res := follow(t, t.Context(), base, "1")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "occurrence 1 already has 8") {
		t.Errorf("follower %d of one run: got %d %s, want 429 naming the run", MaxFollowersPerRun+1, res.StatusCode, body)
	}
	if res := follow(t, t.Context(), base, "2"); res.StatusCode != 200 {
		t.Errorf("follower of another run: got %d, want 200", res.StatusCode)
	}
}

// TestServeFollow_CutsOffASlowReader: a follower that reads nothing of a
// run with 8 MiB of live output is cut off after the write timeout: its
// place is free again, nothing of its output held.
func TestServeFollow_CutsOffASlowReader(t *testing.T) {
	out := memory.NewOutput()
	line := strings.Repeat("x", 64<<10-1) + "\n"
	for range ledger.MaxLiveChunks {
		if err := out.PublishOutput(t.Context(), "j", "1", ledger.OutputChunk{Data: []byte(line)}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	f := newFollowers(MaxFollowers, MaxFollowersPerRun, 300*time.Millisecond)
	srv := followServer(t, f, out)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := fmt.Fprintf(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(func() bool { return f.Count() == 1 }) {
		t.Fatal("the follower was not counted")
	}
	if !waitUntil(func() bool { return f.Count() == 0 }) {
		t.Fatal("a follower that reads nothing still counted after 5 s; want it cut off after the write timeout (300 ms)")
	}
}
