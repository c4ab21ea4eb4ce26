package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Kinds of Diff, from the comparing node's point of view.
const (
	Added   = "added"   // the job is here but not on the other nodes named
	Removed = "removed" // the job is on the other nodes named but not here
	Changed = "changed" // the job is on both, with another hash there
)

// Diff is one job whose configuration differs between this node and the
// other nodes in Nodes (sorted node ids).
type Diff struct {
	Job   string   `json:"job"`
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// String is "nightly added (not on n2, n3)" and the like.
func (d Diff) String() string {
	switch d.Kind {
	case Added:
		return fmt.Sprintf("%s added here (not on %s: it runs only on the nodes that have it)", d.Job, strings.Join(d.Nodes, ", "))
	case Removed:
		return fmt.Sprintf("%s removed here (still on %s: it runs only there)", d.Job, strings.Join(d.Nodes, ", "))
	default:
		return fmt.Sprintf("%s changed (another configuration on %s)", d.Job, strings.Join(d.Nodes, ", "))
	}
}

// Compare returns how self (job name → hash) differs from each of others
// (node id → job name → hash), one Diff per job and kind, sorted by job.
// Nil when every other node has exactly self's jobs and hashes.
func Compare(self map[string]string, others map[string]map[string]string) []Diff {
	type jk struct{ job, kind string }
	found := map[jk][]string{}
	for id, jobs := range others {
		for name, h := range self {
			switch oh, ok := jobs[name]; {
			case !ok:
				found[jk{name, Added}] = append(found[jk{name, Added}], id)
			case oh != h:
				found[jk{name, Changed}] = append(found[jk{name, Changed}], id)
			}
		}
		for name := range jobs {
			if _, ok := self[name]; !ok {
				found[jk{name, Removed}] = append(found[jk{name, Removed}], id)
			}
		}
	}
	var out []Diff
	for k, nodes := range found {
		slices.Sort(nodes)
		out = append(out, Diff{Job: k.job, Kind: k.kind, Nodes: nodes})
	}
	slices.SortFunc(out, func(a, b Diff) int {
		if c := strings.Compare(a.Job, b.Job); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return out
}

// Job is one job whose configuration is not the same on every node of a
// cluster view.
type Job struct {
	Job string `json:"job"`
	// On are the nodes that have the job (sorted); Missing those that do
	// not: the job runs only on On.
	On      []string `json:"on"`
	Missing []string `json:"missing,omitempty"`
	// Versions is the number of different hashes of the job among On.
	Versions int `json:"versions"`
}

// String is "nightly: only on n1 (not on n2, n3)" or "backup: 2
// configurations on n1, n2, n3".
func (j Job) String() string {
	s := j.Job + ":"
	if len(j.Missing) > 0 {
		s += fmt.Sprintf(" only on %s (not on %s)", strings.Join(j.On, ", "), strings.Join(j.Missing, ", "))
	}
	if j.Versions > 1 {
		s += fmt.Sprintf(" %d configurations on %s", j.Versions, strings.Join(j.On, ", "))
	}
	return s
}

// Cluster returns the jobs that differ between nodes (node id → job name
// → hash), sorted by name; nil when all nodes agree.
func Cluster(nodes map[string]map[string]string) []Job {
	ids := make([]string, 0, len(nodes))
	names := map[string]bool{}
	for id, jobs := range nodes {
		ids = append(ids, id)
		for name := range jobs {
			names[name] = true
		}
	}
	slices.Sort(ids)
	var out []Job
	for name := range names {
		j := Job{Job: name}
		versions := map[string]bool{}
		for _, id := range ids {
			h, ok := nodes[id][name]
			if !ok {
				j.Missing = append(j.Missing, id)
				continue
			}
			j.On = append(j.On, id)
			versions[h] = true
		}
		j.Versions = len(versions)
		if len(j.Missing) > 0 || j.Versions > 1 {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b Job) int { return strings.Compare(a.Job, b.Job) })
	return out
}

// Detector is one node's drift state across heartbeats. It is not safe for
// concurrent use: its owner (the heartbeat actor) calls Observe.
type Detector struct {
	log   *zap.Logger
	gauge prometheus.Gauge
	last  string // key of the last observed diffs; "" = no drift
	seen  bool   // Observe was called
}

// NewDetector returns a detector whose gauge cronlock_config_drift is
// registered with reg (nil = not registered).
func NewDetector(log *zap.Logger, reg prometheus.Registerer) *Detector {
	d := &Detector{log: log, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cronlock_config_drift",
		Help: "1 while this node's job configuration differs from another live node's (jobs added, removed or changed), else 0."})}
	if reg != nil {
		reg.MustRegister(d.gauge)
	}
	return d
}

// Observe compares self with the other live nodes' jobs (Compare), sets
// the gauge, and logs when the differences changed since the last call: a
// warning naming every differing job, or one info line when the drift is
// over. It returns the differences.
func (d *Detector) Observe(self map[string]string, others map[string]map[string]string) []Diff {
	diffs := Compare(self, others)
	key := ""
	for _, df := range diffs {
		key += df.String() + "\n"
	}
	if len(diffs) > 0 {
		d.gauge.Set(1)
	} else {
		d.gauge.Set(0)
	}
	if d.seen && key == d.last {
		return diffs
	}
	wasDrift := d.last != ""
	d.seen, d.last = true, key
	if len(diffs) == 0 {
		if wasDrift {
			d.log.Info("config drift over: every live node has the same job configuration", zap.Int("other_nodes", len(others)))
		}
		return diffs
	}
	var added, removed, changed, details []string
	for _, df := range diffs {
		details = append(details, df.String())
		switch df.Kind {
		case Added:
			added = append(added, df.Job)
		case Removed:
			removed = append(removed, df.Job)
		default:
			changed = append(changed, df.Job)
		}
	}
	d.log.Warn("config drift: this node's job configuration differs from other live nodes; a job missing on a node "+
		"runs only on the nodes that have it, a changed job runs as configured on whichever node claims the slot",
		zap.Strings("added", added), zap.Strings("removed", removed), zap.Strings("changed", changed),
		zap.Strings("details", details))
	return diffs
}
