package chaos

// The checker of the chaos test: it reads the jobs' output files and the
// Redis ledger (never the daemon's code or logs) and says which of the
// exactly-once promises held. Check is a pure function of its Input, so
// that checker_cases_test.go can feed it synthetic runs and records.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cronexpr"
)

// JobSpec is what the checker needs of a job's config.
type JobSpec struct {
	Name     string
	Schedule string // 6 fields, seconds first, UTC
	Overlap  string // skip (""), queue, replace or allow
	MaxRuns  int
	// Late is how long after its slot a run may start at the latest (0:
	// not checked). Protocol v2 forks a slot no later than its answer
	// window W after it (R3); queue and replace runs start before the next
	// slot comes due (R7); the test gives lock_ttl + 1 s.
	Late time.Duration
}

// Run is one run seen in a job's output file: a start line and, unless the
// run was killed by SIGKILL, an end line.
type Run struct {
	Job, Node, Token, Trigger string
	Slot                      int64 // Unix seconds
	PID                       int
	Start, End                time.Time
	Ended                     bool   // an end line was seen; else End is inferred (EndNote)
	How                       string // "done" or "killed" (end line); "" when not Ended
	EndNote                   string
	StartLine, EndLine        string // "file:line: text", for reports
}

// Record is one occurrence record of the ledger (docs/protocol-v2.md, key
// occ:J), as far as the checker reads it.
type Record struct {
	Slot                                 int64
	Status, Reason, Node, Token, Trigger string
	Raw                                  string
}

// Ledger is every occurrence record the test saw, read at several times
// (before each Redis restart and every few seconds): per job and slot, the
// distinct records in the order they were first seen, the last one last.
type Ledger struct {
	Found   bool // some occ: key existed at some read
	Reads   int  // reads that succeeded
	Records map[string]map[int64][]Record
}

// Add merges one read of job's ledger into l.
func (l *Ledger) Add(job string, recs []Record) {
	if l.Records == nil {
		l.Records = map[string]map[int64][]Record{}
	}
	if l.Records[job] == nil {
		l.Records[job] = map[int64][]Record{}
	}
	for _, r := range recs {
		seen := l.Records[job][r.Slot]
		if n := len(seen); n > 0 && sameRecord(seen[n-1], r) {
			continue
		}
		l.Records[job][r.Slot] = append(seen, r)
	}
}

func sameRecord(a, b Record) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Node == b.Node && a.Token == b.Token
}

// last is the newest record of (job, slot) and whether there is one.
func (l *Ledger) last(job string, slot int64) (Record, bool) {
	rs := l.Records[job][slot]
	if len(rs) == 0 {
		return Record{}, false
	}
	return rs[len(rs)-1], true
}

// NodeKill is a node the test killed with SIGKILL together with its runs'
// process groups: at At, its processes were gone.
type NodeKill struct {
	Node string
	At   time.Time
}

// Loss is a Redis restart that lost the data: the server was killed at
// From and answered again at To.
type Loss struct{ From, To time.Time }

// Input is everything the checker reads.
type Input struct {
	Jobs   []JobSpec
	Runs   []Run
	Bad    []string // output lines that could not be read
	Ledger Ledger
	Kills  []NodeKill
	Losses []Loss
	// Due occurrences are the slots S with From <= S <= To.
	From, To time.Time
	// End is when the test stopped the daemons: a run with no end line whose
	// node was never killed after it started is taken to run until End.
	End time.Time
	// LossBefore and LossAfter bound the slots whose records an empty
	// restart may have erased before the test read them: from From −
	// LossBefore (records written after the last read before the kill, and
	// misses the audit had not yet recorded) to To + LossAfter (slots due
	// while Redis was down or before the nodes saw the loss).
	LossBefore, LossAfter time.Duration
	// DaemonProblems are daemons that exited on their own or not cleanly.
	DaemonProblems []string
	// Early is how far before its slot a run's start line may be written
	// (the node waits until Redis time has reached the slot, R2; Redis and
	// the runs share the host's clock here): a margin for the node's
	// estimate of Redis time.
	Early time.Duration
}

// Check names of the verdict table.
const (
	CheckOutput    = "0 output lines well-formed"
	CheckOnce      = "1 no slot ran twice"
	CheckOverlap   = "2 no overlap (non-allow jobs)"
	CheckTokens    = "3 fencing tokens increase"
	CheckAccounted = "4 every due slot accounted"
	CheckLedger    = "5 ledger agrees with runs"
	CheckMaxRuns   = "6 max_runs respected"
	CheckDaemons   = "7 daemons up, clean exit"
	CheckOnTime    = "8 runs start in their window"
)

// Row is one line of the verdict table.
type Row struct {
	Check      string
	Count      int // what was checked: runs, slots, records, …
	Violations []string
	Detail     string
}

// Verdict is the checker's answer.
type Verdict struct {
	Rows  []Row
	Notes []string
}

// Failed reports whether any check found a violation.
func (v Verdict) Failed() bool {
	for _, r := range v.Rows {
		if len(r.Violations) > 0 {
			return true
		}
	}
	return false
}

// Row returns the row of check name.
func (v Verdict) Row(name string) Row {
	for _, r := range v.Rows {
		if r.Check == name {
			return r
		}
	}
	return Row{}
}

// Format renders the verdict table, then each check's violations (at most
// perCheck of each) and the notes (at most perCheck).
func (v Verdict) Format(perCheck int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %7s %10s  %s\n", "check", "count", "violations", "detail")
	for _, r := range v.Rows {
		fmt.Fprintf(&b, "%-32s %7d %10d  %s\n", r.Check, r.Count, len(r.Violations), r.Detail)
	}
	for _, r := range v.Rows {
		if len(r.Violations) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nviolations of %q (%d):\n", r.Check, len(r.Violations))
		writeCapped(&b, r.Violations, perCheck)
	}
	if len(v.Notes) > 0 {
		fmt.Fprintf(&b, "\nnotes (%d):\n", len(v.Notes))
		writeCapped(&b, v.Notes, perCheck)
	}
	return b.String()
}

func writeCapped(b *strings.Builder, lines []string, n int) {
	for i, l := range lines {
		if i == n {
			fmt.Fprintf(b, "  … and %d more\n", len(lines)-n)
			return
		}
		fmt.Fprintf(b, "  - %s\n", strings.ReplaceAll(l, "\n", "\n    "))
	}
}

// Check runs every check on in.
func Check(in Input) Verdict {
	var v Verdict
	runs := inferEnds(in, &v)
	byJob := map[string][]Run{}
	for _, r := range runs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	for j := range byJob {
		slices.SortStableFunc(byJob[j], func(a, b Run) int {
			return cmp.Or(a.Start.Compare(b.Start), compareTokens(a.Token, b.Token))
		})
	}
	v.Rows = append(v.Rows,
		Row{Check: CheckOutput, Count: len(runs), Violations: in.Bad, Detail: fmt.Sprintf("%d runs read", len(runs))},
		checkOnce(in, byJob),
		checkOverlap(in, byJob),
		checkTokens(in, byJob),
		checkAccounted(in, byJob, &v),
		checkLedger(in, byJob),
		checkMaxRuns(in, byJob),
		Row{Check: CheckDaemons, Count: len(in.DaemonProblems), Violations: in.DaemonProblems},
		checkOnTime(in, byJob),
	)
	return v
}

// inferEnds gives each run without an end line an end: the first time the
// test killed its node after it started, else in.End (and a note).
func inferEnds(in Input, v *Verdict) []Run {
	out := make([]Run, 0, len(in.Runs))
	for _, r := range in.Runs {
		if !r.Ended {
			r.End = in.End
			r.EndNote = "no end line, node never killed after it: taken as running until the test stopped the daemons"
			for _, k := range in.Kills {
				if k.Node == r.Node && !k.At.Before(r.Start) && k.At.Before(r.End) {
					r.End = k.At
					r.EndNote = "no end line: ended when the test killed " + k.Node + " at " + clock(k.At)
				}
			}
			v.Notes = append(v.Notes, fmt.Sprintf("run %s slot %s on %s: %s\n%s", r.Job, slotText(r.Slot), r.Node, r.EndNote, r.StartLine))
		}
		out = append(out, r)
	}
	return out
}

func checkOnce(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckOnce}
	for _, j := range jobNames(in, byJob) {
		bySlot := map[int64][]Run{}
		for _, r := range byJob[j] {
			bySlot[r.Slot] = append(bySlot[r.Slot], r)
		}
		row.Count += len(bySlot)
		for _, s := range slices.Sorted(maps.Keys(bySlot)) {
			if rs := bySlot[s]; len(rs) > 1 {
				row.Violations = append(row.Violations, fmt.Sprintf("job %s slot %s ran %d times:\n%s", j, slotText(s), len(rs), runLines(rs...)))
			}
		}
	}
	row.Detail = fmt.Sprintf("%d (job, slot) pairs ran", row.Count)
	return row
}

func checkOverlap(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckOverlap}
	inferred := 0
	for _, spec := range in.Jobs {
		if spec.Overlap == "allow" {
			continue
		}
		var longest *Run // the run with the latest end so far
		for i := range byJob[spec.Name] {
			r := &byJob[spec.Name][i]
			row.Count++
			if !r.Ended {
				inferred++
			}
			if longest != nil && r.Start.Before(longest.End) {
				row.Violations = append(row.Violations, fmt.Sprintf("job %s (overlap %s): a run started %v before the previous one ended%s:\n%s",
					spec.Name, cmp.Or(spec.Overlap, "skip"), longest.End.Sub(r.Start).Round(time.Millisecond), inferredNote(longest), runLines(*longest, *r)))
			}
			if longest == nil || r.End.After(longest.End) {
				longest = r
			}
		}
	}
	row.Detail = fmt.Sprintf("runs of non-allow jobs; %d without an end line (end inferred)", inferred)
	return row
}

func inferredNote(r *Run) string {
	if r.Ended {
		return ""
	}
	return " (its end is inferred: " + r.EndNote + ")"
}

// checkTokens: per job other than allow, in start order (ties by token),
// each token greater than the one before; allow jobs' runs overlap, so
// start order says nothing about claim order: there, no token twice.
func checkTokens(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckTokens}
	for _, spec := range in.Jobs {
		runs := byJob[spec.Name]
		seen := map[string]Run{}
		var prev *Run
		for i := range runs {
			r := &runs[i]
			row.Count++
			if _, ok := tokenValue(r.Token); !ok {
				row.Violations = append(row.Violations, fmt.Sprintf("job %s: fencing token %q is not a number:\n%s", spec.Name, r.Token, runLines(*r)))
				continue
			}
			if spec.Overlap == "allow" {
				if o, dup := seen[r.Token]; dup {
					row.Violations = append(row.Violations, fmt.Sprintf("job %s: token %s given to two runs:\n%s", spec.Name, r.Token, runLines(o, *r)))
				}
				seen[r.Token] = *r
				continue
			}
			if prev != nil && compareTokens(r.Token, prev.Token) <= 0 {
				row.Violations = append(row.Violations, fmt.Sprintf("job %s: token went from %s to %s in start order:\n%s",
					spec.Name, prev.Token, r.Token, runLines(*prev, *r)))
			}
			prev = r
		}
	}
	row.Detail = "runs; strictly increasing in start order (allow jobs: unique)"
	return row
}

// DueSlots lists the slots of a 6-field schedule (seconds first, UTC) with
// from <= slot <= to, by hashicorp/cronexpr (the parser the daemon's own
// schedule package is checked against, not its code).
func DueSlots(schedule string, from, to time.Time) ([]int64, error) {
	if n := len(strings.Fields(schedule)); n != 6 {
		return nil, fmt.Errorf("schedule %q: the checker takes 6 fields, got %d", schedule, n)
	}
	expr, err := cronexpr.Parse(schedule + " *") // cronexpr's 7 fields: seconds … year
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	var out []int64
	for t := expr.Next(from.UTC().Truncate(time.Second).Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = expr.Next(t) {
		if !t.Before(from) {
			out = append(out, t.Unix())
		}
	}
	return out, nil
}

// checkAccounted classifies every due slot: ran; skipped or missed with a
// reason; erased by an empty Redis restart; claimed by a node the test
// killed; or a violation.
func checkAccounted(in Input, byJob map[string][]Run, v *Verdict) Row {
	row := Row{Check: CheckAccounted}
	counts := map[string]int{}
	reasons := map[string]int{}
	for _, spec := range in.Jobs {
		due, err := DueSlots(spec.Schedule, in.From, in.To)
		if err != nil {
			row.Violations = append(row.Violations, err.Error())
			continue
		}
		ran := map[int64]bool{}
		for _, r := range byJob[spec.Name] {
			ran[r.Slot] = true
		}
		for _, s := range due {
			row.Count++
			what := fmt.Sprintf("job %s slot %s", spec.Name, slotText(s))
			rec, ok := in.Ledger.last(spec.Name, s)
			switch {
			case ran[s]:
				counts["ran"]++
			case !in.Ledger.Found:
				counts["not run, no ledger"]++
				row.Violations = append(row.Violations, what+": did not run, and there is no ledger to account for it (no occ: key was ever seen)")
			case ok && (rec.Status == "skipped" || rec.Status == "missed"):
				if rec.Reason == "" {
					row.Violations = append(row.Violations, fmt.Sprintf("%s: recorded %s without a reason: %s", what, rec.Status, rec.Raw))
					continue
				}
				counts[rec.Status]++
				reasons[rec.Status+"/"+rec.Reason]++
			// unknown: a claim the audit found with no result once its lease
			// and window passed (R6): its node died between claim and fork
			// (docs/protocol.md, "What stays impossible"), like claimed.
			case ok && (rec.Status == "claimed" || rec.Status == "unknown" || rec.Status == "queued" || rec.Status == "ran"):
				if l, lost := lossAround(in, s); lost && rec.Status == "queued" {
					// The hand-on of a queued slot is the job's pending entry in
					// Redis (R7): an empty restart erases it with the record
					// (docs/protocol.md, "What stays impossible").
					counts["unaccounted due to state loss"]++
					v.Notes = append(v.Notes, fmt.Sprintf("%s: recorded queued by %s, not run; Redis was restarted empty at %s (answering again at %s): its hand-on was erased", what, rec.Node, clock(l.From), clock(l.To)))
					continue
				}
				if k, killed := killedAround(in.Kills, rec.Node, s); killed {
					counts["claimed by a killed node"]++
					v.Notes = append(v.Notes, fmt.Sprintf("%s: recorded %s by %s, which the test killed at %s; no run seen", what, rec.Status, rec.Node, clock(k.At)))
					continue
				}
				row.Violations = append(row.Violations, fmt.Sprintf("%s: the ledger says %s by %s, but no run started: %s", what, rec.Status, rec.Node, rec.Raw))
			case ok:
				row.Violations = append(row.Violations, fmt.Sprintf("%s: record with unknown status %q: %s", what, rec.Status, rec.Raw))
			default:
				if l, lost := lossAround(in, s); lost {
					counts["unaccounted due to state loss"]++
					v.Notes = append(v.Notes, fmt.Sprintf("%s: no run and no record; Redis was restarted empty at %s (answering again at %s): the record may have been erased", what, clock(l.From), clock(l.To)))
					continue
				}
				row.Violations = append(row.Violations, what+": silent miss: did not run, and the ledger has no record of it")
			}
		}
	}
	parts := []string{}
	for _, k := range []string{"ran", "skipped", "missed", "claimed by a killed node", "unaccounted due to state loss", "not run, no ledger"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(reasons) > 0 {
		var rs []string
		for _, k := range slices.Sorted(maps.Keys(reasons)) {
			rs = append(rs, fmt.Sprintf("%s %d", k, reasons[k]))
		}
		parts = append(parts, "("+strings.Join(rs, ", ")+")")
	}
	row.Detail = fmt.Sprintf("due slots %s..%s: %s", clock(in.From), clock(in.To), strings.Join(parts, ", "))
	return row
}

// killedAround reports a kill of node within a few seconds of slot s: a
// claim answered just before the node died leaves its record claimed.
func killedAround(kills []NodeKill, node string, s int64) (NodeKill, bool) {
	at := time.Unix(s, 0)
	for _, k := range kills {
		if k.Node == node && !k.At.Before(at.Add(-5*time.Second)) && !k.At.After(at.Add(15*time.Second)) {
			return k, true
		}
	}
	return NodeKill{}, false
}

func lossAround(in Input, s int64) (Loss, bool) {
	at := time.Unix(s, 0)
	for _, l := range in.Losses {
		if !at.Before(l.From.Add(-in.LossBefore)) && !at.After(l.To.Add(in.LossAfter)) {
			return l, true
		}
	}
	return Loss{}, false
}

// checkLedger compares each run with the records of its slot: one of them
// must be claimed or ran with the run's token; a slot that ran may not be
// recorded only as skipped or missed (except state_lost after a loss: the
// repair refuses slots whose records it cannot see).
func checkLedger(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckLedger}
	if !in.Ledger.Found {
		row.Detail = fmt.Sprintf("NOT CHECKED: no ledger (no occ: key in %d reads of Redis)", in.Ledger.Reads)
		return row
	}
	noRecord := 0
	for _, j := range jobNames(in, byJob) {
		for _, r := range byJob[j] {
			recs := in.Ledger.Records[j][r.Slot]
			if len(recs) == 0 {
				noRecord++
				continue
			}
			row.Count++
			var claim *Record
			for i := range recs {
				if recs[i].Status == "claimed" || recs[i].Status == "ran" || recs[i].Status == "queued" {
					claim = &recs[i]
				}
			}
			if claim == nil {
				last := recs[len(recs)-1]
				if last.Reason == "state_lost" && len(in.Losses) > 0 {
					continue
				}
				row.Violations = append(row.Violations, fmt.Sprintf("job %s slot %s ran, but the ledger says %s/%s: %s\n%s",
					j, slotText(r.Slot), last.Status, last.Reason, last.Raw, runLines(r)))
				continue
			}
			if claim.Token != "" && compareTokens(claim.Token, r.Token) != 0 {
				row.Violations = append(row.Violations, fmt.Sprintf("job %s slot %s: run's token %s, ledger's %s: %s\n%s",
					j, slotText(r.Slot), r.Token, claim.Token, claim.Raw, runLines(r)))
			}
		}
	}
	row.Detail = fmt.Sprintf("runs with a record; %d runs have none (read too late or erased)", noRecord)
	return row
}

func checkMaxRuns(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckMaxRuns}
	var parts []string
	for _, spec := range in.Jobs {
		if spec.MaxRuns <= 0 {
			continue
		}
		runs := byJob[spec.Name]
		var ok []Run
		for _, r := range runs {
			row.Count++
			if r.How == "done" {
				ok = append(ok, r)
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %d runs, %d succeeded, max %d", spec.Name, len(runs), len(ok), spec.MaxRuns))
		if len(ok) > spec.MaxRuns {
			row.Violations = append(row.Violations, fmt.Sprintf("job %s (max_runs %d) succeeded %d times:\n%s", spec.Name, spec.MaxRuns, len(ok), runLines(ok...)))
			continue
		}
		if len(ok) == spec.MaxRuns {
			limit := ok[spec.MaxRuns-1].End
			for _, r := range runs {
				if r.Start.After(limit) {
					row.Violations = append(row.Violations, fmt.Sprintf("job %s (max_runs %d) started again after its last allowed success ended at %s:\n%s",
						spec.Name, spec.MaxRuns, clock(limit), runLines(ok[spec.MaxRuns-1], r)))
				}
			}
		}
	}
	row.Detail = strings.Join(parts, "; ")
	return row
}

// checkOnTime: no run starts before its slot (less in.Early), nor later
// than its job's Late after it. A node whose clock is fast must not run a
// slot early, one whose clock is slow must not run it late.
func checkOnTime(in Input, byJob map[string][]Run) Row {
	row := Row{Check: CheckOnTime}
	var earliest, latest time.Duration
	first := true
	for _, spec := range in.Jobs {
		for _, r := range byJob[spec.Name] {
			row.Count++
			d := r.Start.Sub(time.Unix(r.Slot, 0))
			if first || d < earliest {
				earliest = d
			}
			if first || d > latest {
				latest = d
			}
			first = false
			switch {
			case d < -in.Early:
				row.Violations = append(row.Violations, fmt.Sprintf("job %s: slot %s started %v early on %s:\n%s",
					spec.Name, slotText(r.Slot), (-d).Round(time.Millisecond), r.Node, runLines(r)))
			case spec.Late > 0 && d > spec.Late:
				row.Violations = append(row.Violations, fmt.Sprintf("job %s: slot %s started %v after it on %s (at most %v):\n%s",
					spec.Name, slotText(r.Slot), d.Round(time.Millisecond), r.Node, spec.Late, runLines(r)))
			}
		}
	}
	row.Detail = fmt.Sprintf("start − slot from %v to %v; allowed from −%v to each job's late bound",
		earliest.Round(time.Millisecond), latest.Round(time.Millisecond), in.Early)
	return row
}

// jobNames is the configured jobs, then any other job seen in the runs.
func jobNames(in Input, byJob map[string][]Run) []string {
	var names []string
	for _, s := range in.Jobs {
		names = append(names, s.Name)
	}
	for _, j := range slices.Sorted(maps.Keys(byJob)) {
		if !slices.Contains(names, j) {
			names = append(names, j)
		}
	}
	return names
}

// tokenValue parses a fencing token (a decimal integer of any size).
func tokenValue(s string) (*big.Int, bool) {
	return new(big.Int).SetString(s, 10)
}

// compareTokens orders tokens numerically; a token that is not a number
// sorts first.
func compareTokens(a, b string) int {
	x, okx := tokenValue(a)
	y, oky := tokenValue(b)
	switch {
	case !okx || !oky:
		return cmp.Compare(boolInt(okx), boolInt(oky))
	default:
		return x.Cmp(y)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func runLines(rs ...Run) string {
	var ls []string
	for _, r := range rs {
		ls = append(ls, r.StartLine)
		if r.Ended {
			ls = append(ls, r.EndLine)
		} else {
			ls = append(ls, "(no end line; "+r.EndNote+")")
		}
	}
	return strings.Join(ls, "\n")
}

func slotText(s int64) string { return time.Unix(s, 0).UTC().Format(time.RFC3339) }

// clock formats an instant for reports: UTC, milliseconds.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// The output line format of the jobs' commands (JobCommand):
//
//	S JOB SLOT TOKEN TRIGGER NODE PID UNIXTIME
//	E JOB SLOT TOKEN TRIGGER NODE PID UNIXTIME HOW
//
// SLOT is CRONLOCK_SCHEDULED_TIME (RFC 3339), UNIXTIME `date +%s.%N`, HOW
// done or killed; an empty variable is written "-".

// JobCommand is the shell command of a chaos job: it writes its start
// line, works for work (sleep, in the background so that SIGTERM is
// handled at once), and writes its end line; on SIGTERM it writes its end
// line with HOW killed and exits 143. Each line is one short `>>` write,
// atomic against the other runs' lines.
func JobCommand(outFile string, work time.Duration) string {
	f := shellQuote(outFile)
	line := `"$CRONLOCK_JOB ${CRONLOCK_SCHEDULED_TIME:--} ${CRONLOCK_FENCING_TOKEN:--} ${CRONLOCK_TRIGGER:--} ${CRONLOCK_NODE_ID:--} $$ $(date +%s.%N)"`
	return fmt.Sprintf(`trap 'echo E %[1]s killed >> %[2]s; exit 143' TERM; echo S %[1]s >> %[2]s; sleep %[3]s & wait $!; echo E %[1]s done >> %[2]s`,
		line, f, strconv.FormatFloat(work.Seconds(), 'f', -1, 64))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ParseOutput reads one output file (name is for reports). Lines it cannot
// read are returned in bad; an end line pairs with the start line of the
// same job, slot, token, node and pid.
func ParseOutput(name string, data []byte) (runs []Run, bad []string) {
	open := map[string]int{} // key → index in runs of a run without its end
	for i, l := range bytes.Split(data, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		where := fmt.Sprintf("%s:%d: %s", name, i+1, l)
		f := strings.Fields(string(l))
		if len(f) < 8 || (f[0] == "S" && len(f) != 8) || (f[0] == "E" && len(f) != 9) || (f[0] != "S" && f[0] != "E") {
			bad = append(bad, where+" (malformed)")
			continue
		}
		slot, err1 := time.Parse(time.RFC3339, f[2])
		pid, err2 := strconv.Atoi(f[6])
		at, err3 := parseUnix(f[7])
		if err1 != nil || err2 != nil || err3 != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", where, cmp.Or(err1, err2, err3)))
			continue
		}
		key := strings.Join([]string{f[1], f[2], f[3], f[5], f[6]}, " ")
		if f[0] == "S" {
			if _, dup := open[key]; dup {
				bad = append(bad, where+" (a second start line of one run)")
				continue
			}
			open[key] = len(runs)
			runs = append(runs, Run{Job: f[1], Slot: slot.Unix(), Token: f[3], Trigger: f[4], Node: f[5], PID: pid, Start: at, StartLine: where})
			continue
		}
		idx, ok := open[key]
		if !ok {
			bad = append(bad, where+" (an end line without its start line)")
			continue
		}
		delete(open, key)
		r := &runs[idx]
		r.End, r.Ended, r.How, r.EndLine = at, true, f[8], where
	}
	return runs, bad
}

// parseUnix reads `date +%s.%N`.
func parseUnix(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		frac += strings.Repeat("0", 9-len(frac))
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("time %q: %w", s, err)
		}
	}
	return time.Unix(n, ns), nil
}

// ParseRecords reads the reply of HGETALL occ:J as field, value pairs:
// slot fields (decimal Unix seconds) with JSON records. Fields that are not
// slots (manual runs are keyed by their token) are left out; records that
// are not JSON are returned in bad.
func ParseRecords(job string, pairs []string) (recs []Record, bad []string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		field, value := pairs[i], pairs[i+1]
		slot, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			continue
		}
		d := json.NewDecoder(strings.NewReader(value))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			bad = append(bad, fmt.Sprintf("ledger %s field %s: not JSON: %q", job, field, value))
			continue
		}
		recs = append(recs, Record{Slot: slot, Status: str(m["status"]), Reason: str(m["reason"]), Node: str(m["node"]),
			Token: str(m["token"]), Trigger: str(m["trigger"]), Raw: fmt.Sprintf("occ:%s[%s] = %s", job, field, value)})
	}
	return recs, bad
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
