# syntax=docker/dockerfile:1
# Setpoint's image: the server, the agent and setpointctl, statically linked
# on a distroless base, running as a non-root user.
#
#   make image                                # docker build -t setpoint:dev .
#   ./bin/setpointctl certs --dir pki         # the certificates and principals file
#   docker run -p 7443:7443 -p 7444:7444 -v setpoint-data:/var/lib/setpoint -v $PWD/pki:/etc/setpoint:ro setpoint:dev \
#     -listen 0.0.0.0:7443 -metrics-listen 0.0.0.0:7444 -tls-cert /etc/setpoint/server.crt -tls-key /etc/setpoint/server.key \
#     -tls-client-ca /etc/setpoint/ca.crt -auth-config /etc/setpoint/principals.yaml
#
# (docs/security.md says what each file is; in Kubernetes, deploy-local/.)
#
# The agent runs from the same image: --entrypoint /setpoint-agent.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so source edits reuse the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/ \
      ./cmd/setpoint-server ./cmd/setpoint-agent ./cmd/setpointctl

# The store directory must exist and belong to the non-root user (65532);
# distroless has no shell to create it.
FROM build AS datadir
RUN mkdir -p /var/lib/setpoint && chown 65532:65532 /var/lib/setpoint

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/setpoint-server /out/setpoint-agent /out/setpointctl /
COPY --from=datadir --chown=65532:65532 /var/lib/setpoint /var/lib/setpoint
USER 65532:65532
WORKDIR /var/lib/setpoint
VOLUME /var/lib/setpoint
EXPOSE 7443 7444
ENTRYPOINT ["/setpoint-server", "-data-dir", "/var/lib/setpoint"]
