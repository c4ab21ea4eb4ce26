package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// A plaintext client of a TLS-only port is diagnosed whatever its own
// call reported: a reset, or its deadline (what a loaded host sees first);
// a plaintext server is not blamed on TLS.
func TestExplainTLS_PlaintextToTLSPort(t *testing.T) {
	t.Parallel()
	tlsSrv := redistest.StartTLS(t, false)
	plain := redistest.Start(t)
	for _, callErr := range []error{context.DeadlineExceeded, errReset} {
		p := ExplainTLS(t.Context(), callErr, tlsSrv.Addr(), nil, 2*time.Second)
		if p == nil || p.Short != "plaintext to a TLS port" {
			t.Errorf("TLS port, call error %v: got %v, want plaintext to a TLS port", callErr, p)
		}
	}
	if p := ExplainTLS(t.Context(), context.DeadlineExceeded, plain.Addr(), nil, 2*time.Second); p != nil {
		t.Errorf("plaintext port: got %v, want no TLS problem", p)
	}
}

type resetError struct{}

func (resetError) Error() string { return "read: connection reset by peer" }

var errReset error = resetError{}
