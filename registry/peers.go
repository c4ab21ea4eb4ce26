package registry

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"
)

// compare indexes this node and reads the other nodes' records, then
// hands the live ones' job hashes to the drift detector and the live
// records to Options.Peers (the claim order, package nodeload). A failed read is
// logged at debug and the drift state kept until the next beat.
func (h *Heartbeat) compare(ctx context.Context, at time.Time) {
	if err := h.store.IndexNode(ctx, h.self.NodeID, at); err != nil {
		h.log.Debug("node index not written", zap.Error(err))
		return
	}
	values, err := h.store.Nodes(ctx)
	if err != nil {
		h.log.Debug("node list not read; config drift not checked this beat", zap.Error(err))
		return
	}
	live := h.live(values)
	others := make(map[string]map[string]string, len(live))
	for _, r := range live {
		others[r.NodeID] = r.Jobs
	}
	h.peers(live, 2*h.every)
	h.drift.Observe(h.self.Jobs, others)
}

// readPeers reads the other nodes' records and hands the live ones to
// Options.Peers only (a read between beats, Run); a failed read is logged
// at debug and changes nothing.
func (h *Heartbeat) readPeers(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	values, err := h.store.Nodes(cctx)
	if err != nil {
		h.log.Debug("node list not read", zap.Error(err))
		return
	}
	h.peers(h.live(values), 2*h.every)
}

// live decodes the node records values and keeps the other nodes' live
// ones (Record.Live), in order.
func (h *Heartbeat) live(values [][]byte) []Record {
	var out []Record
	for _, r := range Decode(values) {
		if r.NodeID != h.self.NodeID && r.Live(h.now()) {
			out = append(out, r)
		}
	}
	return out
}

// Decode returns the records among values that are readable heartbeat
// records (a JSON object with a node id and an instance), in order;
// others are left out.
func Decode(values [][]byte) []Record {
	out := make([]Record, 0, len(values))
	for _, v := range values {
		var r Record
		if json.Unmarshal(v, &r) == nil && r.NodeID != "" && r.Instance != "" {
			out = append(out, r)
		}
	}
	return out
}
