package engine

import (
	"context"

	"github.com/cronlock/cronlock/ledger"
)

// Audit runs the missed-occurrence audit once a client exists.
func (l *lazyRedis) Audit(ctx context.Context, req ledger.AuditRequest) (ledger.Audited, error) {
	r, err := l.client()
	if err != nil {
		return ledger.Audited{}, err
	}
	return r.Audit(ctx, req)
}

// Occurrences reads the ledger once a client exists.
func (l *lazyRedis) Occurrences(ctx context.Context, job string, from, to int64) ([]ledger.Occurrence, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.Occurrences(ctx, job, from, to)
}
