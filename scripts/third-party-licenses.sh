#!/usr/bin/env bash
# Writes the THIRD_PARTY_LICENSES file of a cronlock binary to stdout: the
# Go standard library and every Go module linked into BINARY, each with its
# license name and the full text of its license file (and NOTICE file,
# which Apache-2.0 asks to pass on), taken from the module cache.
#
#   scripts/third-party-licenses.sh dist/build/arm64/cronlock > THIRD_PARTY_LICENSES
#
# The libraries and their licenses come from go-licenses (pinned in
# tools/go.mod), run for the binary's GOOS/GOARCH on ./cmd/cronlock of this
# checkout; the list is then checked against `go version -m BINARY`: every
# module linked into the binary must be there, at the version linked, with a
# license go-licenses recognised, else the script fails. The output depends
# only on the checkout, the module cache and the Go version: no paths, no
# dates (a reproducible release needs that). Run by `make licenses`.
set -euo pipefail

bin="${1:?usage: $0 BINARY}"
cd "$(dirname "$0")/.."
GO="${GO:-go}"

meta="$("$GO" version -m "$bin")"
setting() { awk -v k="$1" '$1 == "build" { split($2, kv, "="); if (kv[1] == k) { print substr($2, length(k) + 2) } }' <<<"$meta"; }
goos="$(setting GOOS)"
goarch="$(setting GOARCH)"
gover="$(awk 'NR == 1 { print $2 }' <<<"$meta")"
if [[ -z $goos || -z $goarch ]]; then
	echo "third-party-licenses: $bin: no GOOS/GOARCH in go version -m" >&2
	exit 1
fi
if [[ $gover != "$("$GO" env GOVERSION)" ]]; then
	echo "third-party-licenses: $bin was built with $gover, but $GO is $("$GO" env GOVERSION): its standard library license would be another's" >&2
	exit 1
fi

golicenses="$("$GO" -C tools tool -n go-licenses)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# go-licenses also looks up each license's URL on the network; that is
# not used here and fails harmlessly without a network (logged only).
if ! report="$(GOOS="$goos" GOARCH="$goarch" CGO_ENABLED=0 "$golicenses" report \
	--ignore github.com/cronlock/cronlock --template tools/third-party-licenses.tmpl ./cmd/cronlock 2>"$log")"; then
	cat "$log" >&2
	echo "third-party-licenses: go-licenses report failed" >&2
	exit 1
fi
report="$(LC_ALL=C sort <<<"$report" | grep -v '^$')"

# Every module linked into the binary (go version -m: "dep" lines, or the
# "=>" line of a replaced one) is a library of the report or the parent of
# some (a module whose packages have licenses of their own).
fail=0
while read -r path version; do
	if ! awk -F'\t' -v p="$path" -v v="$version" '($1 == p || index($1, p "/") == 1) && $2 == v { found = 1 } END { exit !found }' <<<"$report"; then
		echo "third-party-licenses: module $path $version is linked into $bin but go-licenses did not report it at that version" >&2
		fail=1
	fi
done < <(awk '$1 == "dep" && $4 != "" { print $2, $3 } $1 == "=>" { print $2, $3 }' <<<"$meta")
while IFS=$'\t' read -r name version license file; do
	if [[ $license == Unknown || -z $file || ! -f $file ]]; then
		echo "third-party-licenses: $name $version: license '$license' in '$file' not recognised; check it by hand and add it to packaging/copyright" >&2
		fail=1
	fi
done <<<"$report"
[[ $fail -eq 0 ]] || exit 1

rule="--------------------------------------------------------------------------------"
cat <<EOF
Third-party software in cronlock for $goos/$goarch
$(printf '%s' "${rule//-/=}")

The cronlock binary is a static Go program. Besides cronlock's own code
(MIT, see LICENSE) it contains the Go standard library and the Go modules
below, each under its own license, whose text follows. \`go version -m
cronlock\` lists the same modules with their checksums.

This file is generated from the module cache by
scripts/third-party-licenses.sh (go-licenses, pinned in tools/go.mod).

EOF
{
	printf '%s\t%s\t%s\n' "Go standard library" "$gover" "BSD-3-Clause"
	cut -f1-3 <<<"$report"
} | awk -F'\t' '{ printf "  %s %s (%s)\n", $1, $2, $3 }'
section() { # name version license file
	printf '\n%s\n%s %s (%s)\n%s\n\n' "$rule" "$1" "$2" "$3" "$rule"
	cat "$4"
	local notice
	for notice in "$(dirname "$4")"/NOTICE "$(dirname "$4")"/NOTICE.txt "$(dirname "$4")"/NOTICE.md; do
		if [[ -f $notice ]]; then
			printf '\n--- %s: %s ---\n\n' "$1" "$(basename "$notice")"
			cat "$notice"
		fi
	done
}
section "Go standard library" "$gover" "BSD-3-Clause" "$("$GO" env GOROOT)/LICENSE"
while IFS=$'\t' read -r name version license file; do
	section "$name" "$version" "$license" "$file"
done <<<"$report"
