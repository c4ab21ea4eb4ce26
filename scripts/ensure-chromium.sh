#!/usr/bin/env bash
# Makes sure Debian's chromium is installed: the dashboard's browser test
# (e2e TestDashboard) drives it headless through chromedp. Outside CI the
# test skips without it; with CI=true it fails, so CI installs it here.
set -euo pipefail
exec bash "$(dirname "$0")/ensure-tools.sh" ensure-chromium \
	"the dashboard's browser test needs Chromium; install your distribution's chromium package and retry" \
	chromium=chromium
