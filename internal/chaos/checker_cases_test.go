package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// t0 is the synthetic runs' first slot.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// at is t0 + seconds (fractional).
func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// run is one finished run of job at slot t0+slot from start to end
// (seconds after t0) on node with token.
func run(job string, slot int, node string, token string, start, end float64) Run {
	s := t0.Unix() + int64(slot)
	return Run{Job: job, Slot: s, Node: node, Token: token, Trigger: "schedule", PID: 100 + slot,
		Start: at(start), End: at(end), Ended: true, How: "done",
		StartLine: fmt.Sprintf("S %s slot+%d %s on %s at +%.2f", job, slot, token, node, start),
		EndLine:   fmt.Sprintf("E %s slot+%d at +%.2f", job, slot, end)}
}

// everySecond is a clean history of job "a" (overlap skip, every second)
// over slots 0..9: one run per slot, 0.1 s long, tokens 1..10.
func everySecond() []Run {
	var rs []Run
	for s := range 10 {
		rs = append(rs, run("a", s, fmt.Sprintf("n%d", s%3), fmt.Sprint(s+1), float64(s)+0.01, float64(s)+0.11))
	}
	return rs
}

func baseInput(runs []Run) Input {
	return Input{
		Jobs:   []JobSpec{{Name: "a", Schedule: "* * * * * *", Late: 2 * time.Second}},
		Early:  50 * time.Millisecond,
		Runs:   runs,
		Ledger: Ledger{Found: true, Reads: 1},
		From:   t0, To: at(9), End: at(20),
		LossBefore: 5 * time.Second, LossAfter: 3 * time.Second,
	}
}

func drop(rs []Run, slot int) []Run {
	return slices.DeleteFunc(slices.Clone(rs), func(r Run) bool { return r.Slot == t0.Unix()+int64(slot) })
}

func rec(slot int, status, reason, node, token string) Record {
	return Record{Slot: t0.Unix() + int64(slot), Status: status, Reason: reason, Node: node, Token: token,
		Raw: fmt.Sprintf(`{"status":%q,"reason":%q}`, status, reason)}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		in   func() Input
		// fail lists the checks that must report violations (with at least
		// that many); every other check must report none.
		fail map[string]int
		// detail, when set, must appear in the row of check detailOf.
		detailOf, detail string
	}{
		{name: "clean history", in: func() Input { return baseInput(everySecond()) }},
		{name: "a slot ran twice", in: func() Input {
			rs := everySecond()
			dup := run("a", 4, "n2", "6", 4.5, 4.6) // slot 4 again, between 4's run and 5's
			return baseInput(append(rs, dup))
		}, fail: map[string]int{CheckOnce: 1, CheckTokens: 1}},
		{name: "two runs overlap", in: func() Input {
			rs := everySecond()
			rs[3].End = at(4.5) // slot 3 runs into slot 4's run
			return baseInput(rs)
		}, fail: map[string]int{CheckOverlap: 1}},
		{name: "overlap of an allow job is fine", in: func() Input {
			in := baseInput(everySecond())
			in.Jobs[0].Overlap = "allow"
			in.Runs[3].End = at(4.5)
			return in
		}},
		{name: "a run killed with its node ends at the kill", in: func() Input {
			in := baseInput(everySecond())
			in.Runs[3].Ended, in.Runs[3].How = false, ""
			in.Kills = []NodeKill{{Node: in.Runs[3].Node, At: at(3.5)}}
			return in
		}},
		{name: "a run without an end line whose node was never killed runs on (conservative)", in: func() Input {
			in := baseInput(everySecond())
			in.Runs[3].Ended, in.Runs[3].How = false, ""
			return in
		}, fail: map[string]int{CheckOverlap: 6}},
		{name: "a token goes back", in: func() Input {
			rs := everySecond()
			rs[6].Token = "3" // after 6: a token minted before a state loss handed out again
			return baseInput(rs)
		}, fail: map[string]int{CheckTokens: 1}},
		{name: "tokens compare as numbers, not text", in: func() Input {
			rs := everySecond()
			for i := range rs {
				rs[i].Token = fmt.Sprint(9 + i) // 9 then 10: "10" < "9" as text
			}
			return baseInput(rs)
		}},
		{name: "a microsecond token after a counter token is fine", in: func() Input {
			rs := everySecond()
			rs[9].Token = "1893553449000000" // max(fence+1, now_µs) after a state loss
			return baseInput(rs)
		}},
		{name: "allow job: one token twice", in: func() Input {
			in := baseInput(everySecond())
			in.Jobs[0].Overlap = "allow"
			in.Runs[5].Token = in.Runs[4].Token
			return in
		}, fail: map[string]int{CheckTokens: 1}},
		{name: "a silent miss", in: func() Input {
			return baseInput(drop(everySecond(), 5))
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "a slot accounted as skipped", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "skipped", "overlap", "n1", "")})
			return in
		}, detailOf: CheckAccounted, detail: "skipped/overlap 1"},
		{name: "a slot accounted as missed", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "missed", "no_live_node", "n1", "")})
			return in
		}, detailOf: CheckAccounted, detail: "missed 1"},
		{name: "skipped without a reason", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "skipped", "", "n1", "")})
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "claimed, never ran, node alive", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "claimed", "", "n2", "6")})
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "claimed by a node killed right then", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "claimed", "", "n2", "6")})
			in.Kills = []NodeKill{{Node: "n2", At: at(5.02)}}
			return in
		}, detailOf: CheckAccounted, detail: "claimed by a killed node 1"},
		{name: "declared unknown by the audit, its node killed right after its claim", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "unknown", "no result within lock_ttl and the answer window", "n2", "6")})
			in.Kills = []NodeKill{{Node: "n2", At: at(5.02)}}
			return in
		}, detailOf: CheckAccounted, detail: "claimed by a killed node 1"},
		{name: "declared unknown, its node alive", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "unknown", "no result within lock_ttl and the answer window", "n2", "6")})
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "no record around an empty restart: counted apart", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Losses = []Loss{{From: at(6), To: at(6.5)}}
			return in
		}, detailOf: CheckAccounted, detail: "unaccounted due to state loss 1"},
		{name: "queued just before an empty restart: its hand-on erased, counted apart", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "queued", "", "n2", "0")})
			in.Losses = []Loss{{From: at(5.5), To: at(6)}}
			return in
		}, detailOf: CheckAccounted, detail: "unaccounted due to state loss 1"},
		{name: "claimed just before an empty restart, never ran, node alive: a violation", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "claimed", "", "n2", "6")})
			in.Losses = []Loss{{From: at(5.5), To: at(6)}}
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "queued far from an empty restart, never ran: a violation", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger.Add("a", []Record{rec(5, "queued", "", "n2", "0")})
			in.Losses = []Loss{{From: at(25), To: at(25.5)}}
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "no record far from an empty restart: silent", in: func() Input {
			in := baseInput(drop(everySecond(), 0))
			in.Losses = []Loss{{From: at(8), To: at(8.5)}}
			return in
		}, fail: map[string]int{CheckAccounted: 1}},
		{name: "no ledger at all: a slot that did not run is unaccounted", in: func() Input {
			in := baseInput(drop(everySecond(), 5))
			in.Ledger = Ledger{Reads: 7}
			return in
		}, fail: map[string]int{CheckAccounted: 1}, detailOf: CheckLedger, detail: "NOT CHECKED"},
		{name: "ledger says skipped but the slot ran", in: func() Input {
			in := baseInput(everySecond())
			in.Ledger.Add("a", []Record{rec(5, "skipped", "overlap", "n1", "")})
			return in
		}, fail: map[string]int{CheckLedger: 1}},
		{name: "ledger's token differs from the run's", in: func() Input {
			in := baseInput(everySecond())
			in.Ledger.Add("a", []Record{rec(5, "ran", "", "n2", "99")})
			return in
		}, fail: map[string]int{CheckLedger: 1}},
		{name: "ledger agrees", in: func() Input {
			in := baseInput(everySecond())
			in.Ledger.Add("a", []Record{rec(5, "claimed", "", "n2", "6")})
			in.Ledger.Add("a", []Record{rec(5, "ran", "", "n2", "6")})
			return in
		}},
		{name: "max_runs 1 succeeded twice", in: func() Input {
			in := baseInput(everySecond()[:2])
			in.Jobs[0].MaxRuns = 1
			in.To = at(1)
			return in
		}, fail: map[string]int{CheckMaxRuns: 1}},
		{name: "max_runs 1: one success after a killed run", in: func() Input {
			in := baseInput(everySecond()[:2])
			in.Runs[0].How = "killed"
			in.Jobs[0].MaxRuns = 1
			in.To = at(1)
			return in
		}},
		{name: "a slot run early (a fast clock)", in: func() Input {
			rs := everySecond()
			rs[9] = run("a", 9, "n1", "10", 8.5, 8.6) // after slot 8's run, before slot 9
			return baseInput(rs)
		}, fail: map[string]int{CheckOnTime: 1}},
		{name: "a slot run late (a slow clock)", in: func() Input {
			rs := everySecond()[:6]
			rs[5] = run("a", 5, "n1", "6", 7.5, 7.6)
			in := baseInput(rs)
			in.To = at(5)
			return in
		}, fail: map[string]int{CheckOnTime: 1}},
		{name: "bad output lines and daemon problems are violations", in: func() Input {
			in := baseInput(everySecond())
			in.Bad = []string{"a:3: garbage"}
			in.DaemonProblems = []string{"n1 exited with code 2"}
			return in
		}, fail: map[string]int{CheckOutput: 1, CheckDaemons: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Check(c.in())
			for _, row := range v.Rows {
				want := c.fail[row.Check]
				switch {
				case want == 0 && len(row.Violations) > 0:
					t.Errorf("%s: want no violation, got %d:\n%s", row.Check, len(row.Violations), strings.Join(row.Violations, "\n"))
				case want > 0 && len(row.Violations) < want:
					t.Errorf("%s: want at least %d violations, got %d", row.Check, want, len(row.Violations))
				}
			}
			if c.detail != "" && !strings.Contains(v.Row(c.detailOf).Detail, c.detail) {
				t.Errorf("%s detail: want it to contain %q, got %q", c.detailOf, c.detail, v.Row(c.detailOf).Detail)
			}
			if v.Failed() != (len(c.fail) > 0) {
				t.Errorf("Failed() = %v, want %v", v.Failed(), len(c.fail) > 0)
			}
			if t.Failed() {
				t.Log("\n" + v.Format(20))
			}
		})
	}
}

func TestDueSlots(t *testing.T) {
	from, to := at(0.5), at(7)
	got, err := DueSlots("*/2 * * * * *", from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{t0.Unix() + 2, t0.Unix() + 4, t0.Unix() + 6}
	if !slices.Equal(got, want) {
		t.Errorf("*/2 over (0.5, 7]: got %v, want %v", got, want)
	}
	got, _ = DueSlots("* * * * * *", t0, at(2))
	if want := []int64{t0.Unix(), t0.Unix() + 1, t0.Unix() + 2}; !slices.Equal(got, want) {
		t.Errorf("every second over [0, 2]: got %v, want %v", got, want)
	}
	if _, err := DueSlots("* * * * *", t0, at(2)); err == nil {
		t.Error("5 fields: want an error")
	}
}

func TestParseOutput(t *testing.T) {
	data := "S a 2030-01-02T03:04:05Z 17 schedule n1 4242 1893553445.010000000\n" +
		"S a 2030-01-02T03:04:06Z 18 schedule n2 4243 1893553446.02\n" +
		"E a 2030-01-02T03:04:05Z 17 schedule n1 4242 1893553445.110000000 done\n" +
		"E a 2030-01-02T03:04:09Z 19 schedule n1 1 1893553449.1 done\n" +
		"garbage\n"
	runs, bad := ParseOutput("a.out", []byte(data))
	if len(runs) != 2 || len(bad) != 2 {
		t.Fatalf("got %d runs and %d bad lines (%q), want 2 and 2", len(runs), len(bad), bad)
	}
	r := runs[0]
	if !r.Ended || r.How != "done" || r.Token != "17" || r.Node != "n1" || r.Slot != t0.Unix()+5 ||
		r.End.Sub(r.Start) != 100*time.Millisecond {
		t.Errorf("first run: %+v", r)
	}
	if runs[1].Ended || runs[1].Start != time.Unix(1893553446, 20_000_000) {
		t.Errorf("second run: want no end, start at .02: %+v", runs[1])
	}
}

func TestParseRecords(t *testing.T) {
	recs, bad := ParseRecords("a", []string{
		"1893553445", `{"slot":1893553445,"status":"ran","node":"n1","token":1893553444123456,"trigger":"schedule","result":"success"}`,
		"1893553446", `{"slot":1893553446,"status":"skipped","reason":"overlap","node":"n2"}`,
		"m:77", `{"status":"ran"}`,
		"1893553447", `not json`,
	})
	if len(recs) != 2 || len(bad) != 1 {
		t.Fatalf("got %d records, %d bad, want 2 and 1: %+v %q", len(recs), len(bad), recs, bad)
	}
	if recs[0].Token != "1893553444123456" || recs[0].Status != "ran" || recs[1].Reason != "overlap" {
		t.Errorf("records: %+v", recs)
	}
}

// TestJobCommand runs JobCommand's shell line twice, once to its end and
// once ended by SIGTERM, and reads the lines back with ParseOutput.
func TestJobCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.out")
	env := append(os.Environ(), "CRONLOCK_JOB=a", "CRONLOCK_SCHEDULED_TIME=2030-01-02T03:04:05Z",
		"CRONLOCK_FENCING_TOKEN=17", "CRONLOCK_TRIGGER=schedule", "CRONLOCK_NODE_ID=n1")
	done := exec.Command("/bin/sh", "-c", JobCommand(out, 10*time.Millisecond))
	done.Env = env
	if b, err := done.CombinedOutput(); err != nil {
		t.Fatalf("run: %v: %s", err, b)
	}
	killed := exec.Command("/bin/sh", "-c", JobCommand(out, 10*time.Second))
	killed.Env = env
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _ := os.ReadFile(out)
		if strings.Count(string(data), "\n") >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = killed.Process.Signal(syscall.SIGTERM)
	_ = killed.Wait()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	runs, bad := ParseOutput("a.out", data)
	if len(bad) > 0 || len(runs) != 2 {
		t.Fatalf("want 2 runs and no bad line, got %d runs, bad %q; file:\n%s", len(runs), bad, data)
	}
	if runs[0].How != "done" || runs[1].How != "killed" || !runs[1].Ended {
		t.Errorf("want done then killed, got %q then %q; file:\n%s", runs[0].How, runs[1].How, data)
	}
}
