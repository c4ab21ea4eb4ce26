package redislock

import (
	"fmt"
	"testing"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/internal/redistest"
	"go.uber.org/zap/zapcore"
)

// TLS to a real redis-server with a PKI made by the test: with the CA (and,
// for mTLS, the client certificate) the node is ready and claims; every
// misconfiguration leaves it not ready, claims refused, with a state and
// one error line that name the cause and the fix. An unknown CA is refused
// unless insecure_skip_verify is set.
func TestHealth_TLS(t *testing.T) {
	plain := redistest.Start(t)
	ca := redistest.StartTLS(t, false)
	mtls := redistest.StartTLS(t, true)
	f := mtls.Files
	mtls2 := redistest.StartTLS(t, true) // a second ready case: one server per ready case
	f2 := mtls2.Files
	tlsYAML := func(addr string, extra string) string {
		return fmt.Sprintf("{address: %q, tls: {enabled: true%s}}", addr, extra)
	}
	withCA := fmt.Sprintf(", ca_file: %q", f.CA)
	withCert := fmt.Sprintf(", cert_file: %q, key_file: %q", f.ClientCert, f.ClientKey)
	for _, tc := range []struct {
		name, redis string
		ready       bool
		state, fix  string
	}{
		{"CA", tlsYAML(ca.Addr(), fmt.Sprintf(", ca_file: %q", ca.Files.CA)), true, "up", ""},
		{"mTLS", tlsYAML(mtls.Addr(), withCA+withCert), true, "up", ""},
		{"mTLS without a client certificate", tlsYAML(mtls.Addr(), withCA), false,
			"tls: the server requires a client certificate", "redis.tls.cert_file"},
		{"unknown CA", tlsYAML(mtls.Addr(), fmt.Sprintf(", ca_file: %q", f.OtherCA)+withCert), false,
			"tls: server certificate from an unknown authority", "redis.tls.ca_file"},
		{"unknown CA, insecure_skip_verify", tlsYAML(mtls2.Addr(), fmt.Sprintf(", ca_file: %q, insecure_skip_verify: true, cert_file: %q, key_file: %q",
			f2.OtherCA, f2.ClientCert, f2.ClientKey)),
			true, "up", ""},
		{"wrong server name", tlsYAML(mtls.Addr(), withCA+withCert+", server_name: db.example"), false,
			"tls: server certificate for another name", "redis.tls.server_name"},
		{"TLS to a plaintext port", tlsYAML(plain.Addr(), withCA), false, "tls: TLS handshake to a plaintext port", "redis.tls.enabled: false"},
		{"plaintext to a TLS port", fmt.Sprintf("{address: %q}", mtls.Addr()), false, "tls: plaintext to a TLS port", "redis.tls.enabled: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hh := newHealthHarness(t, tc.redis)
			hh.check(t, true)
			hh.check(t, false)
			hh.expect(t, tc.name, tc.ready, tc.state)
			if tc.ready {
				if got := hh.claimReason(t); got != "claimed" {
					t.Errorf("claim: got %s, want claimed", got)
				}
				return
			}
			if n := hh.count(zapcore.ErrorLevel, tc.fix); n != 1 {
				t.Errorf("error lines naming %q: got %d, want 1", tc.fix, n)
			}
			if got := hh.claimReason(t); got != ledger.SkipRedisError {
				t.Errorf("claim: got %s, want %s", got, ledger.SkipRedisError)
			}
		})
	}
}
