package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// The node channel (docs/protocol.md, "The node heartbeat record"): a
// daemon announces on the Pub/Sub channel P nodes its node id when its
// first heartbeat record is written and when it deletes the record at a
// clean stop; the other daemons read the node list when they hear it, so
// that nodes started together see each other for the claim order within a
// round trip instead of at the next beat. An announcement is only a hint:
// a subscriber that missed it (not yet subscribed, connection lost) reads
// the list at its next beat, and reads it when its subscription is
// confirmed.

func (r *Redis) nodeChannel() string { return r.prefix + "nodes" }

// NodeChannel is the node channel's name, for the ACL docs and tests.
func (r *Redis) NodeChannel() string { return r.nodeChannel() }

// AnnounceNode publishes id on the node channel (PUBLISH, one round trip,
// bounded by the call timeout). It returns the Redis or connection error.
func (r *Redis) AnnounceNode(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.c.Do(ctx, r.c.B().Publish().Channel(r.nodeChannel()).Message(id).Build()).Error(); err != nil {
		return fmt.Errorf("announce on %s: %w", r.nodeChannel(), err)
	}
	return nil
}

// WatchNodes subscribes to the node channel and calls subscribed each time
// Redis confirms the subscription (the first time, and after rueidis
// subscribed again on a new connection: announcements in between are
// lost) and announced with the node id of each announcement. It blocks
// until ctx ends (then it returns ctx.Err()) or the subscription fails
// for good (a Redis error such as NOPERM, or a connection error rueidis'
// retries gave up on). The callbacks run on rueidis' goroutine and must
// not block.
func (r *Redis) WatchNodes(ctx context.Context, subscribed func(), announced func(id string)) error {
	return r.watch(ctx, "node channel", r.nodeChannel(), subscribed, announced)
}

// watch subscribes to channel until ctx ends or the subscription fails
// for good, calling subscribed at each confirmation and message with each
// message (WatchNodes, WatchRunRequests); its error names the channel as
// what.
func (r *Redis) watch(ctx context.Context, what, channel string, subscribed func(), message func(string)) error {
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" {
			subscribed()
		}
	})
	err := r.c.Receive(hooked, r.c.B().Subscribe().Channel(channel).Build(),
		func(m rueidis.PubSubMessage) { message(m.Message) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		err = errors.New("subscription ended")
	}
	return fmt.Errorf("%s %s: %w", what, channel, err)
}
