package cluster

import (
	"context"
	"encoding/json"
)

// JobHashes is the JSON value of a node's job hashes key P node-jobs:ID
// (docs/protocol.md, "The node heartbeat record"): every configured job's
// config.JobHash and the config hash that digests them. The heartbeat
// writes it only when it changes (at the start, at a reload, and again when
// the key was lost), not at every beat, so that a beat's work does not grow
// with the number of jobs.
type JobHashes struct {
	ConfigHash string            `json:"config_hash"`
	Jobs       map[string]string `json:"jobs"`
}

// JobsReader reads the nodes' job hashes keys; implemented by
// *redislock.Redis.
type JobsReader interface {
	// NodeJobs returns the value of the job hashes key of each of ids, in
	// order, nil for a key that does not exist, in one round trip.
	NodeJobs(ctx context.Context, ids []string) ([][]byte, error)
}

// JobsCache fills the Jobs of heartbeat records that leave them out
// (Record.JobsKey): by config hash from what it read before, else from
// the node's job hashes key. Two records with one config hash have the
// same job hashes (config.ConfigHash digests them), so a config hash is
// read once, from one of its nodes, and never again while some record
// carries it. Not safe for concurrent use.
type JobsCache struct {
	byHash map[string]map[string]string // config hash → job hashes
	own    string                       // the config hash Own set: never dropped
}

// NewJobsCache returns an empty cache.
func NewJobsCache() *JobsCache { return &JobsCache{byHash: map[string]map[string]string{}} }

// Own records this node's own job hashes under their config hash: a
// record with that hash is filled without a read. The entry stays until
// the next Own replaces it. jobs must not be modified afterwards.
func (c *JobsCache) Own(hash string, jobs map[string]string) {
	if c.own != "" {
		delete(c.byHash, c.own)
	}
	c.own = hash
	c.byHash[hash] = jobs
}

// Fill sets Jobs of every record of recs that has none and a config hash:
// from the cache, or else from its node's job hashes key, all misses in
// one NodeJobs call, one node per config hash (the first in recs). What it
// reads is cached by the config hash the value names. It returns the ids
// of the records it could not fill, in order: their key was gone, or held
// another config hash (the node reloaded between the read of its record
// and of its key: the next read finds both new), or the read failed (err
// is then the read's error). A record with neither Jobs nor a config hash
// is unfillable too. Cached hashes that no record of recs carries, other
// than Own's, are dropped. The maps set are the cache's: callers must not
// modify them.
func (c *JobsCache) Fill(ctx context.Context, r JobsReader, recs []Record) (unfilled []string, err error) {
	used := map[string]bool{}
	var ids []string
	for _, rec := range recs {
		if rec.Jobs != nil || rec.ConfigHash == "" {
			continue
		}
		if _, ok := c.byHash[rec.ConfigHash]; !ok && !used[rec.ConfigHash] {
			ids = append(ids, rec.NodeID)
		}
		used[rec.ConfigHash] = true
	}
	if len(ids) > 0 {
		var values [][]byte
		values, err = r.NodeJobs(ctx, ids)
		for _, v := range values {
			var jh JobHashes
			if v == nil || json.Unmarshal(v, &jh) != nil || !used[jh.ConfigHash] {
				continue
			}
			if jh.Jobs == nil {
				jh.Jobs = map[string]string{}
			}
			c.byHash[jh.ConfigHash] = jh.Jobs
		}
	}
	for i := range recs {
		if recs[i].Jobs != nil {
			continue
		}
		if jobs, ok := c.byHash[recs[i].ConfigHash]; ok && recs[i].ConfigHash != "" {
			recs[i].Jobs = jobs
		} else {
			unfilled = append(unfilled, recs[i].NodeID)
		}
	}
	for h := range c.byHash {
		if !used[h] && h != c.own {
			delete(c.byHash, h)
		}
	}
	return unfilled, err
}
