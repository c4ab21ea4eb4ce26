// Package chaos is cronlock's randomized fault test (issue 32, "What it
// must show", item 8): `make test-chaos`. It holds no code of its own
// outside its tests; this file is its README.
//
// # What it does
//
// TestChaos (chaos_test.go, build tag chaos, so `make test` does not run
// it) builds the daemon, starts one real redis-server (AOF on, fsync
// always) and 3–5 daemons, each reaching Redis through a TCP proxy of its
// own (internal/redistest.Proxy), so that one node can be cut off alone.
// The daemons share one config of eight jobs: every second, every 2 s,
// overlap skip, queue, replace and allow, a max_runs: 1 job, a job with
// jitter and one that runs longer than its period. Each run appends a
// start line and an end line to its job's output file (the job, its slot,
// its fencing token, its trigger, the node, the shell's pid and the time
// from `date +%s.%N`); a run ended by SIGTERM writes its end line from a
// trap.
//
// A fault plan is drawn from the seed (math/rand/v2, PCG) and printed
// before anything starts: SIGSTOP/SIGCONT of a daemon, SIGKILL of a daemon
// and of its runs' process groups (a crashed machine) and a restart,
// Redis restarted empty and Redis restarted from its AOF, a node
// restarted with its clock offset (the daemon's test clock seam,
// CRONLOCK_TEST_CLOCK_OFFSET or the older CRONLOCK_INTERNAL_CLOCK_OFFSET,
// whichever the binary knows; skipped when it knows neither) and a
// partition between one node and Redis. Faults start after a warm-up and
// end before a quiet tail; never two at once on one target (a node, or
// Redis), and never all nodes at once. The plan is a function of the seed,
// the length and nothing else: a failing seed replays the same plan.
//
// After the run every fault is undone, the daemons get SIGTERM, and the
// checker (checker_test.go, Check) reads only the jobs' output files, the
// Redis ledger (protocol v2's occurrence records, cronlock:occ:JOB, read
// every few seconds and just before each Redis restart, so that what an
// empty restart erased was seen first) and the test's own record of when
// it killed what. It checks:
//
//  1. no slot ran twice;
//  2. no two runs of a job other than overlap: allow overlapped in time (a
//     run without an end line ends when the test killed its node, else at
//     the end of the test: conservative);
//  3. fencing tokens strictly increase per job in start order (allow jobs:
//     no token given twice);
//  4. every due occurrence ran, or its ledger record says skipped or missed
//     with a reason; a slot nobody can account for because an empty Redis
//     restart erased its record is counted apart, and allowed only around
//     such a restart; a record claimed by a node the test killed, without a
//     run, is counted apart too; anything else is a silent miss;
//  5. the ledger agrees with the runs (a run's record is claimed/ran with
//     its token, never skipped or missed);
//  6. a max_runs job succeeded at most max_runs times, and nothing started
//     after that;
//  7. no daemon exited on its own, and each exited 0 on the final SIGTERM;
//  8. no run started before its slot (100 ms margin) nor more than
//     lock_ttl + 1 s after it (a fast or slow clock must not move runs).
//
// Until protocol v2 lands the daemon writes no ledger: checks 4 and 5 then
// say so, and every due slot that did not run counts against check 4 (no
// record accounts for it).
//
// It prints the seed, the plan, what was done when, and a verdict table;
// any violation fails the test with the command that replays the seed.
// The output directory (job outputs, daemon logs, ledger dump) is kept
// when the test fails and its path printed.
//
// # Running it
//
//	CRONLOCK_CHAOS_SEED=12345 CRONLOCK_CHAOS_SECONDS=120 make test-chaos
//
// CRONLOCK_CHAOS_SECONDS is the length (default 120, at least 40);
// CRONLOCK_CHAOS_SEED the seed (default: random, printed);
// CRONLOCK_CHAOS_BINARY a prebuilt daemon to test instead of building
// ./cmd/cronlock. The checker's own tests (checker_cases_test.go) run in
// `make test`: they feed it a duplicate, an overlap, a token going back, a
// silent miss and slots accounted as skipped, so that it provably fails.
package chaos
