package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cronlock/cronlock/redislock"
	"github.com/redis/rueidis"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// peerLog records the node ids each Options.Peers call got.
type peerLog struct {
	mu    sync.Mutex
	calls [][]string
}

func (p *peerLog) peers(o []Record, _ time.Duration) {
	ids := make([]string, 0, len(o))
	for _, r := range o {
		ids = append(ids, r.NodeID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, ids)
}

func (p *peerLog) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.calls) }

// waitFor polls until the last call's ids are want, at most within.
func (p *peerLog) waitFor(t *testing.T, want []string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		n := len(p.calls)
		var last []string
		if n > 0 {
			last = p.calls[n-1]
		}
		p.mu.Unlock()
		if n > 0 && slices.Equal(last, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Peers not told %v within %v; its calls: %v", want, within, p.calls)
		}
	}
}

// TestHeartbeat_AnnouncedNodesAreReadAtOnce: against a real Redis, a node
// subscribed to the node channel reads the node list when another node
// announces its first record (and when it announces its clean stop), well
// within a second: without the announcement it would read it only at its
// next beat, 5 s later, since a subscribed node makes no warm-up reads
// (checked too: no read in the 1.5 s after).
func TestHeartbeat_AnnouncedNodesAreReadAtOnce(t *testing.T) {
	r, srv := newRedis(t)
	run := func(id string, p *peerLog) (stop func()) {
		h := NewHeartbeat(HeartbeatOptions{Log: zap.NewNop(), Store: r, Peers: p.peers, Self: Record{NodeID: id, Instance: "i-" + id, Jobs: map[string]string{}}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	var p1 peerLog
	stop1 := run("n1", &p1)
	defer stop1()
	for deadline := time.Now().Add(5 * time.Second); srv.Do("PUBSUB", "NUMSUB", r.NodeChannel()) != r.NodeChannel()+"\n1"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber to %s within 5s: %s", r.NodeChannel(), srv.Do("PUBSUB", "NUMSUB", r.NodeChannel()))
		}
	}
	p1.waitFor(t, []string{}, time.Second) // its beat, and the read at the confirmation

	stop2 := run("n2", &peerLog{})
	p1.waitFor(t, []string{"n2"}, 500*time.Millisecond)
	stop2()
	p1.waitFor(t, []string{}, 500*time.Millisecond)

	n := p1.count()
	time.Sleep(1500 * time.Millisecond)
	if got := p1.count(); got != n {
		t.Errorf("subscribed, nothing announced: Peers called %d more times in 1.5 s, want 0 (no warm-up reads)", got-n)
	}
}

// announcingStore is a memStore with a node channel whose subscription
// the test controls: each WatchNodes call takes its outcome from watches
// (a nil error: confirmed, then held until ctx ends or fail is closed).
type announcingStore struct {
	memStore
	watches   chan error
	fail      chan struct{}
	announced chan string
}

func (s *announcingStore) AnnounceNode(_ context.Context, id string) error {
	s.announced <- id
	return nil
}

func (s *announcingStore) Refused(err error) bool { _, ok := redislock.ServerReply(err); return ok }

func (s *announcingStore) WatchNodes(ctx context.Context, subscribed func(), _ func(string)) error {
	select {
	case err := <-s.watches:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	subscribed()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.fail:
		return errors.New("connection lost")
	}
}

// TestHeartbeat_WarmupReadsWhileNotSubscribed: a node whose subscription
// Redis refuses warns once and makes the warm-up reads (every second); once
// subscribed it stops them, and when the subscription is lost it makes
// them again until the first TTL ends. The node is announced after its
// first beat and after its record is deleted at the stop.
func TestHeartbeat_WarmupReadsWhileNotSubscribed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &announcingStore{watches: make(chan error, 4), fail: make(chan struct{}), announced: make(chan string, 4)}
		s.watches <- &rueidis.RedisError{} // refused
		core, logs := observer.New(zapcore.DebugLevel)
		var p peerLog
		h := NewHeartbeat(HeartbeatOptions{Log: zap.New(core), Store: s, Peers: p.peers, Self: Record{NodeID: "n1", Instance: "i1", Jobs: map[string]string{}}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		synctest.Wait()
		if !announcedNow(t, s, "n1", "the first beat") {
			t.FailNow()
		}
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		if n := p.count(); n != 4 { // the beat at 0, warm-up reads at 1, 2, 3 s
			t.Errorf("refused subscription, after 3 s: Peers called %d times, want 4", n)
		}
		if n := logs.FilterMessageSnippet("node announcements refused").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
			t.Errorf("refused subscription logged %d times at warn, want 1", n)
		}

		// Counted before the confirmation is sent: the heartbeat's goroutine
		// may make the confirmation's read before this one runs again.
		at := p.count()
		s.watches <- nil            // the retry (1 s after the refusal) is confirmed: one read, then none
		time.Sleep(3 * time.Second) // to 6 s: the beat at 5 s
		synctest.Wait()
		if n := p.count() - at; n != 2 {
			t.Errorf("subscribed, 3 to 6 s: Peers called %d times, want 2 (the read at the confirmation, the beat at 5 s)", n)
		}

		close(s.fail) // lost at 6 s: warm-up reads at 7, 8, 9 s
		at = p.count()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		if n := p.count() - at; n != 3 {
			t.Errorf("subscription lost, 6 to 9 s: Peers called %d times, want 3 (warm-up reads)", n)
		}
		cancel()
		<-done
		announcedNow(t, s, "n1", "the record's deletion at the stop")
	})
}

// announcedNow reports whether s has an announcement of id waiting, the
// one made after what; it says why not.
func announcedNow(t *testing.T, s *announcingStore, id, what string) bool {
	t.Helper()
	select {
	case got := <-s.announced:
		if got != id {
			t.Errorf("announced %q after %s, want %s", got, what, id)
			return false
		}
		return true
	default:
		t.Errorf("%s was not announced", what)
		return false
	}
}
