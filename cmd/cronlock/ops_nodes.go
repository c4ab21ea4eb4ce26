package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
)

// runNodes implements `cronlock nodes [-config FILE] [-json]`: every
// daemon whose heartbeat record is in Redis, live or gone, with the
// config drift between the live ones (on the memory backend: the running
// daemon). Errors print one line and return 1.
func runNodes(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("nodes", "[-config FILE] [-json]", env)
	asJSON := f.fs.Bool("json", false, "print a JSON object {nodes, drift} instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if len(f.args) > 0 {
		return opsFail(env, "nodes", 2, fmt.Errorf("unexpected argument %q: nodes takes no arguments", f.args[0]))
	}
	s, code, err := openOps("nodes", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "nodes", code, err)
	}
	defer s.close()
	cctx, cancel := s.call(ctx)
	defer cancel()
	v, err := s.nodes(cctx)
	if err != nil {
		return opsFail(env, "nodes", 1, err)
	}
	if *asJSON {
		return printJSON(env, v)
	}
	fmt.Fprintln(env.stdout, s.header(v))
	printNodes(env, v)
	return 0
}

// printNodes prints the node table, then one line per drifting job.
func printNodes(env *runEnv, v *api.Cluster) {
	if len(v.Nodes) == 0 {
		fmt.Fprintln(env.stdout, "no node records in Redis (no daemon on the redis backend has written a heartbeat within its TTL)")
		return
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tAGE\tHOST\tPID\tVERSION\tSTARTED\tTAGS\tJOBS\tRUNNING\tCONFIG\tDRIFT\t")
	for _, r := range v.Nodes {
		running := int64(0)
		for _, n := range r.Running {
			running += n
		}
		d, jobs := "no", strconv.Itoa(len(r.Jobs))
		switch {
		case r.Jobs == nil:
			jobs = "?" // its job hashes key was gone: written again at its next beat
			d = "-"
			if r.State == "live" {
				d = "unknown"
			}
		case r.State != "live":
			d = "-"
		case len(r.Drift) > 0:
			jobs := make([]string, 0, len(r.Drift))
			for _, df := range r.Drift {
				jobs = append(jobs, df.Job)
			}
			d = "yes: " + strings.Join(slices.Compact(jobs), ", ")
		}
		state := r.State
		if r.State == "live" && len(r.Duplicates) > 0 {
			state = "live, DUPLICATE ID"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.NodeID, state,
			(time.Duration(r.AgeMs) * time.Millisecond).Round(100*time.Millisecond), r.Hostname, r.PID, r.Version,
			r.Started.UTC().Format(time.RFC3339), tagsText(r.Tags), jobs, running, r.ConfigHash, d)
	}
	_ = tw.Flush()
	for _, r := range v.Nodes {
		if r.State == "live" && len(r.Duplicates) > 0 {
			fmt.Fprintf(env.stdout, "duplicate node id %s: %s; node.id must be unique per daemon: set a different node.id "+
				"on one of them (or leave it unset on both for the per-machine default)\n", r.NodeID, duplicatesText(r.Record))
		}
	}
	for _, j := range v.Drift {
		fmt.Fprintf(env.stdout, "config drift: %s\n", j)
	}
}

// duplicatesText names the daemons that write one node's record: the
// record's writer and the others it found writing it.
func duplicatesText(r cluster.Record) string {
	all := []string{daemonText(r.Hostname, r.PID, r.StateDir)}
	for _, d := range r.Duplicates {
		all = append(all, daemonText(d.Hostname, d.PID, d.StateDir))
	}
	return fmt.Sprintf("%d live daemons write its heartbeat record: %s", len(all), strings.Join(all, "; "))
}

// daemonText is "host web1 pid 4242 (state dir /var/lib/cronlock)".
func daemonText(host string, pid int, stateDir string) string {
	s := fmt.Sprintf("host %s pid %d", host, pid)
	if stateDir != "" {
		s += " (state dir " + stateDir + ")"
	}
	return s
}

// tagsText shows node tags as key=value,… in key order; "-" for none.
func tagsText(tags map[string]string) string {
	if len(tags) == 0 {
		return "-"
	}
	out := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, k+"="+tags[k])
	}
	return strings.Join(out, ",")
}
