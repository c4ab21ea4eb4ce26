#!/usr/bin/env bash
# Makes sure the tools of the packaging tests are on PATH: lintian (the .deb
# check of `make package-test`), systemd-analyze (unit verify and security
# score), man (man page rendering), zsh (the zsh completion check) and
# dpkg-deb. On Debian or Ubuntu it installs the missing ones from Debian's
# packages, as scripts/ensure-redis.sh does for redis-server; elsewhere it
# stops with a one-line instruction. nfpm and go-md2man need no install:
# they are Go tools pinned in tools/go.mod.
set -euo pipefail

# command → Debian package
declare -A want=([lintian]=lintian [systemd-analyze]=systemd [man]=man-db [zsh]=zsh [dpkg-deb]=dpkg)
missing=()
for cmd in "${!want[@]}"; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing+=("${want[$cmd]}")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "ensure-packaging-tools: ${missing[*]} missing and sudo is not available; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
			exit 1
		fi
		SUDO="sudo"
	fi
	echo "ensure-packaging-tools: installing Debian's ${missing[*]}" >&2
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for cmd in "${!want[@]}"; do
		if ! command -v "$cmd" >/dev/null 2>&1; then
			echo "ensure-packaging-tools: apt-get finished but $cmd is still not on PATH" >&2
			exit 1
		fi
	done
	exit 0
fi

echo "ensure-packaging-tools: the packaging tests need ${missing[*]}; install them with your distribution's packages and retry" >&2
exit 1
