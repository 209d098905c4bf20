# The image the Helm hook Job runs: `cozy-migrate run` as a non-root user,
# with the stdlib, the migrations tree and its generated manifest
# (migrations/order.d/), the legacy shell migrations and what they call.
#
# The manifest is generated here from git: the build context must hold the
# repository's .git with every release tag (a full, not shallow, clone;
# e.g. actions/checkout with fetch-depth: 0). For a release build pass
# --build-arg ORDER_FLAGS=--check-prefix. A context without .git is
# accepted only with a prepared migrations/order.d/ (cozy-migrate order run
# beforehand on a full clone). The README ("Shipping migrations") has the whole workflow.

FROM golang:1.24-bookworm AS kubectl
WORKDIR /src
COPY tools/cluster/go.mod tools/cluster/go.sum ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/kubectl k8s.io/kubernetes/cmd/kubectl

FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      gcc make pkg-config git ca-certificates \
      liblua5.4-dev libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
ARG ORDER_FLAGS=
WORKDIR /src
COPY . /src
# The same targets as a developer's: build, generate order.d/ from the tags,
# lay out the image's filesystem under /out.
RUN make build/cozy-migrate \
    && make install DESTDIR=/out PREFIX=/usr ORDER_FLAGS="$ORDER_FLAGS"

FROM debian:12-slim
# bash runs the shell migrations; /bin/sh becomes bash because Debian's dash
# has no `set -o pipefail`; jq, coreutils (base64, timeout), sed and awk are
# what the legacy scripts call.
RUN apt-get update && apt-get install -y --no-install-recommends \
      liblua5.4-0 libcurl4 libcjson1 libyaml-0-2 libssl3 ca-certificates \
      bash jq coreutils sed mawk \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sf bash /bin/sh \
    && sh -c 'set -o pipefail'
COPY --from=kubectl /out/kubectl /usr/local/bin/kubectl
COPY --from=build /out/usr/ /usr/
USER 65534:65534
ENV HOME=/tmp
ENTRYPOINT ["/usr/bin/cozy-migrate", "run"]
