package engine

import (
	"context"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/redislock"
)

var (
	_ missedReporter = (*lazyRedis)(nil)
	_ missedReporter = (*redislock.Redis)(nil)
	_ missedReporter = (*redislock.Memory)(nil)
)

// ReportMissed runs the missed-slot report once a client exists.
func (l *lazyRedis) ReportMissed(ctx context.Context, checks []actors.MissedCheck) ([]actors.MissedReport, error) {
	r, err := l.client()
	if err != nil {
		return nil, err
	}
	return r.ReportMissed(ctx, checks)
}
