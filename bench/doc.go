// Package bench is the driver behind `make bench` (README.md,
// "Performance"): it measures each workload against its floor (a bare Go
// program, bench/floor, that starts the same commands at the same
// instants) and against the targets, interleaving floor and daemon runs in
// one invocation, and prints one table (also written to
// bench/results.json). MONITOR lines are parsed here as well.
//
// The driver itself is the test TestBench in this directory, behind the
// build tag "bench", so that `make test` never runs it:
//
//	go test -tags bench -run TestBench -v -timeout 10m ./bench
//
// The non-test code here is the pure part (statistics, verdicts, the
// table, the machine's load from /proc, MONITOR parsing), unit-tested by
// `make test`.
package bench
