package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cronlock/cronlock/drift"
	"github.com/cronlock/cronlock/registry"
)

// nodeRow is one daemon in `cronlock nodes -json`: its heartbeat record
// plus what the reader derives from it.
type nodeRow struct {
	registry.Record
	// State is "live" while the record was written within its TTL, else
	// "gone" (the key lingers for one more TTL).
	State string `json:"state"`
	AgeMs int64  `json:"age_ms"` // since the last heartbeat, by this machine's clock
	// Drift lists how the node's jobs differ from the other live nodes'
	// (empty for a gone node, which is not compared).
	Drift []drift.Diff `json:"drift"`
}

// clusterView is the node list with its drift, read once from Redis; it
// serves `nodes` and `status`.
type clusterView struct {
	Nodes []nodeRow `json:"nodes"`
	// Drift are the jobs not configured alike on every live node.
	Drift []drift.Job `json:"drift"`
	byJob map[string]drift.Job
}

// readCluster reads every node record (two round trips) and compares the
// live ones.
func (s *opsSession) readCluster(ctx context.Context, now time.Time) (*clusterView, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	values, err := s.redis.Nodes(cctx)
	if err != nil {
		return nil, err
	}
	v := &clusterView{Nodes: []nodeRow{}, Drift: []drift.Job{}, byJob: map[string]drift.Job{}}
	live := map[string]map[string]string{}
	for _, r := range registry.Decode(values) {
		row := nodeRow{Record: r, State: "gone", AgeMs: now.Sub(r.Heartbeat).Milliseconds(), Drift: []drift.Diff{}}
		if r.Live(now) {
			row.State = "live"
			live[r.NodeID] = r.Jobs
		}
		v.Nodes = append(v.Nodes, row)
	}
	for i, row := range v.Nodes {
		if row.State != "live" {
			continue
		}
		others := map[string]map[string]string{}
		for id, jobs := range live {
			if id != row.NodeID {
				others[id] = jobs
			}
		}
		if d := drift.Compare(row.Jobs, others); d != nil {
			v.Nodes[i].Drift = d
		}
	}
	if d := drift.Cluster(live); d != nil {
		v.Drift = d
	}
	for _, j := range v.Drift {
		v.byJob[j.Job] = j
	}
	return v, nil
}

// runNodes implements `cronlock nodes [-config FILE] [-json]`: every
// daemon whose heartbeat record is in Redis, live or gone, with the
// config drift between the live ones. Errors print one line and return 1.
func runNodes(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("nodes", "[-config FILE] [-json]", env)
	asJSON := f.fs.Bool("json", false, "print a JSON object {nodes, drift} instead of a table")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if len(f.args) > 0 {
		return opsFail(env, "nodes", 2, fmt.Errorf("unexpected argument %q: nodes takes no arguments", f.args[0]))
	}
	s, code, err := openOps("nodes", f.config, false, env)
	if s == nil {
		return opsFail(env, "nodes", code, err)
	}
	defer s.close()
	v, err := s.readCluster(ctx, time.Now())
	if err != nil {
		return opsFail(env, "nodes", 1, s.redisHint(err))
	}
	if *asJSON {
		return printJSON(env, v)
	}
	printNodes(env, v)
	return 0
}

// printNodes prints the node table, then one line per drifting job.
func printNodes(env *runEnv, v *clusterView) {
	if len(v.Nodes) == 0 {
		fmt.Fprintln(env.stdout, "no node records in Redis (no daemon on the redis backend has written a heartbeat within its TTL)")
		return
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tAGE\tHOST\tPID\tVERSION\tSTARTED\tJOBS\tRUNNING\tCONFIG\tDRIFT\t")
	for _, r := range v.Nodes {
		running := int64(0)
		for _, n := range r.Running {
			running += n
		}
		d := "no"
		switch {
		case r.State != "live":
			d = "-"
		case len(r.Drift) > 0:
			jobs := make([]string, 0, len(r.Drift))
			for _, df := range r.Drift {
				jobs = append(jobs, df.Job)
			}
			d = "yes: " + strings.Join(slices.Compact(jobs), ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t\n", r.NodeID, r.State,
			(time.Duration(r.AgeMs) * time.Millisecond).Round(100*time.Millisecond), r.Hostname, r.PID, r.Version,
			r.Started.UTC().Format(time.RFC3339), len(r.Jobs), running, r.ConfigHash, d)
	}
	_ = tw.Flush()
	for _, j := range v.Drift {
		fmt.Fprintf(env.stdout, "config drift: %s\n", j)
	}
}

// annotate adds the cluster's view of row's job: where it is running and
// how it drifts.
func (v *clusterView) annotate(row *statusRow) {
	row.RunningOn = []string{}
	for _, n := range v.Nodes {
		if n.State == "live" && n.Running[row.Job] > 0 {
			row.RunningOn = append(row.RunningOn, n.NodeID)
		}
	}
	if j, ok := v.byJob[row.Job]; ok {
		row.Drift = &j
	}
}
