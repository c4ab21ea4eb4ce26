package e2e

import (
	"testing"
	"time"

	"github.com/cronlock/cronlock/internal/redistest"
)

// A daemon on a TLS-only Redis that requires client certificates (mTLS),
// with the PKI the test generated: the job runs and the node is ready. The
// misconfigurations (unknown CA, no client certificate, plaintext port …)
// are engine.TestHealth_TLS.
func TestTLS_MutualTLSDaemonRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTLS(t, true)
	f := srv.Files
	ledger := newLedger(t)
	jobs, _ := everySecondJobs(ledger, "job", 1, nil)
	cfg := redisConfig("", jobs...)
	cfg["redis"] = map[string]any{"address": srv.Addr(), "tls": map[string]any{"enabled": true, "ca_file": f.CA,
		"cert_file": f.ClientCert, "key_file": f.ClientKey}}
	listen := freeAddr(t)
	cfg["http"] = map[string]any{"listen": listen}
	nodes, ready := startNodes(t, writeConfig(t, cfg), nodeSpec{id: "n1"})
	waitLedgerSlotAfter(t, ledger, "job00", ready)
	waitReadiness(t, "n1", listen, true, "ready")
	stopAll(t, 10*time.Second, nodes...)
}
