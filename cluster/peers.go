package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.uber.org/zap"
)

// compare indexes this node and reads the other nodes' records, hands the
// live ones to Options.Peers (the claim order, package cluster), then
// their job hashes to the drift detector: those a record does not hold
// come from the cache, or are read once per config hash (JobsCache.Fill;
// a peer with this node's config hash needs no read). A failed read, or a
// peer whose hashes are not known this beat, is logged at debug and the
// drift state kept until the next beat.
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
	h.peers(live, 2*h.every)
	h.noteInline(live)
	live = slices.Clone(live) // Fill sets Jobs; Peers may keep the records it got
	unfilled, err := h.cache.Fill(ctx, h.store, live)
	if err != nil || len(unfilled) > 0 {
		h.log.Debug("job hashes of other nodes not read; config drift not checked this beat",
			zap.Strings("nodes", unfilled), zap.Error(err))
		return
	}
	others := make(map[string]map[string]string, len(live))
	for _, r := range live {
		others[r.NodeID] = r.Jobs
	}
	h.drift.Observe(h.self.Jobs, others)
}

// listOlder reads the node list before a beat's write until one read
// succeeded, so that the first record carries the job hashes inline only
// when a live older node needs them (noteInline). A failed read is logged
// at debug; the record then carries them.
func (h *Heartbeat) listOlder(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	values, err := h.store.Nodes(cctx)
	if err != nil {
		h.log.Debug("node list not read; the record carries the job hashes inline until it is", zap.Error(err))
		return
	}
	h.noteInline(h.live(values))
}

// noteInline sets whether our records carry the job hashes inline: while
// some live node's record has them inline without JobsKey (an older
// cronlock, which reads them only there). Until the first node list is
// read they do (New), so that an older node never sees this one without
// jobs; a later switch is logged at info.
func (h *Heartbeat) noteInline(live []Record) {
	var old []string
	for _, r := range live {
		if r.Jobs != nil && !r.JobsKey {
			old = append(old, r.NodeID)
		}
	}
	inline := len(old) > 0
	switch {
	case inline && (!h.inline || !h.listed):
		h.log.Info("a live node of an older cronlock reads job hashes in the heartbeat records: this node's record "+
			"carries them too until no such node is live", zap.Strings("nodes", old))
	case !inline && h.inline && h.listed:
		h.log.Info("no live node of an older cronlock left: the job hashes are only in this node's job hashes key")
	}
	h.inline, h.listed = inline, true
}

// readPeers reads the other nodes' records and hands the live ones to
// HeartbeatOptions.Peers only (a read between beats, Run); a failed read is logged
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
	others := values[:0:0]
	for _, v := range values {
		// Our own record, as we wrote it, is left out undecoded: until the
		// node list is read it carries every job's hash (Record.JobsKey),
		// a 10,000-job record being most of a read's CPU.
		if h.written == nil || !bytes.Equal(v, h.written) {
			others = append(others, v)
		}
	}
	for _, r := range Decode(others) {
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
