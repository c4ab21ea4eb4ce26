#!/usr/bin/env bash
# Install cronlock from a source checkout, for machines without the Debian
# package (`make package`). It installs the same files as the package:
#   sudo packaging/install.sh                     # build, install under /usr/local, create the user
#   packaging/install.sh --dry-run                # print the steps, change nothing
#   DESTDIR=/tmp/stage packaging/install.sh       # stage into a root (no user, no systemctl)
#   sudo packaging/install.sh --uninstall         # remove it; keeps config and state
#   sudo packaging/install.sh --uninstall --purge # also delete config and state
# Options:
#   --prefix DIR  binary, man pages, completions and docs under DIR (default /usr/local);
#                 the unit goes to /etc/systemd/system, the config to /etc/cronlock
#   --from DIR    take DIR/cronlock, DIR/man/*.gz, DIR/completion/* and, if there,
#                 DIR/THIRD_PARTY_LICENSES instead of building them (`make build man
#                 completion`), e.g. when root has no Go; a release tarball, unpacked,
#                 is such a directory
#
# Idempotent: a second run changes nothing (files are written only when their
# content differs). An existing /etc/cronlock/cronlock.yaml or
# /etc/default/cronlock is never overwritten: when the shipped one differs it
# is put beside it as *.dist. It enables nothing and starts nothing (it
# prints how).
set -euo pipefail

prefix=/usr/local
from=""
dry_run=0
uninstall=0
purge=0
destdir="${DESTDIR:-}"
destdir="${destdir%/}"
USER_NAME=cronlock

usage() {
	sed -n '2,21s/^# \{0,1\}//p' "$0"
}

while [[ $# -gt 0 ]]; do
	case "$1" in
	--prefix) [[ $# -ge 2 ]] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix="$2"; shift ;;
	--prefix=*) prefix="${1#--prefix=}" ;;
	--from) [[ $# -ge 2 ]] || { echo "install.sh: --from needs a directory" >&2; exit 2; }; from="$2"; shift ;;
	--from=*) from="${1#--from=}" ;;
	--dry-run | -n) dry_run=1 ;;
	--uninstall) uninstall=1 ;;
	--purge) purge=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "install.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done
if [[ $purge -eq 1 && $uninstall -eq 0 ]]; then
	echo "install.sh: --purge goes with --uninstall" >&2
	exit 2
fi
if [[ $prefix != /* ]]; then
	echo "install.sh: --prefix '$prefix' is not an absolute path" >&2
	exit 2
fi
prefix="${prefix%/}"

# The checkout root is the parent of this script's directory.
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Installed paths (without DESTDIR) → the package's paths in comments.
BIN="$prefix/bin/cronlock"                                  # /usr/bin/cronlock
UNIT=/etc/systemd/system/cronlock.service                   # /lib/systemd/system/cronlock.service
CONF_DIR=/etc/cronlock
CONF="$CONF_DIR/cronlock.yaml"                              # conffile
DEFAULTS=/etc/default/cronlock                              # conffile
MAN1="$prefix/share/man/man1/cronlock.1.gz"
MAN5="$prefix/share/man/man5/cronlock.yaml.5.gz"
BASH_COMP="$prefix/share/bash-completion/completions/cronlock"
ZSH_COMP="$prefix/share/zsh/site-functions/_cronlock"       # /usr/share/zsh/vendor-completions/_cronlock
DOC="$prefix/share/doc/cronlock/copyright"
LICENSES="$prefix/share/doc/cronlock/THIRD_PARTY_LICENSES"
DROPINS="$prefix/share/cronlock/dropins"                     # ready drop-ins for the unit (docs/systemd.md)
DROPIN_FILES=(write-paths.conf run-as-root.conf no-sandbox.conf)
STATE_DIR=/var/lib/cronlock

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

# put SRC MODE DEST installs SRC as $destdir/DEST unless it has that content
# and mode already.
put() {
	local from_file="$1" mode="$2" to="$destdir$3"
	if [[ -f $to ]] && cmp -s "$from_file" "$to" && [[ $(stat -c %a "$to") == "${mode#0}" ]]; then
		note "$3 is up to date"
		return
	fi
	step install -D -m "$mode" "$from_file" "$to"
}

# put_conffile SRC MODE DEST installs a configuration file only when DEST
# does not exist; an existing one is kept and a differing shipped version
# goes beside it as DEST.dist.
put_conffile() {
	local from_file="$1" mode="$2" to="$destdir$3"
	if [[ ! -e $to ]]; then
		step install -D -m "$mode" "$from_file" "$to"
	elif cmp -s "$from_file" "$to"; then
		note "$3 is up to date"
	else
		note "$3 exists and differs from the shipped one: kept unchanged"
		put "$from_file" "$mode" "$3.dist"
	fi
}

systemd_running() {
	[[ -z $destdir && -d /run/systemd/system ]]
}

if [[ $dry_run -eq 1 ]]; then
	note "dry run: printing the steps only; nothing is changed"
elif [[ -z $destdir && $(id -u) -ne 0 ]]; then
	echo "install.sh: must run as root (it writes $prefix, /etc and creates the '$USER_NAME' user)." >&2
	echo "Run: sudo $0   (or $0 --dry-run to see the steps, or set DESTDIR to stage into a directory)" >&2
	exit 1
fi

if [[ $uninstall -eq 1 ]]; then
	if systemd_running; then
		step systemctl disable --now cronlock.service
	fi
	for f in "$BIN" "$UNIT" "$MAN1" "$MAN5" "$BASH_COMP" "$ZSH_COMP" "$DOC" "$LICENSES" "${DROPIN_FILES[@]/#/$DROPINS/}"; do
		if [[ -e $destdir$f ]]; then
			step rm -f "$destdir$f"
		fi
	done
	for d in "$prefix/share/doc/cronlock" "$DROPINS" "$prefix/share/cronlock"; do
		if [[ -d $destdir$d ]]; then
			step rmdir --ignore-fail-on-non-empty "$destdir$d"
		fi
	done
	if systemd_running; then
		step systemctl daemon-reload
	fi
	if [[ $purge -eq 1 ]]; then
		step rm -rf "$destdir$CONF_DIR" "$destdir$DEFAULTS" "$destdir$STATE_DIR"
		note "the '$USER_NAME' user is kept (files elsewhere may belong to it): userdel $USER_NAME"
	else
		note "kept $CONF_DIR, $DEFAULTS and $STATE_DIR (--uninstall --purge deletes them)"
	fi
	note "done"
	exit 0
fi

# 1. Build (or take the files from --from).
if [[ -n $from ]]; then
	note "--from: using $from/cronlock, $from/man, $from/completion and $from/THIRD_PARTY_LICENSES"
	bin_src="$from/cronlock" man_src="$from/man" comp_src="$from/completion" licenses_src="$from/THIRD_PARTY_LICENSES"
else
	if [[ $dry_run -eq 0 ]] && ! command -v "${GO:-go}" >/dev/null 2>&1; then
		echo "install.sh: 'go' not found on PATH: run 'make build man completion' as yourself, then '$0 --from $src/dist/build' with dist/build/cronlock copied from bin/cronlock" >&2
		exit 1
	fi
	step make -C "$src" build man completion
	bin_src="$src/bin/cronlock" man_src="$src/dist/build/man" comp_src="$src/dist/build/completion"
	licenses_src="$src/dist/build/THIRD_PARTY_LICENSES"
	echo "+ $src/scripts/third-party-licenses.sh $bin_src > $licenses_src"
	if [[ $dry_run -eq 0 ]]; then
		GO="${GO:-go}" bash "$src/scripts/third-party-licenses.sh" "$bin_src" >"$licenses_src"
	fi
fi
if [[ $dry_run -eq 0 ]]; then
	for f in "$bin_src" "$man_src/cronlock.1.gz" "$man_src/cronlock.yaml.5.gz" "$comp_src/cronlock.bash" "$comp_src/_cronlock"; do
		if [[ ! -f $f ]]; then
			echo "install.sh: $f is missing (make build man completion builds it)" >&2
			exit 1
		fi
	done
fi

# 2. The files (the same set as the Debian package).
if [[ $dry_run -eq 1 ]]; then
	note "install $bin_src as $BIN and the rest of the package's files"
else
	unit_tmp="$(mktemp)"
	trap 'rm -f "$unit_tmp"' EXIT
	# ExecStart= and ExecReload= (its -validate) name the installed binary.
	sed "s#^\(Exec[A-Za-z]*\)=/usr/bin/cronlock #\1=$BIN #" "$src/packaging/cronlock.service" >"$unit_tmp"
	put "$bin_src" 0755 "$BIN"
	put "$unit_tmp" 0644 "$UNIT"
	put "$man_src/cronlock.1.gz" 0644 "$MAN1"
	put "$man_src/cronlock.yaml.5.gz" 0644 "$MAN5"
	put "$comp_src/cronlock.bash" 0644 "$BASH_COMP"
	put "$comp_src/_cronlock" 0644 "$ZSH_COMP"
	put "$src/packaging/copyright" 0644 "$DOC"
	if [[ -f $licenses_src ]]; then
		put "$licenses_src" 0644 "$LICENSES"
	else
		note "$licenses_src is missing: not installing $LICENSES (make licenses generates it; go version -m $BIN lists the modules)"
	fi
	for f in "${DROPIN_FILES[@]}"; do
		put "$src/packaging/dropins/$f" 0644 "$DROPINS/$f"
	done
	put_conffile "$src/packaging/cronlock.yaml" 0644 "$CONF"
	put_conffile "$src/packaging/default" 0600 "$DEFAULTS"
fi

# 3. System user (no login shell; its home is the state directory, which
# systemd creates from StateDirectory=).
if [[ -n $destdir ]]; then
	note "DESTDIR is set: not creating the '$USER_NAME' user (create it on the target: useradd --system --user-group --no-create-home --home-dir $STATE_DIR --shell /usr/sbin/nologin $USER_NAME)"
elif getent passwd "$USER_NAME" >/dev/null 2>&1; then
	note "user '$USER_NAME' exists"
else
	nologin="$(command -v nologin || echo /usr/sbin/nologin)"
	step useradd --system --user-group --no-create-home --home-dir "$STATE_DIR" \
		--shell "$nologin" --comment "cronlock daemon" "$USER_NAME"
fi

# 4. Validate the configuration with the installed binary.
echo "+ $destdir$BIN -validate -config $destdir$CONF"
if [[ $dry_run -eq 0 ]] && ! "$destdir$BIN" -validate -config "$destdir$CONF"; then
	echo "install.sh: $CONF is invalid (problems above): fix it, then run: systemctl restart cronlock" >&2
	exit 1
fi

# 5. systemd.
if systemd_running; then
	step systemctl daemon-reload
	note "enable and start with: systemctl enable --now cronlock"
	note "after a config change: systemctl reload cronlock"
else
	note "not reloading systemd (DESTDIR set or systemd not running)"
fi
note "done"
