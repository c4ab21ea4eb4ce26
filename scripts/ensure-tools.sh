#!/usr/bin/env bash
# ensure-tools.sh LABEL HINT CMD=PACKAGE...
# Makes sure every CMD is on PATH. On Debian or Ubuntu it installs the
# missing ones from Debian's packages (through sudo when not root);
# elsewhere it stops with HINT. Used by scripts/ensure-redis.sh,
# scripts/ensure-packaging-tools.sh and scripts/ensure-chromium.sh.
set -euo pipefail

label=$1 hint=$2
shift 2
missing=() cmds=()
for pair in "$@"; do
	cmd=${pair%%=*}
	cmds+=("$cmd")
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing+=("${pair#*=}")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "$label: ${missing[*]} missing and sudo is not available; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
			exit 1
		fi
		SUDO="sudo"
	fi
	echo "$label: installing Debian's ${missing[*]}" >&2
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	for cmd in "${cmds[@]}"; do
		if ! command -v "$cmd" >/dev/null 2>&1; then
			echo "$label: apt-get finished but $cmd is still not on PATH" >&2
			exit 1
		fi
	done
	exit 0
fi

echo "$label: ${missing[*]} missing; $hint" >&2
exit 1
