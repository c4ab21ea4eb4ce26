package redislock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cronlock/cronlock/actors"
	"github.com/redis/rueidis"
)

// missedBatch bounds the checks sent in one pipelined round trip.
const missedBatch = 1000

// ReportMissed runs the missed-slot report (docs/protocol.md, "Missed
// slots") for every check, pipelined: one round trip per 1000 checks (plus
// a SCRIPT LOAD), all bounded by ctx (CallTimeout when it has no deadline).
// The answers are in the order of checks. An error means the reports are
// unknown (a timed-out report may still have been recorded).
func (r *Redis) ReportMissed(ctx context.Context, checks []actors.MissedCheck) ([]actors.MissedReport, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	out := make([]actors.MissedReport, 0, len(checks))
	for len(checks) > 0 {
		batch := checks[:min(len(checks), missedBatch)]
		checks = checks[len(batch):]
		execs := make([]rueidis.LuaExec, len(batch))
		for i, c := range batch {
			execs[i] = rueidis.LuaExec{Keys: []string{r.key("state", c.Job)}, Args: []string{
				strconv.FormatInt(c.Seen, 10), strconv.FormatInt(c.Certain, 10), strconv.FormatInt(c.Latest, 10)}}
		}
		for i, res := range missedScript.ExecMulti(ctx, r.c, execs...) {
			last, err := res.AsInt64()
			if err != nil {
				return nil, fmt.Errorf("missed-slot report %q: %w", batch[i].Job, explainScript(err))
			}
			out = append(out, actors.MissedReport{Reported: last >= 0, After: max(last, 0)})
		}
	}
	return out, nil
}

// ReportMissed runs the missed-slot report as Redis.ReportMissed does.
func (m *Memory) ReportMissed(ctx context.Context, checks []actors.MissedCheck) ([]actors.MissedReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("missed-slot report: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]actors.MissedReport, len(checks))
	for i, c := range checks {
		j := m.job(c.Job)
		last := max(j.slot, j.missedTo, c.Seen)
		if last == 0 || last >= c.Certain {
			continue
		}
		j.missedTo = c.Latest
		out[i] = actors.MissedReport{Reported: true, After: last}
	}
	return out, nil
}
