# drover server image: a static binary on distroless, running as non-root.
#   docker build -t drover:dev --build-arg VERSION=0.3.0 .
#   docker run -p 4646:4646 -p 4650:4650 drover:dev server -dev -http-addr 0.0.0.0:4646 -rpc-addr 0.0.0.0:4650
# docker-compose.yml starts a 3-server cluster with simulated agents.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first: a change to the code alone reuses this layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The commit and its date come in as build args (.git is not in the
# context, see .dockerignore): make image passes them.
ARG VERSION=
ARG GIT_COMMIT=
ARG BUILD_DATE=
RUN make build VERSION="${VERSION}" GIT_COMMIT="${GIT_COMMIT}" BUILD_DATE="${BUILD_DATE}"

# distroless/static: no shell, no package manager, CA certificates and a
# nonroot user (65532); nothing but the binary runs.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/drover /usr/local/bin/drover
USER nonroot:nonroot
# The data dir; mount a volume here.
WORKDIR /var/lib/drover
VOLUME ["/var/lib/drover"]
# 4646 HTTP API, UI and metrics; 4650 gRPC; 4651 raft.
EXPOSE 4646 4650 4651
ENV DROVER_DATA_DIR=/var/lib/drover \
    DROVER_RPC_ADDR=0.0.0.0:4650 \
    DROVER_RAFT_ADDR=0.0.0.0:4651 \
    DROVER_HTTP_ADDR=0.0.0.0:4646 \
    DROVER_LOG_FORMAT=json
ENTRYPOINT ["/usr/local/bin/drover"]
CMD ["server"]
