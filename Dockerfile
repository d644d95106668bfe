# A small static image for evictd. Build with `make image` where a Docker engine runs.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /evictd ./cmd/evictd

# distroless/static has no shell and no package manager; evictd needs neither.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /evictd /evictd
# evictd reads host cgroup files owned by root and writes cgroup.event_control,
# so the DaemonSet runs it as UID 0 (see deploy/daemonset.yaml); the image default stays nonroot.
USER 65532:65532
ENTRYPOINT ["/evictd"]
