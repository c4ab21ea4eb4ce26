package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/redislock"
)

// printEvents prints job's last n events, newest first.
func (s *opsSession) printEvents(ctx context.Context, env *runEnv, job string, n int, asJSON bool) int {
	rows, err := s.events(ctx, job, n)
	if err != nil {
		return opsFail(env, "history", 1, err)
	}
	if asJSON {
		return printJSON(env, rows)
	}
	fmt.Fprintln(env.stdout, s.header(s.daemonNodes(ctx)))
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no events recorded for %s\n", job)
		return 0
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tEVENT\tBY\tDETAILS\t")
	for _, r := range rows {
		by, details := r.By, ""
		switch r.Type {
		case redislock.EventPause:
			if !r.Until.IsZero() {
				details = "until " + r.Until.UTC().Format(time.RFC3339) + " "
			}
			details += r.Note
		case api.EventAutoResume:
			by, details = "-", "the pause ended"
		case redislock.EventReload:
			by, details = r.Node, "config hash "+r.ConfigHash
			if r.ConfigHash == "" {
				details = "job removed from the node's config"
			}
		case redislock.EventUnreadable:
			details = "entry " + r.ID + ": " + r.Note
		case redislock.EventRunRequest:
			details = "request " + r.Request
			if r.Note != "" {
				details += ": " + r.Note
			}
		}
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.At.UTC().Format(time.RFC3339), r.Type, by, details)
	}
	_ = tw.Flush()
	return 0
}
