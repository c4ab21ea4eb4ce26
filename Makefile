# cronlock — see README.md. `make test` needs redis-server (installed by
# scripts/ensure-redis.sh on Debian/Ubuntu when missing).

GO      ?= go
BIN     := bin/cronlock
PKG     := ./cmd/cronlock
VERSION := $(shell git describe --tags --exact-match 2>/dev/null)
COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build install test test-cover run bench lint fmt ensure-redis clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

install:
	$(GO) install -trimpath -ldflags '$(LDFLAGS)' $(PKG)

ensure-redis:
	@bash scripts/ensure-redis.sh

test: ensure-redis
	$(GO) test -race -count=1 -parallel 8 -timeout 280s ./...

test-cover: ensure-redis
	$(GO) test -race -count=1 -parallel 8 -timeout 280s -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -n 1

# The state directory (node.state_dir) goes under the checkout, so that
# `make run` works without root.
run: build
	CRONLOCK_NODE_STATE_DIR=$(CURDIR)/.state ./$(BIN) -config testdata/example.yaml

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin coverage.out
