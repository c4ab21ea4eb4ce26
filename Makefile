# cronlock — see README.md. `make test` needs redis-server (installed by
# scripts/ensure-redis.sh on Debian/Ubuntu when missing).

GO      ?= go
BIN     := bin/cronlock
PKG     := ./cmd/cronlock
# One version for every build (make build, install, package and release;
# the binary's -version and its cronlock_build_info metric): the exact git
# tag of HEAD, else 0.0.0-dev+<commit> (12 hex digits). A plain `go build`
# in a checkout gets the same from the go command's VCS stamp
# (cmd/cronlock/buildinfo.go). `make -s version` prints it.
TAG     := $(shell git describe --tags --exact-match 2>/dev/null)
COMMIT  := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
VERSION := $(or $(TAG),$(if $(COMMIT),0.0.0-dev+$(COMMIT)))
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Packaging (packaging/, docs/man/). The Debian version is the tag without
# its "v", else 0.0.0~git<commit time, UTC>.<commit>: "~" sorts before any
# release, and the time keeps snapshot builds in commit order for dpkg.
# The binary inside says VERSION all the same.
COMMIT_TIME  := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null)
# Every date in the packages and tarballs is the commit's (reproducible
# builds: SOURCE_DATE_EPOCH for nfpm, tar --mtime).
COMMIT_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null)
PKG_VERSION  := $(if $(filter 0.0.0-dev+%,$(VERSION)),0.0.0~git$(COMMIT_TIME).$(COMMIT),$(patsubst v%,%,$(VERSION)))
# The binaries of packages and releases: static (CGO_ENABLED=0), no paths
# of this machine (-trimpath), no build id and no VCS stamp (the version
# is in the ldflags), so that two builds of one commit are the same bytes.
REL_LDFLAGS := $(LDFLAGS) -buildid=
ARCHES      := amd64 arm64
DIST        := dist
BUILD_DIR   := $(DIST)/build
RELEASE_DIR := $(DIST)/release
# The packaging tools are pinned in tools/go.mod (a module of their own, so
# that they do not change the daemon's dependencies); go tool -n builds
# them from the module cache and prints the binary's path.
NFPM         = $(shell $(GO) -C tools tool -n nfpm)
MD2MAN       = $(shell $(GO) -C tools tool -n go-md2man)

.PHONY: build install test test-topologies test-cover run bench bench-go lint fmt ensure-redis clean man completion binaries licenses package package-test release version

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

install:
	$(GO) install -trimpath -ldflags '$(LDFLAGS)' $(PKG)

version:
	@echo '$(VERSION)'

ensure-redis:
	@bash scripts/ensure-redis.sh

# 8 tests of a package at once (the e2e tests mostly wait for slots), and
# the fork-heavy e2e tests one at a time (e2e/heavy_test.go). The e2e
# package runs after the others, not beside them: its daemons' timing
# needs the machine's CPU (on a day the machine forked 2.3 times slower,
# sharing it with redislock's tests made timing tests fail). The timeout
# bounds a hung test; every package must stay within 60% of it.
test: ensure-redis
	$(GO) test -race -count=1 -parallel 8 -timeout 420s $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -race -count=1 -parallel 8 -timeout 420s ./e2e

# The failover tests (Sentinel and Cluster masters killed under running
# daemons, and the fixtures' own failover checks): too heavy for `make
# test`'s budget, so they skip there unless TEST_TOPOLOGIES=1. About 20 s;
# the timeout leaves room for the Sentinel test to follow up to three
# failovers on a loaded machine (about 115 s) and report, not panic.
test-topologies: ensure-redis
	TEST_TOPOLOGIES=1 $(GO) test -race -count=1 -timeout 240s -run 'Failover|Topologies' ./internal/redistest ./redislock ./e2e

# The randomized fault test (internal/chaos/, docs/protocol.md; not part of `make
# test`): 3-5 daemons and one Redis under a fault plan drawn from a seed,
# then a checker on the jobs' output and the occurrence ledger.
# CRONLOCK_CHAOS_SECONDS is its length (default 120, at least 40),
# CRONLOCK_CHAOS_SEED its seed (default random; printed first, and on a
# failure with the command that replays it).
CRONLOCK_CHAOS_SECONDS ?= 120
.PHONY: test-chaos
test-chaos: ensure-redis
	CRONLOCK_CHAOS_SECONDS=$(CRONLOCK_CHAOS_SECONDS) $(GO) test -tags chaos -run '^(TestLedgerRead|TestChaos)$$' -count=1 -v \
		-timeout $$(( $(CRONLOCK_CHAOS_SECONDS) + 300 ))s ./internal/chaos

test-cover: ensure-redis
	$(GO) test -race -count=1 -parallel 4 -timeout 295s -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -n 1

# The state directory (node.state_dir) goes under the checkout, so that
# `make run` works without root.
run: build
	CRONLOCK_NODE_STATE_DIR=$(CURDIR)/.state ./$(BIN) -config testdata/example.yaml

# The bench driver (bench/, README.md "Performance"): floor and daemon runs
# interleaved, one table, bench/results.json. CRONLOCK_BENCH_WORKLOADS,
# CRONLOCK_BENCH_SECONDS, CRONLOCK_BENCH_PAIRS and CRONLOCK_BENCH_BASELINE
# choose what it runs. bench-go runs the Go benchmarks of every package.
bench: ensure-redis
	$(GO) test -tags bench -run '^TestBench$$' -count=1 -v -timeout 9m ./bench

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Man pages from docs/man/*.md → $(BUILD_DIR)/man/*.gz, dated by the commit
# (the "" in each page's title line).
MAN_DATE = $(shell git log -1 --format=%cd --date=format:'%B %Y' 2>/dev/null)
man:
	@mkdir -p $(BUILD_DIR)/man
	@for md in docs/man/*.md; do \
		page=$$(basename $$md .md); \
		sed '1s/""/"$(MAN_DATE)"/' $$md | $(MD2MAN) -out $(BUILD_DIR)/man/$$page && \
		gzip -9nf $(BUILD_DIR)/man/$$page || exit 1; \
	done
	@ls $(BUILD_DIR)/man

# Shell completion scripts from the binary itself → $(BUILD_DIR)/completion.
completion: build
	@mkdir -p $(BUILD_DIR)/completion
	./$(BIN) completion bash > $(BUILD_DIR)/completion/cronlock.bash
	./$(BIN) completion zsh > $(BUILD_DIR)/completion/_cronlock

# $(BUILD_DIR)/<arch>/cronlock for each of $(ARCHES): the static,
# reproducible binaries of the packages and release tarballs.
binaries:
	@for arch in $(ARCHES); do \
		echo "build linux/$$arch $(VERSION)"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '$(REL_LDFLAGS)' \
			-o $(BUILD_DIR)/$$arch/cronlock $(PKG) || exit 1; \
	done

# $(BUILD_DIR)/<arch>/THIRD_PARTY_LICENSES: the Go standard library and
# every module linked into that binary with its license text, generated
# (scripts/third-party-licenses.sh, go-licenses in tools/go.mod).
licenses: binaries
	@for arch in $(ARCHES); do \
		GO='$(GO)' bash scripts/third-party-licenses.sh $(BUILD_DIR)/$$arch/cronlock > $(BUILD_DIR)/$$arch/THIRD_PARTY_LICENSES.tmp && \
		mv $(BUILD_DIR)/$$arch/THIRD_PARTY_LICENSES.tmp $(BUILD_DIR)/$$arch/THIRD_PARTY_LICENSES || exit 1; \
	done

# dist/cronlock_<version>_<arch>.deb for each of $(ARCHES): the binaries,
# man pages, completions, third-party licenses, the systemd drop-ins and a
# changelog, packed by nfpm from packaging/nfpm.yaml with every date the
# commit's.
package: man completion binaries licenses
	@case '$(PKG_VERSION)' in *~git.* | '') \
		echo "make package: no git tag or commit to take the version from; run it in a git checkout or set VERSION=1.2.3" >&2; exit 2;; esac
	@rm -f $(DIST)/cronlock_*.deb
	@printf 'cronlock (%s) unstable; urgency=medium\n\n  * Snapshot of commit %s; the repository history lists the changes.\n\n -- cronlock maintainers <maintainers@users.noreply.github.com>  %s\n' \
		'$(PKG_VERSION)' '$(COMMIT)' "$$(git log -1 --format=%aD 2>/dev/null || date -R)" | gzip -9n > $(BUILD_DIR)/changelog.gz
	@for arch in $(ARCHES); do \
		ARCH=$$arch VERSION='$(PKG_VERSION)' BUILD=$(BUILD_DIR) SOURCE_DATE_EPOCH='$(COMMIT_EPOCH)' \
			$(NFPM) package --packager deb --config packaging/nfpm.yaml \
			--target $(DIST)/cronlock_$(PKG_VERSION)_$$arch.deb || exit 1; \
	done

# The release artifacts of HEAD in $(RELEASE_DIR): for each of $(ARCHES)
# cronlock_<version>_linux_<arch>.tar.gz (the binary, man pages,
# completions, the example config, LICENSE, README.md and
# THIRD_PARTY_LICENSES in one directory), the .debs of `make package`, and
# SHA256SUMS of them all. Reproducible: a second run on the same commit
# (with the same Go) gives the same bytes, so the same SHA256SUMS.
release: package
	@if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then \
		echo "make release: WARNING: the work tree differs from commit $(COMMIT) (git status): these artifacts are not that commit's" >&2; fi
	@rm -rf $(RELEASE_DIR) $(BUILD_DIR)/tar && mkdir -p $(RELEASE_DIR)
	@for arch in $(ARCHES); do \
		name=cronlock_$(VERSION)_linux_$$arch; dir=$(BUILD_DIR)/tar/$$name; \
		install -d -m 0755 $$dir $$dir/man $$dir/completion && \
		install -m 0755 $(BUILD_DIR)/$$arch/cronlock $$dir/cronlock && \
		install -m 0644 $(BUILD_DIR)/$$arch/THIRD_PARTY_LICENSES LICENSE README.md $$dir/ && \
		install -m 0644 packaging/cronlock.yaml $$dir/cronlock.yaml && \
		install -m 0644 $(BUILD_DIR)/man/*.gz $$dir/man/ && \
		install -m 0644 $(BUILD_DIR)/completion/cronlock.bash $(BUILD_DIR)/completion/_cronlock $$dir/completion/ && \
		tar --format=gnu --sort=name --mtime=@$(COMMIT_EPOCH) --owner=0 --group=0 --numeric-owner \
			-C $(BUILD_DIR)/tar -cf - $$name | gzip -9n > $(RELEASE_DIR)/$$name.tar.gz || exit 1; \
	done
	@cp $(DIST)/cronlock_$(PKG_VERSION)_*.deb $(RELEASE_DIR)/
	@cd $(RELEASE_DIR) && sha256sum *.tar.gz *.deb > SHA256SUMS && cat SHA256SUMS

# The slow packaging checks on the .debs that `make package` built:
# dpkg-deb contents and metadata, lintian, installing into a scratch root,
# the Dockerfile's build stage; the unit's verify and security score again, with
# -v so that the score is printed.
package-test: package
	@bash scripts/ensure-packaging-tools.sh
	CRONLOCK_DEB_DIR=$(CURDIR)/$(DIST) $(GO) test -count=1 -run 'TestDeb|TestDockerfile|TestUnit_Security|TestUnit_SystemdAnalyze|TestUnit_DropIns|TestThirdPartyLicenses|TestRelease' -v ./packaging/

clean:
	rm -rf bin coverage.out $(DIST)
