// Package e2e holds end-to-end tests of the real cronlock binary: the tests
// build cmd/cronlock once, start several daemon processes against real
// redis-server processes (internal/redistest) and check, from the daemons'
// JSON logs, a run ledger written by the job commands and the Redis keys,
// that the exactly-once protocol (docs/protocol-v2.md; the v2_*_test.go
// files hold the tests of its issue, 32), process handling, hooks,
// reload and shutdown behave as documented (docs/architecture.md).
//
// Every test uses its own temporary directory and, if it needs Redis, its
// own redis-server on a free port, and signals only processes it started.
// Most call t.Parallel: they spend their time waiting for wall-clock
// slots, so run the package with -parallel 8 or more (the default,
// GOMAXPROCS, runs only two at a time on two cores). The fault tests whose
// checks have margins well under a second (node churn and death, the three
// outages, the partition) do not: go test runs them first, one at a time,
// and each says why. The first, TestNodeChurn_SIGKILLEveryFewSeconds, is
// the least tight; it absorbs the load of the other packages' tests, which
// `go test ./...` runs alongside this package at its start.
//
// The package has no non-test code; this file exists only to carry the
// package documentation.
package e2e
