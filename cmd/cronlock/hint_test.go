package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cronlock/cronlock/config"
)

// The "is Redis reachable, are the credentials right" hint is added to
// errors that can come from reaching Redis (timeouts, network errors), not
// to an unreadable record, where it would send the operator the wrong way.
func TestRedisHint_OnlyForConnectionErrors(t *testing.T) {
	s := &opsSession{kind: "redis", cfg: &config.Config{Redis: config.Redis{Address: "127.0.0.1:6379"}}}
	const hint = "reading redis 127.0.0.1:6379, db 0, key prefix \"\": is it reachable"
	for _, err := range []error{
		fmt.Errorf("history %q: %w", "j", context.DeadlineExceeded),
		fmt.Errorf("pause: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}),
	} {
		if got := s.redisHint(err).Error(); !strings.Contains(got, hint) {
			t.Errorf("%v: got %q, want the hint", err, got)
		}
	}
	bad := errors.New(`events "long": entry 1-0: field at: parsing time "notatime"`)
	if got := s.redisHint(bad).Error(); strings.Contains(got, "reachable") || !strings.HasSuffix(got, `(reading redis 127.0.0.1:6379, db 0, key prefix "")`) {
		t.Errorf("malformed entry: got %q, want the Redis named and no connection hint", got)
	}
	if s.redisHint(nil) != nil {
		t.Errorf("redisHint(nil) is not nil")
	}
}
