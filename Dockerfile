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
# timetzdata embeds the zone database: jobs' timezone: works without tzdata.
RUN go build -trimpath -tags timetzdata -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/cronlock ./cmd/cronlock && mkdir -p /out/state

FROM alpine:3.22
COPY --from=build /out/cronlock /usr/bin/cronlock
# The state directory (node.state_dir), owned by the unprivileged user: mount
# a volume here to keep it across container restarts.
COPY --from=build --chown=65532:65532 /out/state /var/lib/cronlock
COPY packaging/cronlock.yaml /etc/cronlock/cronlock.yaml
ENV CRONLOCK_NODE_STATE_DIR=/var/lib/cronlock
USER 65532:65532
WORKDIR /var/lib/cronlock
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/cronlock"]
CMD ["-config", "/etc/cronlock/cronlock.yaml"]
