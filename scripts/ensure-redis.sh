#!/usr/bin/env bash
# Makes sure redis-server is on PATH, because `make test` runs integration
# tests against real redis-server processes (the tests start their own
# servers on free loopback ports; nothing is started here). On Debian or
# Ubuntu it installs Debian's redis-server package; elsewhere it stops with
# a one-line instruction. It never lets the Redis tests be skipped.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
	exit 0
fi

if [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "ensure-redis: redis-server is missing and sudo is not available; run as root: apt-get update && apt-get install -y redis-server" >&2
			exit 1
		fi
		SUDO="sudo"
	fi
	echo "ensure-redis: redis-server not found; installing Debian's redis-server package" >&2
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
	if command -v redis-server >/dev/null 2>&1; then
		exit 0
	fi
	echo "ensure-redis: apt-get finished but redis-server is still not on PATH" >&2
	exit 1
fi

echo "ensure-redis: redis-server is required for 'make test'; install Redis >= 6 (e.g. 'brew install redis' or your distribution's redis package) and retry" >&2
exit 1
