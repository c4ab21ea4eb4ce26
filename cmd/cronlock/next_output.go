package main

import (
	"fmt"
	"text/tabwriter"
	"time"
)

// fill computes up to n fire times strictly after from, in the schedule's
// zone, and the DST notice for the year after from. It stops early when
// the schedule has no further time.
func (r *nextResult) fill(from time.Time, n int) {
	r.Timezone = r.loc.String()
	r.DSTNotice = dstNotice(r.sched, from)
	if r.job != nil {
		if w := windowNote(r.job, from); w != "" && r.note != "" {
			r.note += ", " + w
		} else if w != "" {
			r.note = w
		}
	}
	r.Times = []string{}
	t := from
	for range n {
		t = r.sched.Next(t)
		if t.IsZero() {
			break
		}
		t = t.In(r.loc)
		r.times = append(r.times, t)
		r.Times = append(r.Times, t.Format(time.RFC3339))
	}
}

// printNextTable prints one row per fire time: job, the time in the job's
// zone, the same instant in UTC.
func printNextTable(env *runEnv, results []nextResult) {
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tFIRE TIME (JOB ZONE)\tUTC\t")
	for _, r := range results {
		name := r.Job
		if name == "" {
			name = "(schedule)"
		}
		if r.note != "" {
			name += " (" + r.note + ")"
		}
		if len(r.times) == 0 {
			fmt.Fprintf(tw, "%s\t(no further fire times)\t\t\n", name)
		}
		for _, t := range r.times {
			fmt.Fprintf(tw, "%s\t%s %s\t%s\t\n", name, t.Format("2006-01-02 15:04:05 -07:00"), r.loc, t.UTC().Format("2006-01-02 15:04:05Z"))
		}
	}
	_ = tw.Flush()
}
