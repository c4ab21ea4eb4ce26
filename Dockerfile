# syntax=docker/dockerfile:1
# Container image of cronlock: a static binary on Alpine (which gives jobs
# /bin/sh and busybox; add tools with a FROM cronlock stage and apk add).
#
#   docker build -t cronlock --build-arg VERSION=$(make -s version) --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#
# The image runs as it is: it ships the starter config (packaging/cronlock.yaml,
# memory backend, one harmless job) as /etc/cronlock/cronlock.yaml. For your
# jobs, mount your own config there; the Redis password goes in the
# environment, not in the file. Nothing else is needed on the host:
#
#   read -rs CRONLOCK_REDIS_PASSWORD && export CRONLOCK_REDIS_PASSWORD   # type it, or take it from your secret store
#   docker run -d --name cronlock --restart unless-stopped --stop-timeout 60 \
#     -v /srv/cronlock/cronlock.yaml:/etc/cronlock/cronlock.yaml:ro \
#     -v cronlock-state:/var/lib/cronlock \
#     -e CRONLOCK_NODE_ID=$(hostname) -e CRONLOCK_REDIS_PASSWORD \
#     cronlock
#   docker run --rm -v /srv/cronlock/cronlock.yaml:/etc/cronlock/cronlock.yaml:ro cronlock -validate -config /etc/cronlock/cronlock.yaml
#
# `-e NAME` without a value passes the variable from your shell, so the
# password is not in the command line or the shell history. With several
# variables, put them in a file of KEY=value lines that you create (chmod
# 600) and pass --env-file FILE instead. Every scalar setting can be given
# as CRONLOCK_ + its key (man cronlock.yaml), e.g. CRONLOCK_REDIS_ADDRESS.
#
# --stop-timeout 60: docker's default of 10s would SIGKILL the daemon before
# node.shutdown_timeout (30s) + kill_grace (10s) let running jobs finish and
# leases be released. No init (--init, tini) is needed: as PID 1 cronlock
# is a child subreaper that reaps every child it adopts, and it handles
# SIGTERM itself (STOPSIGNAL below).

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version (`make -s version`: the tag or 0.0.0-dev+<commit>); without
# it the binary says 0.0.0-dev (the build context has no .git).
ARG VERSION=""
ARG COMMIT=""
# The same build as `make package` (static: CGO_ENABLED=0 above).
RUN go build -trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/cronlock ./cmd/cronlock && mkdir -p /out/state

FROM alpine:3.22
COPY --from=build /out/cronlock /usr/bin/cronlock
# The zone database for schedules' timezone: (Alpine has no tzdata); Go's
# time package reads it from $ZONEINFO.
COPY --from=build /usr/local/go/lib/time/zoneinfo.zip /usr/share/cronlock/zoneinfo.zip
# The state directory (node.state_dir), owned by the unprivileged user: mount
# a volume here to keep it across container restarts.
COPY --from=build --chown=65532:65532 /out/state /var/lib/cronlock
COPY packaging/cronlock.yaml /etc/cronlock/cronlock.yaml
ENV CRONLOCK_NODE_STATE_DIR=/var/lib/cronlock ZONEINFO=/usr/share/cronlock/zoneinfo.zip
USER 65532:65532
WORKDIR /var/lib/cronlock
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/cronlock"]
CMD ["-config", "/etc/cronlock/cronlock.yaml"]
