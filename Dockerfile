# syntax=docker/dockerfile:1
#
# dtq's container image: one static binary (CGO_ENABLED=0) on a distroless
# base, run as an unprivileged user, with dtq as the entrypoint:
#
#   docker run IMAGE api        # the HTTP API (the default command)
#   docker run IMAGE worker     # a worker with the example handlers
#   docker run IMAGE version
#
# `make image` builds it with the version and revision stamped; see
# docs/upgrading.md for tags and releases.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# The binary is the module at cmd/dtq; its go.mod points at the library and
# the other modules of this tree (replace lines), so their go.mod files come
# first for the download layer.
COPY go.mod go.sum ./
COPY cmd/dtq/go.mod cmd/dtq/go.sum cmd/dtq/
COPY dtqprom/go.mod dtqprom/go.sum dtqprom/
COPY dtqotel/go.mod dtqotel/go.sum dtqotel/
WORKDIR /src/cmd/dtq
RUN go mod download
COPY . /src
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/dtq-io/dtq/internal/buildinfo.version=${VERSION} -X github.com/dtq-io/dtq/internal/buildinfo.revision=${REVISION}" \
	-o /out/dtq .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dtq /usr/local/bin/dtq
# nonroot (65532): no shell, no package manager, nothing to write to.
USER 65532:65532
# A container is reached on its own address, not on loopback: listen on all
# interfaces. Set DTQ_API_KEYS (or DTQ_ALLOWED_HOSTS) so the API answers.
ENV DTQ_API_ADDR=0.0.0.0:8080 \
	DTQ_WORKER_METRICS_ADDR=0.0.0.0:9464 \
	DTQ_LOG_JSON=true
EXPOSE 8080 9464
ENTRYPOINT ["/usr/local/bin/dtq"]
CMD ["api"]
