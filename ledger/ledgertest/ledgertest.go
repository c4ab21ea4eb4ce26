// Package ledgertest is the conformance suite of the exactly-once
// protocol (docs/protocol.md): the cases every ledger.Locker backend must
// pass, run by the tests of each backend (redislock against a real
// redis-server, ledger/memory in process), and the helpers they share.
package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// Backend is the method set every backend shares; the suite runs against
// it. (Consumers declare their own small interfaces, such as ledger.Locker.)
type Backend interface {
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Renew(ctx context.Context, job, owner string, ttl time.Duration) (int64, error)
	Release(ctx context.Context, job, owner string) (bool, error)
	Finish(ctx context.Context, req ledger.FinishRequest) (ledger.Finished, error)
	History(ctx context.Context, job string, n int) ([]ledger.RunRecord, error)
	State(ctx context.Context, job string) (ledger.JobState, error)
	Pause(ctx context.Context, job string) error
	Resume(ctx context.Context, job string) error
	Time(ctx context.Context) (time.Time, error)
	Ping(ctx context.Context) error
	Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error)
	Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error)
	Unhand(ctx context.Context, job, owner string) (int64, bool, error)
	Close()
}

// Store hands out clients that share one coordination store.
type Store struct {
	Name      string
	NewClient func(t testing.TB) Backend
	// LoseState deletes everything the store holds of a job (lease,
	// state, ledger), as a restart without persistence would.
	LoseState func(t testing.TB, job string)
}

// Case is one rule of the suite.
type Case struct {
	Name string
	Fn   func(t *testing.T, s Store)
}

// Run runs every case of Cases against s, each as a subtest.
func Run(t *testing.T, s Store) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) { c.Fn(t, s) })
	}
}

// Ctx returns a context that ends with the test and has a deadline, as
// every production Redis call must.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func MustState(t *testing.T, b Backend, job string) ledger.JobState {
	t.Helper()
	st, err := b.State(Ctx(t), job)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
