package redislock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// NodeRecord is one heartbeat record P+"node:"+ID as NodeRecords finds it.
type NodeRecord struct {
	ID    string        // the node id, from the key
	Value []byte        // the record as the node wrote it (package registry encodes it)
	Left  time.Duration // time to live left (PTTL): the record's TTL minus its age
}

// nodeScanCount is the COUNT hint of one SCAN call.
const nodeScanCount = 1000

// NodeRecords returns every node heartbeat record in Redis (docs/protocol.md,
// "The node heartbeat record"), in no particular order: the keys matching
// P+"node:*", found with SCAN on every node of the deployment (each shard in
// Cluster mode; records seen twice, on a primary and its replica, are kept
// once), then read with GET and PTTL in one pipelined round trip. A record
// that expires in between is left out. The SCAN walks the whole keyspace
// of each node, about one round trip per 1000 keys; callers should call it
// no more often than the heartbeat interval. Bounded by the call timeout
// unless ctx has a deadline; an error names the step that failed.
func (r *Redis) NodeRecords(ctx context.Context) ([]NodeRecord, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	pattern := globEscape(r.key("node", "")) + "*"
	seen := map[string]bool{}
	var keys []string
	for addr, c := range r.c.Nodes() {
		cursor := uint64(0)
		for {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(nodeScanCount).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("list node records: scan %s: %w", addr, err)
			}
			for _, k := range e.Elements {
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(keys))
	for _, k := range keys {
		cmds = append(cmds, r.c.B().Get().Key(k).Build(), r.c.B().Pttl().Key(k).Build())
	}
	res := r.c.DoMulti(ctx, cmds...)
	out := make([]NodeRecord, 0, len(keys))
	prefix := r.key("node", "")
	for i, k := range keys {
		v, err := res[2*i].AsBytes()
		if rueidis.IsRedisNil(err) {
			continue // expired since the scan
		}
		if err != nil {
			return nil, fmt.Errorf("list node records: get %s: %w", k, err)
		}
		ms, err := res[2*i+1].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("list node records: pttl %s: %w", k, err)
		}
		out = append(out, NodeRecord{ID: strings.TrimPrefix(k, prefix), Value: v, Left: time.Duration(ms) * time.Millisecond})
	}
	return out, nil
}

// globEscape escapes the characters SCAN MATCH reads as a glob (* ? [ ] \)
// so that a key prefix matches literally.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
