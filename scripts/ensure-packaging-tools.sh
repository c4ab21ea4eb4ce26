#!/usr/bin/env bash
# Makes sure the tools of the packaging tests are on PATH: lintian (the .deb
# check of `make package-test`), systemd-analyze (unit verify and security
# score), man (man page rendering), zsh (the zsh completion check) and
# dpkg-deb. On Debian or Ubuntu it installs the missing ones from Debian's
# packages; elsewhere it stops with a one-line instruction. nfpm and
# go-md2man need no install: they are Go tools pinned in tools/go.mod.
set -euo pipefail
exec bash "$(dirname "$0")/ensure-tools.sh" ensure-packaging-tools \
	"the packaging tests need them; install them with your distribution's packages and retry" \
	lintian=lintian systemd-analyze=systemd man=man-db zsh=zsh dpkg-deb=dpkg
