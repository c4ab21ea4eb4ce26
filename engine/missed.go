package engine

import (
	"context"

	"github.com/cronlock/cronlock/actors"
)

// ReportMissed runs the missed-slot report once a client exists.
func (l *lazyRedis) ReportMissed(ctx context.Context, checks []actors.MissedCheck) ([]actors.MissedReport, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.ReportMissed(ctx, checks)
}
