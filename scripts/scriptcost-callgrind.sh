#!/usr/bin/env bash
# Counts the instructions Redis spends on each ledger script call of a herd's
# slot (docs/performance.md): runs redislock's BenchmarkScriptCost (200 jobs
# with full ledgers, one round of won claims, lost claims and finishes)
# against a redis-server under valgrind --tool=callgrind, one profile per
# phase, and prints per call the whole server's instructions and those inside
# EVALSHA, for the benchmark's second round. Repeatable on a busy machine,
# unlike wall-clock or usec figures. Needs valgrind and redis-server; uses
# loopback port ${PORT:-6398} and a temporary directory.
set -euo pipefail
port=${PORT:-6398}
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
	redis-server --port "$port" --save '' --appendonly no --dir "$dir" >"$dir/valgrind.log" 2>&1 &
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
cd "$(dirname "$0")/.."
CRONLOCK_SCRIPTCOST_HOOK="callgrind_control --dump >/dev/null" CRONLOCK_SCRIPTCOST_ADDR="127.0.0.1:$port" \
	go test -run '^$' -bench ScriptCost -benchtime 200x -count 1 ./redislock >/dev/null
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait
# Dumps: before/after each phase, for the benchmark's two runs; 8, 10 and 12
# are the second run's won claims (200), lost claims (400), finishes (200).
set -- "claim-won 8 200" "claim-lost 10 400" "finish 12 200"
for spec in "$@"; do
	read -r name i calls <<<"$spec"
	f="$dir/cg.out.$i"
	total=$(grep -E '^(summary|totals):' "$f" | head -1 | awk '{print $2}')
	eval=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null | grep -E 'evalShaCommand' | head -1 | awk '{gsub(",", "", $1); print $1}')
	printf '%-10s server %7d  inside EVALSHA %7d instructions per call\n' "$name" $((total / calls)) $((eval / calls))
done
