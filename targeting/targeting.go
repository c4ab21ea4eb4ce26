// Package targeting decides which nodes may run which jobs: a job's nodes:
// ["key=value", …] must all be in a node's node.tags for that node to
// claim it. Jobs that do not match this node are not scheduled here at
// all (ForNode). The Watcher actor reads the other nodes' heartbeat records
// (package registry, key P node:ID) and reports every job that no live
// node may run: one error log when it becomes so, one info log when a
// matching node is back, and the gauge cronlock_job_unrunnable{job}.
package targeting

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"github.com/cronlock/cronlock/registry"
)

// Matches reports whether a node with tags may run a job whose nodes: is
// selectors: every "key=value" of selectors is in tags. No selectors match
// every node.
func Matches(selectors []string, tags map[string]string) bool {
	for _, s := range selectors {
		k, v, _ := strings.Cut(s, "=")
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ForNode splits jobs into those a node with tags may run (in order) and
// the names of the others.
func ForNode(jobs []config.Job, tags map[string]string) (mine []config.Job, others []string) {
	mine = make([]config.Job, 0, len(jobs))
	for _, j := range jobs {
		if Matches(j.Nodes, tags) {
			mine = append(mine, j)
		} else {
			others = append(others, j.Name)
		}
	}
	return mine, others
}

// Node is a live node as targeting sees it.
type Node struct {
	ID   string
	Tags map[string]string
}

// MaxAge is how old a heartbeat record may be for its node to count as
// live: two beats. A node that stopped without deleting its record (killed)
// stops counting 2 beats after its last one, before its record expires.
const MaxAge = 2 * registry.DefaultEvery

// LiveNodes decodes heartbeat records (redislock.Redis.NodeRecords) and
// keeps those written within MaxAge, judged by the time to live Redis has
// left on them (so by Redis's clock, not the writers'). ttl is the
// records' TTL (registry.DefaultTTL). A record that does not decode is
// left out.
func LiveNodes(recs []redislock.NodeRecord, ttl time.Duration) []Node {
	out := make([]Node, 0, len(recs))
	for _, rec := range recs {
		if ttl-rec.Left > MaxAge {
			continue
		}
		var r registry.Record
		if err := json.Unmarshal(rec.Value, &r); err != nil {
			continue
		}
		out = append(out, Node{ID: rec.ID, Tags: r.Tags})
	}
	return out
}

// Runners returns the ids of the nodes that may run a job with selectors,
// sorted.
func Runners(selectors []string, nodes []Node) []string {
	var ids []string
	for _, n := range nodes {
		if Matches(selectors, n.Tags) && !slices.Contains(ids, n.ID) {
			ids = append(ids, n.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
