#!/usr/bin/env bash
# Install cronlock from a source checkout as a systemd service:
#   sudo packaging/install.sh            # build, install, create user, install unit
#   packaging/install.sh --dry-run       # print the steps, change nothing
#   sudo packaging/install.sh --no-build # use an existing bin/cronlock (e.g. when
#                                        # root has no Go toolchain: run `make build` first)
#
# Idempotent: safe to run again after `git pull` to upgrade. It never
# overwrites an existing /etc/cronlock/cronlock.yaml, and it does not enable
# or start the service (it prints how).
set -euo pipefail

BIN_DIR=/usr/local/bin
CONF_DIR=/etc/cronlock
CONF="$CONF_DIR/cronlock.yaml"
UNIT_DIR=/etc/systemd/system
USER_NAME=cronlock
STATE_DIR=/var/lib/cronlock

dry_run=0
build=1

usage() {
	sed -n '2,10s/^# \{0,1\}//p' "$0"
}

for arg in "$@"; do
	case "$arg" in
	--dry-run | -n) dry_run=1 ;;
	--no-build) build=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "install.sh: unknown argument '$arg' (try --help)" >&2
		exit 2
		;;
	esac
done

# The checkout root is the parent of this script's directory.
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ! -f "$src/Makefile" || ! -d "$src/cmd/cronlock" ]]; then
	echo "install.sh: $src is not a cronlock source checkout (no Makefile or cmd/cronlock)" >&2
	exit 1
fi

# step prints a command and, unless --dry-run, runs it.
step() {
	printf '+'
	printf ' %q' "$@"
	printf '\n'
	if [[ $dry_run -eq 0 ]]; then
		"$@"
	fi
}

# note prints an explanation of a decision.
note() {
	echo "# $*"
}

if [[ $dry_run -eq 1 ]]; then
	note "dry run: printing the steps only; nothing is changed"
elif [[ $(id -u) -ne 0 ]]; then
	echo "install.sh: must run as root (it writes $BIN_DIR, $CONF_DIR and $UNIT_DIR and creates the '$USER_NAME' user)." >&2
	echo "Run: sudo $0   (or $0 --dry-run to see the steps)" >&2
	exit 1
fi

# 1. Build.
if [[ $build -eq 1 ]]; then
	if [[ $dry_run -eq 0 ]] && ! command -v "${GO:-go}" >/dev/null 2>&1; then
		echo "install.sh: 'go' not found on root's PATH: run 'make build' as yourself, then 'sudo $0 --no-build'" >&2
		exit 1
	fi
	step make -C "$src" build
else
	note "--no-build: using the existing $src/bin/cronlock"
fi
if [[ $dry_run -eq 0 && ! -x "$src/bin/cronlock" ]]; then
	echo "install.sh: $src/bin/cronlock is missing: run 'make build' first" >&2
	exit 1
fi

# 2. Binary.
step install -D -m 0755 "$src/bin/cronlock" "$BIN_DIR/cronlock"

# 3. System user (no login shell, no home directory of its own).
if getent passwd "$USER_NAME" >/dev/null 2>&1; then
	note "user '$USER_NAME' exists"
else
	nologin="$(command -v nologin || echo /usr/sbin/nologin)"
	step useradd --system --user-group --no-create-home --home-dir "$STATE_DIR" \
		--shell "$nologin" --comment "cronlock daemon" "$USER_NAME"
fi

# 4. Configuration: never overwrite an existing file.
step install -d -m 0750 -o root -g "$USER_NAME" "$CONF_DIR"
if [[ -e "$CONF" ]]; then
	note "$CONF exists: kept unchanged"
else
	step install -m 0640 -o root -g "$USER_NAME" "$src/testdata/example-redis.yaml" "$CONF"
	note "edit $CONF: set redis.address (or REDIS_ADDRESS) and your jobs"
fi

# 5. Validate the configuration with the installed binary.
echo "+ $BIN_DIR/cronlock -validate -config $CONF"
if [[ $dry_run -eq 0 ]] && ! "$BIN_DIR/cronlock" -validate -config "$CONF"; then
	echo "install.sh: $CONF is invalid (problems above): fix it, then run: systemctl restart cronlock" >&2
	exit 1
fi

# 6. systemd unit.
step install -D -m 0644 "$src/packaging/cronlock.service" "$UNIT_DIR/cronlock.service"
if [[ -d /run/systemd/system ]]; then
	step systemctl daemon-reload
	note "enable and start with: systemctl enable --now cronlock"
	note "after a config change: systemctl reload cronlock"
else
	note "systemd is not running on this machine: skipped 'systemctl daemon-reload'"
fi
note "done"
