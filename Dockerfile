# syntax=docker/dockerfile:1
# Switchboard's container image. See "In a container" in docs/operations.md:
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t switchboard .
#   docker compose up -d        # compose.yaml: the gateway with its state volume
#
# Build stage: the binary as docs/operations.md builds it (cgo, for SQLite,
# so gcc, which the official Go image has). Runtime stage: distroless
# base-debian12, which carries Debian 12's glibc (the build stage's), CA
# certificates and time zones, a non-root user, and no shell.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
# The module and build caches outlive the image (BuildKit cache mounts): a
# rebuild after a source change compiles only what changed, not SQLite's C
# amalgamation (over a minute on two cores) again.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -tags=goolm -trimpath -ldflags "-X main.version=${VERSION}" -o /out/switchboard .
# The state volume's mount point, owned by the runtime user (distroless
# has no shell to make it there).
RUN mkdir -p /out/state/skills /out/state/workspace

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/switchboard /usr/local/bin/switchboard
COPY deploy/container/config.yaml /etc/switchboard/config.yaml
COPY --from=build --chown=65532:65532 /out/state /var/lib/switchboard
USER 65532:65532
WORKDIR /var/lib/switchboard
# The database, skills and workspace: keep it across upgrades.
VOLUME /var/lib/switchboard
# The HTTP server: /healthz, /readyz, /metrics, the chat API, the dashboard.
EXPOSE 8080
# /healthz asked by the binary itself (no shell or curl in the image).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["switchboard", "--config", "/etc/switchboard/config.yaml", "healthcheck"]
# SIGTERM lets running turns finish for shutdown_timeout (20 s): stop the
# container with a longer grace period (docker stop -t 60; compose.yaml sets it).
STOPSIGNAL SIGTERM
ENTRYPOINT ["switchboard", "--config", "/etc/switchboard/config.yaml"]
CMD ["serve"]
