// Package e2e holds end-to-end tests of the real cronlock binary: the tests
// build cmd/cronlock once, start several daemon processes against real
// redis-server processes (internal/redistest) and check, from the daemons'
// JSON logs, a run ledger written by the job commands and the Redis keys,
// that the exactly-once protocol (docs/protocol.md), process handling, hooks,
// reload and shutdown behave as documented (docs/architecture.md).
//
// The package has no non-test code; this file exists only to carry the
// package documentation.
package e2e
