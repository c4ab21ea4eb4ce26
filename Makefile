# cronlock — see README.md. `make test` needs redis-server (installed by
# scripts/ensure-redis.sh on Debian/Ubuntu when missing).

GO      ?= go
BIN     := bin/cronlock
PKG     := ./cmd/cronlock
VERSION := $(shell git describe --tags --exact-match 2>/dev/null)
COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Packaging (packaging/, docs/man/). The Debian version is the tag without
# its "v", else 0.0.0~git<commit time, UTC>.<commit>: "~" sorts before any
# release, and the time keeps snapshot builds in commit order for dpkg.
COMMIT_TIME := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null)
PKG_VERSION := $(if $(VERSION),$(patsubst v%,%,$(VERSION)),0.0.0~git$(COMMIT_TIME).$(COMMIT))
PKG_LDFLAGS := -s -w -X main.version=$(PKG_VERSION) -X main.commit=$(COMMIT)
ARCHES      := amd64 arm64
DIST        := dist
BUILD_DIR   := $(DIST)/build
# The packaging tools are pinned in tools/go.mod (a module of their own, so
# that they do not change the daemon's dependencies); go tool -n builds
# them from the module cache and prints the binary's path.
NFPM         = $(shell $(GO) -C tools tool -n nfpm)
MD2MAN       = $(shell $(GO) -C tools tool -n go-md2man)

.PHONY: build install test test-topologies test-cover run bench bench-go lint fmt ensure-redis clean man completion package package-test

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

install:
	$(GO) install -trimpath -ldflags '$(LDFLAGS)' $(PKG)

ensure-redis:
	@bash scripts/ensure-redis.sh

# 4 tests of a package at once, and the fork-heavy e2e tests one at a time
# (e2e/heavy_test.go): on a slow day of a 2-core VM more at once left slots
# unrun for lack of CPU. The e2e package then takes 230–255 s of the 5
# minutes make test may take; the timeout bounds a hung test.
test: ensure-redis
	$(GO) test -race -count=1 -parallel 4 -timeout 295s ./...

# The failover tests (Sentinel and Cluster masters killed under running
# daemons, and the fixtures' own failover checks): too heavy for `make
# test`'s budget, so they skip there unless TEST_TOPOLOGIES=1. About 20 s;
# the timeout leaves room for the Sentinel test to follow up to three
# failovers on a loaded machine (about 115 s) and report, not panic.
test-topologies: ensure-redis
	TEST_TOPOLOGIES=1 $(GO) test -race -count=1 -timeout 240s -run 'Failover|Topologies' ./internal/redistest ./redislock ./e2e

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

# dist/cronlock_<version>_<arch>.deb for each of $(ARCHES): static binaries
# (CGO_ENABLED=0), man pages, completions and a changelog, packed by nfpm
# from packaging/nfpm.yaml.
package: man completion
	@case '$(PKG_VERSION)' in *~git.* | '') \
		echo "make package: no git tag or commit to take the version from; run it in a git checkout or set PKG_VERSION=1.2.3" >&2; exit 2;; esac
	@rm -f $(DIST)/cronlock_*.deb
	@for arch in $(ARCHES); do \
		echo "build linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(PKG_LDFLAGS)' \
			-o $(BUILD_DIR)/$$arch/cronlock $(PKG) || exit 1; \
	done
	@printf 'cronlock (%s) unstable; urgency=medium\n\n  * Snapshot of commit %s; the repository history lists the changes.\n\n -- cronlock maintainers <maintainers@users.noreply.github.com>  %s\n' \
		'$(PKG_VERSION)' '$(COMMIT)' "$$(git log -1 --format=%aD 2>/dev/null || date -R)" | gzip -9n > $(BUILD_DIR)/changelog.gz
	@for arch in $(ARCHES); do \
		ARCH=$$arch VERSION='$(PKG_VERSION)' BUILD=$(BUILD_DIR) \
			$(NFPM) package --packager deb --config packaging/nfpm.yaml \
			--target $(DIST)/cronlock_$(PKG_VERSION)_$$arch.deb || exit 1; \
	done

# The slow packaging checks on the .debs that `make package` built:
# dpkg-deb contents and metadata, lintian, installing into a scratch root,
# the Dockerfile's build stage; the unit's verify and security score again, with
# -v so that the score is printed.
package-test: package
	@bash scripts/ensure-packaging-tools.sh
	CRONLOCK_DEB_DIR=$(CURDIR)/$(DIST) $(GO) test -count=1 -run 'TestDeb|TestDockerfile|TestUnit_Security|TestUnit_SystemdAnalyze' -v ./packaging/

clean:
	rm -rf bin coverage.out $(DIST)
