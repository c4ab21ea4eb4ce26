package cluster

import (
	"slices"
	"time"

	"github.com/cronlock/cronlock/config"
)

// Matches reports whether a node with tags may run a job whose nodes: is
// selectors: every "key=value" of selectors is in tags. No selectors match
// every node.
func Matches(selectors []string, tags map[string]string) bool {
	return config.SelectorsMatch(selectors, tags)
}

// ForNode splits jobs into those a node with tags may run (in order) and
// the names of the others. When every job matches, mine is jobs itself
// (not a copy: 10,000 jobs are 3.4 MB); callers do not modify it.
func ForNode(jobs []config.Job, tags map[string]string) (mine []config.Job, others []string) {
	if !slices.ContainsFunc(jobs, func(j config.Job) bool { return !Matches(j.Nodes, tags) }) {
		return jobs, nil
	}
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

// MaxAge is how many of its writer's beats old a heartbeat record may be
// for its node to count as live: two. A node that stopped without deleting
// its record (killed) stops counting 2 beats after its last one, before
// its record's TTL (3 beats) ends and before `cronlock nodes` lists it as
// gone.
const MaxAge = 2

// LiveNodes decodes heartbeat records (the values of
// redislock.Redis.Nodes, the node list) and keeps those written within
// MaxAge beats of their writer's interval (cluster.DefaultHeartbeatEvery for a
// record without one) before now. The age is judged by the writer's
// clock against the reader's (node.max_clock_skew warns when they differ
// by more than 2 s; two beats are 10 s by default). A value that does not
// decode is left out.
func LiveNodes(values [][]byte, now time.Time) []Node {
	out := make([]Node, 0, len(values))
	for _, r := range Decode(values) {
		every := time.Duration(r.EveryMs) * time.Millisecond
		if every <= 0 {
			every = DefaultHeartbeatEvery
		}
		if now.Sub(r.Heartbeat) > MaxAge*every {
			continue
		}
		out = append(out, Node{ID: r.NodeID, Tags: r.Tags})
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
