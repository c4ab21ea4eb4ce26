// Package cluster is cluster membership: who runs what among the nodes
// that share one Redis.
//
//   - The heartbeat (Heartbeat, heartbeat.go): this daemon's record in
//     Redis, P node:ID, and its job hashes, P node-jobs:ID
//     (docs/protocol.md, "The node heartbeat record"), swapped every beat;
//     a second live daemon with the same node.id is reported
//     (cronlock_node_id_conflict). The other nodes' records are read back
//     (peers.go, JobsCache) for drift and for the claim order.
//   - Targeting (targeting.go, watcher.go): a job's nodes: must all be in
//     a node's node.tags for that node to claim it (Matches, ForNode); the
//     Watcher reports jobs that no live node may run
//     (cronlock_job_unrunnable).
//   - Config drift (drift.go): Compare and Cluster are pure; Detector logs
//     each change of one node's view once (cronlock_config_drift).
//   - Run requests (runrequests.go): the Taker pops the cluster's run
//     requests (docs/protocol.md, "Runs on the cluster") of the jobs this
//     node holds and hands each to the job as a manual run; a request is
//     popped by one daemon and run at most once.
//   - The node's load and the claim order (nodeload.go): Load counts this
//     node's runs in progress against node.max_parallel, and ranks the live
//     nodes for each (job, slot) so that each node's claim waits its rank
//     × RankStep, at most MaxDelay. The order carries no guarantee: the
//     claim decides (rule R1).
//
// The Redis side of every record is package redislock's; this package
// declares the small interfaces it needs (HeartbeatStore, RunRequestStore).
package cluster
