#!/usr/bin/env bash
# Makes sure redis-server is on PATH, because `make test` runs integration
# tests against real redis-server processes (the tests start their own
# servers on free loopback ports; nothing is started here). On Debian or
# Ubuntu it installs Debian's redis-server package; elsewhere it stops with
# a one-line instruction. It never lets the Redis tests be skipped.
set -euo pipefail
exec bash "$(dirname "$0")/ensure-tools.sh" ensure-redis \
	"redis-server is required for 'make test'; install Redis >= 6 (e.g. 'brew install redis' or your distribution's redis package) and retry" \
	redis-server=redis-server
