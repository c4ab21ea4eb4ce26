package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// outputSecret is an env value the jobs print: it must never be stored.
const outputSecret = "e2e-output-secret-77"

// ranSlot waits for job's first run to end and returns its slot.
func ranSlot(t *testing.T, base, job string, timeout time.Duration) int64 {
	t.Helper()
	var slot int64
	waitFor(t, timeout, "a finished run of "+job, func() bool {
		code, out := apiDo(t, "GET", base+"/api/v1/jobs/"+job+"/occurrences?status=ran&limit=1", "", "")
		var recs []struct{ Slot int64 }
		if code != 200 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) == 0 {
			return false
		}
		slot = recs[0].Slot
		return true
	})
	return slot
}

// TestOutput_BigRunKeepsLastMaxBytesRedacted is issue 35, "What it must
// show" 3: a run printing 10 MB keeps exactly the last output.max_bytes,
// its env value redacted (also in `cronlock history -output`), and the
// daemon's RSS, sampled during the run, stays under 64 MiB above idle.
func TestOutput_BigRunKeepsLastMaxBytesRedacted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const maxBytes = 65536
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "big", "schedule": "* * * * * *", "max_runs": 1,
		"env": map[string]any{"SECRET": outputSecret},
		// 10,000 lines of 1,024 bytes, each with the secret, after a pause
		// in which the idle RSS is read.
		"command": `sleep 1; pad=$(head -c 980 /dev/zero | tr '\0' x); i=0; ` +
			`while [ $i -lt 10000 ]; do printf '%s %05d %s\n' "$SECRET" $i "$pad"; i=$((i+1)); done; echo done`})
	cfg["log"] = map[string]any{"level": "info"}
	cfg["output"] = map[string]any{"max_bytes": maxBytes}
	addr := freeAddr(t)
	cfgFile := writeConfig(t, cfg)
	nodes, _ := startNodes(t, cfgFile, nodeSpec{id: "o1", env: []string{"CRONLOCK_HTTP_LISTEN=" + addr}})
	base := "http://" + addr
	idle, _ := vmRSS(nodes[0].Pid())
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := vmRSS(nodes[0].Pid()); err == nil {
				peak.Store(max(peak.Load(), rss))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	slot := ranSlot(t, base, "big", 20*time.Second)
	close(stop)
	<-sampled
	code, out := apiDo(t, "GET", fmt.Sprintf("%s/api/v1/jobs/big/occurrences/%d/output", base, slot), "", "")
	if code != 200 {
		t.Fatalf("GET output: %d %s", code, out)
	}
	if len(out) != maxBytes || !strings.HasSuffix(out, "\ndone\n") || !strings.Contains(out, "[redacted env SECRET] 09999 x") ||
		strings.Contains(out, outputSecret) {
		t.Errorf("stored output: got %d bytes ending %q, want exactly %d ending with line 09999 and done, the secret redacted",
			len(out), out[max(0, len(out)-80):], maxBytes)
	}
	if grew := peak.Load() - idle; idle == 0 || grew > 64<<20 {
		t.Errorf("RSS grew by %d MiB during the run (idle %d MiB, peak %d MiB), want < 64 MiB", grew>>20, idle>>20, peak.Load()>>20)
	}
	t.Logf("RSS idle %d MiB, peak during the run %d MiB", idle>>20, peak.Load()>>20)
	cli, err := exec.Command(binary, "history", "-config", cfgFile, "-output", strconv.FormatInt(slot, 10), "big").Output()
	if err != nil || string(cli) != out {
		t.Errorf("cronlock history -output: got %d bytes, err %v; want the API's %d bytes", len(cli), err, len(out))
	}
	if code, body := apiDo(t, "GET", base+"/api/v1/jobs/big/occurrences/12345/output", "", ""); code != 404 || !strings.Contains(body, `"error": "no output kept`) {
		t.Errorf("output of an occurrence without any: got %d %s, want 404 with a JSON error", code, body)
	}
	for _, e := range nodes[0].Logs() {
		if e.Msg() == "job output" && strings.Contains(e.Str("line"), outputSecret) {
			t.Fatalf("the daemon logged the secret: %q", e.Str("line"))
		}
	}
	stopAll(t, 15*time.Second, nodes...)
}

// TestOutput_FollowDeliversLinesWithinASecond is issue 35's live output: a
// running job writes a line with its own timestamp every 200 ms; GET
// …/output?follow=1 on the other node delivers each line within 1 s of the
// job writing it, then the end event.
func TestOutput_FollowDeliversLinesWithinASecond(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg := redisConfig(srv.Addr(), map[string]any{"name": "ticker", "schedule": "* * * * * *", "max_runs": 1,
		"env":     map[string]any{"SECRET": outputSecret},
		"command": `i=0; while [ $i -lt 15 ]; do echo "tick $(date +%s%N) $SECRET"; sleep 0.2; i=$((i+1)); done`})
	addrs := []string{freeAddr(t), freeAddr(t)}
	nodes, _ := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "f1", env: []string{"CRONLOCK_HTTP_LISTEN=" + addrs[0]}},
		nodeSpec{id: "f2", env: []string{"CRONLOCK_HTTP_LISTEN=" + addrs[1]}})
	var slot int64
	var runner string
	waitFor(t, 10*time.Second, "a running occurrence of ticker", func() bool {
		code, out := apiDo(t, "GET", "http://"+addrs[0]+"/api/v1/jobs/ticker/occurrences?status=claimed&limit=1", "", "")
		var recs []struct {
			Slot int64
			Node string
		}
		if code != 200 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) == 0 {
			return false
		}
		slot, runner = recs[0].Slot, recs[0].Node
		return true
	})
	base := "http://" + addrs[1] // the node that does not run it, when f1 does
	if runner == "f2" {
		base = "http://" + addrs[0]
	}
	connected := time.Now()
	res, err := http.Get(fmt.Sprintf("%s/api/v1/jobs/ticker/occurrences/%d/output?follow=1", base, slot))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("follow: got %d %s, want 200 text/event-stream", res.StatusCode, ct)
	}
	sc := bufio.NewScanner(res.Body)
	var fresh, all int
	var worst time.Duration
	ended := false
	for sc.Scan() && !ended {
		line := sc.Text()
		if line == "event: end" {
			ended = true
		}
		data, ok := strings.CutPrefix(line, "data: tick ")
		if !ok {
			continue
		}
		all++
		if strings.Contains(data, outputSecret) || !strings.HasSuffix(data, " [redacted env SECRET]") {
			t.Errorf("line %q: want the secret redacted", data)
		}
		ns, _ := strconv.ParseInt(strings.Fields(data)[0], 10, 64)
		wrote := time.Unix(0, ns)
		if wrote.Before(connected) {
			continue // written before we asked: the backlog
		}
		fresh++
		worst = max(worst, time.Since(wrote))
	}
	if !ended || all != 15 {
		t.Errorf("got %d lines, end %v; want all 15, then the end event", all, ended)
	}
	if fresh < 5 || worst > time.Second {
		t.Errorf("%d lines written after connecting, the slowest delivered %v after it was written; want >= 5, each within 1s", fresh, worst)
	}
	t.Logf("%d live lines, the slowest %v after the job wrote it", fresh, worst)
	stopAll(t, 15*time.Second, nodes...)
}
