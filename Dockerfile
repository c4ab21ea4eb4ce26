# syntax=docker/dockerfile:1
# Container image of cronlock: a static binary on Alpine (which gives jobs
# /bin/sh and busybox; add tools with a FROM cronlock stage and apk add).
#
#   docker build -t cronlock --build-arg VERSION=$(git describe --tags --always) .
#   docker run -d --name cronlock --restart unless-stopped --stop-timeout 60 \
#     -v /srv/cronlock/cronlock.yaml:/etc/cronlock/cronlock.yaml:ro \
#     -v cronlock-state:/var/lib/cronlock \
#     -e CRONLOCK_NODE_ID=$(hostname) --env-file /etc/default/cronlock \
#     cronlock
#   docker run --rm -v $PWD/cronlock.yaml:/etc/cronlock/cronlock.yaml:ro cronlock -validate -config /etc/cronlock/cronlock.yaml
#
# --stop-timeout 60: docker's default of 10s would SIGKILL the daemon before
# node.shutdown_timeout (30s) + kill_grace (10s) let running jobs finish and
# leases be released. No init (--init, tini) is needed: as PID 1 cronlock
# is a child subreaper that reaps every child it adopts, and it handles
# SIGTERM itself (STOPSIGNAL below). Secrets go in --env-file
# (CRONLOCK_REDIS_PASSWORD=...), not in the mounted config.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
# The same build as `make package` (static: CGO_ENABLED=0 above).
RUN go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/cronlock ./cmd/cronlock && mkdir -p /out/state

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
