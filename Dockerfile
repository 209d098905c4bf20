# The image the Helm hook Job runs: cozy-migrate, the stdlib, the migrations
# tree with its generated manifest (migrations/order.d/ must exist in the
# build context; it is generated from git tags, never committed), the legacy
# shell migrations, and the kubectl they call.

FROM golang:1.24-bookworm AS kubectl
WORKDIR /src
COPY tools/cluster/go.mod tools/cluster/go.sum ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/kubectl k8s.io/kubernetes/cmd/kubectl

FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      gcc make pkg-config liblua5.4-dev libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY host/ host/
RUN make build/cozy-migrate

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      liblua5.4-0 libcurl4 libcjson1 libyaml-0-2 libssl3 ca-certificates bash \
    && rm -rf /var/lib/apt/lists/*
COPY --from=kubectl /out/kubectl /usr/local/bin/kubectl
COPY --from=build /src/build/cozy-migrate /usr/bin/cozy-migrate
COPY stdlib/ /usr/share/cozy-migrate/stdlib/
COPY migrations/ /usr/share/cozy-migrate/migrations/
COPY legacy-sh/ /usr/share/cozy-migrate/legacy-sh/
USER 65534:65534
ENTRYPOINT ["/usr/bin/cozy-migrate", "run"]
