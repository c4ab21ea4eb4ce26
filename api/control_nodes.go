package api

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/cluster"
)

// NodeRow is one daemon in `cronlock nodes -json`: its heartbeat record
// plus what the reader derives from it.
type NodeRow struct {
	cluster.Record
	// Jobs are the node's job hashes (job name → config.JobHash), from its
	// record or its job hashes key; nil when that key could not be read
	// (it was gone: the node writes it again at its next beat). Then the
	// node's drift is not judged and the other nodes are compared without
	// it.
	Jobs map[string]string `json:"jobs"`
	// State is "live" while the record was written within its TTL, else
	// "gone" (the key lingers for one more TTL).
	State string `json:"state"`
	AgeMs int64  `json:"age_ms"` // since the last heartbeat, by this machine's clock
	// Drift lists how the node's jobs differ from the other live nodes'
	// (empty for a gone node, which is not compared).
	Drift []cluster.Diff `json:"drift"`
}

// Cluster is the node list with its drift, read once from Redis; it
// serves `nodes` and `status`.
type Cluster struct {
	Nodes []NodeRow `json:"nodes"`
	// Drift are the jobs not configured alike on every live node.
	Drift []cluster.Job `json:"drift"`
	byJob map[string]cluster.Job
	// targets are the nodes that count as live for job targeting
	// (cluster.LiveNodes: written within two beats).
	targets []cluster.Node
}

// Nodes reads every node record (two round trips), then the job hashes of
// the records that do not hold them, one node per config hash (one more
// round trip when there is any; cluster.JobsCache), and compares the live
// ones.
func Nodes(ctx context.Context, r ReadStore, now time.Time) (*Cluster, error) {
	values, err := r.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	recs := cluster.Decode(values)
	if _, err := cluster.NewJobsCache().Fill(ctx, r, recs); err != nil {
		return nil, err
	}
	v := &Cluster{Nodes: []NodeRow{}, Drift: []cluster.Job{}, byJob: map[string]cluster.Job{}, targets: cluster.LiveNodes(values, now)}
	live := map[string]map[string]string{}
	for _, rec := range recs {
		row := NodeRow{Record: rec, Jobs: rec.Jobs, State: "gone", AgeMs: now.Sub(rec.Heartbeat).Milliseconds(), Drift: []cluster.Diff{}}
		if rec.Live(now) {
			row.State = "live"
			if rec.Jobs != nil {
				live[rec.NodeID] = rec.Jobs
			}
		}
		v.Nodes = append(v.Nodes, row)
	}
	for i, row := range v.Nodes {
		if row.State != "live" || row.Jobs == nil {
			continue
		}
		others := map[string]map[string]string{}
		for id, jobs := range live {
			if id != row.NodeID {
				others[id] = jobs
			}
		}
		if d := cluster.Compare(row.Jobs, others); d != nil {
			v.Nodes[i].Drift = d
		}
	}
	if d := cluster.Cluster(live); d != nil {
		v.Drift = d
	}
	for _, j := range v.Drift {
		v.byJob[j.Job] = j
	}
	return v, nil
}

// annotate adds the cluster's view of row's job: where it is running, how
// it drifts, and which live nodes may run it.
func (v *Cluster) annotate(row *JobStatus) {
	if ids := cluster.Runners(row.Nodes, v.targets); ids != nil {
		row.Runners = ids
	}
	row.Unrunnable = len(row.Nodes) > 0 && len(row.Runners) == 0
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
