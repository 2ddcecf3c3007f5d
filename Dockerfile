# syntax=docker/dockerfile:1
#
# tribunal: one static binary for every service (`tribunal serve renderer|gater|judge|
# aggregator|all|nats`), the client commands (`submit`, `watch`, `results`) and the
# all-in-one mode (`run`). The renderer, which needs a browser, has its own image:
# Dockerfile.renderer.
#
#   docker build -t tribunal --build-arg VERSION=$(git describe --tags --always --dirty) .
#   docker run --rm tribunal version
#
# Runtime: distroless static (no shell, no package manager, no libc), user 65532
# ("nonroot"). Besides /usr/local/bin/tribunal it carries /usr/local/bin/healthcheck, a
# static probe of the /readyz endpoint (deploy/healthcheck) for docker compose's
# healthcheck, which runs a program inside the container; Kubernetes uses httpGet probes.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/tribunal ./cmd/tribunal && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/healthcheck ./deploy/healthcheck && \
    mkdir -p /out/spill

FROM gcr.io/distroless/static-debian13:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="tribunal" \
      org.opencontainers.image.description="Judging infrastructure for acceptance criteria: renderer, gater, judge and aggregator services over NATS JetStream" \
      org.opencontainers.image.source="https://github.com/tribunal-dev/tribunal" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/tribunal /out/healthcheck /usr/local/bin/
# The aggregator's spill folder (--spill-dir; docker-compose.yml mounts a volume here),
# the nonroot user's: a new named volume takes its owner from the image's folder.
COPY --from=build --chown=65532:65532 /out/spill /var/lib/tribunal/spill
USER 65532:65532
# /healthz and /readyz (`--health`, TRIBUNAL_HEALTH_ADDR).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tribunal"]
CMD ["--help"]
