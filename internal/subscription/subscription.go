// Package subscription keeps a Redis Pub/Sub subscription alive: the one
// loop shared by the node channel (registry) and the run request channel
// (runrequests).
package subscription

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cronlock/cronlock/redislock"
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
// and refused (the error is
// Redis's own refusal (redislock.ServerReply) such as an ACL's NOPERM,
// rather than a lost connection); wasConfirmed tells whether the
// subscription that ended had been confirmed. Then it waits the backoff.
// Keep returns when ctx ends, without calling ended.
func Keep(ctx context.Context, subscribe func(confirmed func()) error, ended func(err error, wasConfirmed, first, refused bool)) {
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
		_, refused := redislock.ServerReply(err)
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
