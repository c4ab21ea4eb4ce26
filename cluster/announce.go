package cluster

import (
	"context"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/cronlock/cronlock/internal/subscription"
)

// Announcer is a Store that also carries the node channel (docs/protocol.md,
// "The node heartbeat record"); *redislock.Redis implements it. With it
// the heartbeat announces this node when its first record is written and
// when it deletes the record at a clean stop, and reads the node list when
// another node announces itself, instead of reading it every WarmupRead
// during its first TTL (it does so only while not subscribed).
type Announcer interface {
	// AnnounceNode publishes id on the node channel.
	AnnounceNode(ctx context.Context, id string) error
	// WatchNodes blocks while subscribed to the node channel, calling
	// subscribed at each confirmation and announced with each id heard;
	// it returns when ctx ends or the subscription fails for good. The
	// callbacks must not block.
	WatchNodes(ctx context.Context, subscribed func(), announced func(id string)) error
	// Refused reports whether an error of WatchNodes is the server's
	// refusal (an ACL's NOPERM, say) rather than a lost connection.
	Refused(err error) bool
}

// nodeWatch is the heartbeat's view of the node channel: whether it is
// subscribed, and a wake-up (capacity 1: announcements heard while the
// actor reads coalesce into one read) for each announcement of another
// node and each change of the subscription.
type nodeWatch struct {
	subscribed atomic.Bool
	heard      chan struct{}
}

func (w *nodeWatch) poke() {
	select {
	case w.heard <- struct{}{}:
	default:
	}
}

// watchNodes keeps the subscription to the node channel until ctx ends:
// on each confirmation it marks subscribed and pokes (the node list is
// read then: an announcement sent before the subscription was missed),
// on each other node's announcement it pokes. When the subscription fails
// it unmarks subscribed and pokes (the warm-up reads resume while they
// are due), says why once per failure streak (a warning when Redis
// refused it, debug for connection errors, which the health monitor
// reports), and subscribes again after a backoff.
func (h *Heartbeat) watchNodes(ctx context.Context, a Announcer) {
	w := h.watch
	subscription.Keep(ctx, func(confirmed func()) error {
		return a.WatchNodes(ctx, func() {
			confirmed()
			w.subscribed.Store(true)
			w.poke()
		}, func(id string) {
			if id != h.self.NodeID {
				w.poke()
			}
		})
	}, a.Refused, func(err error, _, first, refused bool) {
		w.subscribed.Store(false)
		w.poke()
		switch {
		case !first:
		case refused:
			h.log.Warn("node announcements refused: a node started with this one is seen at the next beat instead of "+
				"at once; grant the Redis user the channel (&PREFIX* and +subscribe, +publish: README.md, \"Redis ACL\")",
				zap.Error(err))
		default:
			h.log.Debug("node announcements lost until subscribed again", zap.Error(err))
		}
	})
	w.subscribed.Store(false)
}

// announce publishes this node's id on the node channel, when the store
// has one; a failure is logged at debug (the others read the list at
// their beats).
func (h *Heartbeat) announce(ctx context.Context) {
	a, ok := h.store.(Announcer)
	if !ok {
		return
	}
	if err := a.AnnounceNode(ctx, h.self.NodeID); err != nil {
		h.log.Debug("node not announced; the other nodes read its record at their next beat", zap.Error(err))
	}
}
