// Package subscription keeps a Pub/Sub subscription alive: the one loop
// shared by the node channel (cluster.Heartbeat) and the run request
// channel (cluster.Taker). It knows no client: the store subscribes and
// tells its refusals.
package subscription

import (
	"context"
	"sync/atomic"
	"time"
)

// The backoff between two subscriptions after a failure: from Min,
// doubling up to Max, back to Min after a subscription that was
// confirmed.
const (
	Min = time.Second
	Max = 30 * time.Second
)

// Keep calls subscribe until ctx ends. subscribe blocks while subscribed
// and returns when the subscription ends; it calls confirmed once Redis
// has confirmed it. After each end but ctx's, Keep calls ended with the
// error and first (true for the loss of a confirmed subscription and for
// the first failure of each kind, lost connection or refusal, in a
// streak: a refusal that follows connection errors is still reported)
// and refused (isRefusal(err): the error is the server's own refusal, such
// as an ACL's NOPERM, rather than a lost connection; the store tells,
// e.g. redislock's Refused); wasConfirmed tells whether the
// subscription that ended had been confirmed. Then it waits the backoff.
// Keep returns when ctx ends, without calling ended.
func Keep(ctx context.Context, subscribe func(confirmed func()) error, isRefusal func(error) bool,
	ended func(err error, wasConfirmed, first, refused bool)) {
	wait := Min
	var told [2]bool // a lost connection, a refusal: each reported once per streak
	for {
		var confirmed atomic.Bool // set on the subscription's goroutine
		err := subscribe(func() { confirmed.Store(true) })
		if ctx.Err() != nil {
			return
		}
		if confirmed.Load() {
			wait, told = Min, [2]bool{}
		}
		refused := isRefusal(err)
		kind := 0
		if refused {
			kind = 1
		}
		ended(err, confirmed.Load(), !told[kind], refused)
		told[kind] = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, Max)
	}
}
