package redislock

import (
	"context"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// The calls of the ledger's reads, the audit, the node records, the run
// requests and the event streams, once a client exists (Lazy.Client).

func (l *Lazy) SwapNode(ctx context.Context, id string, value, jobs []byte, ttl time.Duration) ([]byte, bool, error) {
	r, err := l.Client()
	if err != nil {
		return nil, false, err
	}
	return r.SwapNode(ctx, id, value, jobs, ttl)
}

func (l *Lazy) NodeJobs(ctx context.Context, ids []string) ([][]byte, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.NodeJobs(ctx, ids)
}

func (l *Lazy) DropNode(ctx context.Context, id string, values [][]byte) (bool, error) {
	r, err := l.Client()
	if err != nil {
		return false, err
	}
	return r.DropNode(ctx, id, values)
}

func (l *Lazy) IndexNode(ctx context.Context, id string, at time.Time) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.IndexNode(ctx, id, at)
}

func (l *Lazy) UnindexNode(ctx context.Context, id string) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.UnindexNode(ctx, id)
}

func (l *Lazy) Nodes(ctx context.Context) ([][]byte, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.Nodes(ctx)
}

func (l *Lazy) AnnounceNode(ctx context.Context, id string) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.AnnounceNode(ctx, id)
}

func (l *Lazy) WatchNodes(ctx context.Context, subscribed func(), announced func(id string)) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.WatchNodes(ctx, subscribed, announced)
}

func (l *Lazy) PendingRunJobs(ctx context.Context, since time.Time) ([]string, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.PendingRunJobs(ctx, since)
}

func (l *Lazy) TakeRun(ctx context.Context, job, node string, at time.Time) (*ledger.RunRequest, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.TakeRun(ctx, job, node, at)
}

func (l *Lazy) SetRunStatus(ctx context.Context, job string, st ledger.RunStatus) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.SetRunStatus(ctx, job, st)
}

func (l *Lazy) WatchRunRequests(ctx context.Context, subscribed, notified func()) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.WatchRunRequests(ctx, subscribed, notified)
}

func (l *Lazy) AddEvents(ctx context.Context, events map[string][]Event) error {
	r, err := l.Client()
	if err != nil {
		return err
	}
	return r.AddEvents(ctx, events)
}

// Audit runs the missed-occurrence audit once a client exists.
func (l *Lazy) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	r, err := l.Client()
	if err != nil {
		return ledger.Audited{}, err
	}
	return r.Audit(ctx, req)
}

// Occurrences reads the ledger once a client exists.
func (l *Lazy) Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	r, err := l.Client()
	if err != nil {
		return nil, err
	}
	return r.Occurrences(ctx, job, from, to)
}
