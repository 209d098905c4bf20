# The image the Helm hook Job runs: `cozy-migrate run` as a non-root user,
# with the stdlib, the migrations tree and its generated manifest
# (migrations/order.d/), the legacy shell migrations and what they call.
#
# The manifest is generated here from git: the build context must hold the
# repository's .git with every release tag (a full, not shallow, clone;
# e.g. actions/checkout with fetch-depth: 0). For a release build pass
# --build-arg ORDER_FLAGS=--check-prefix. A context without .git is
# accepted only with a prepared migrations/order.d/ (cozy-migrate order run
# beforehand on a full clone). A platform repository that keeps its own
# migrations passes --build-arg MIGRATIONS_TREE=<its checkout, inside the
# context>. The README ("Shipping migrations") has the whole workflow.
#
# The base images are build arguments defaulting to the public ones, so a
# networked CI builds this file as it is; `make image` (tools/image) passes
# local images made with debootstrap from Debian's packages instead.
ARG GOLANG_IMAGE=golang:1.24-bookworm
ARG DEBIAN_IMAGE=debian:12
ARG RUNTIME_IMAGE=debian:12-slim

# kubectl for the legacy shell migrations, from the k8s.io/kubernetes module
# the tests' cluster is built from (tools/cluster), its version stamped as
# tools/testenv stamps it.
FROM ${GOLANG_IMAGE} AS kubectl
WORKDIR /src
COPY tools/cluster/go.mod tools/cluster/go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    ver=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' go.mod) \
    && major=${ver#v} && minor=${major#*.} && major=${major%%.*} && minor=${minor%%.*} \
    && flags="-s -w" \
    && for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do \
         flags="$flags -X $p.gitVersion=$ver -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"; \
       done \
    && CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -ldflags="$flags" -o /out/kubectl k8s.io/kubernetes/cmd/kubectl \
    && /out/kubectl version --client | grep -qx "Client Version: $ver"

FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      gcc make pkg-config git ca-certificates \
      liblua5.4-dev libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev libmicrohttpd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The binary first, from the C sources alone, so a change to the migrations
# (or a platform's tree) rebuilds only the layers below.
COPY Makefile ./
COPY host/ host/
RUN make build/cozy-migrate
ARG ORDER_FLAGS=
ARG MIGRATIONS_TREE=.
# The chart's copy of the migrations index, checked against the tree the
# image ships (empty: the Makefile's default, deploy/helm/files/ for this
# repository's own tree, none for a platform's unless it names one).
ARG INDEX_FILE=
COPY . /src
# The same targets as a developer's: generate order.d/ from the tags, lay
# out the image's filesystem under /out, and check the chart's index.
RUN make install DESTDIR=/out PREFIX=/usr ORDER_FLAGS="$ORDER_FLAGS" MIGRATIONS_TREE="$MIGRATIONS_TREE" \
      ${INDEX_FILE:+INDEX_FILE="$INDEX_FILE"}

FROM ${RUNTIME_IMAGE}
# bash runs the shell migrations; /bin/sh becomes bash because Debian's dash
# has no `set -o pipefail`; jq, coreutils (base64, timeout), sed and awk are
# what the legacy scripts call. Nothing else lands in the layer: apt's
# package lists and caches live in cache mounts (80 MB that a base image
# without Docker's apt clean-up would keep), and dpkg leaves out the
# documentation but copyrights, manual pages and translations.
RUN --mount=type=cache,target=/var/cache/apt --mount=type=cache,target=/var/lib/apt/lists \
    printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
      'path-exclude=/usr/share/lintian/*' >/etc/dpkg/dpkg.cfg.d/01-cozy-minimal \
    && apt-get update && apt-get install -y --no-install-recommends \
      liblua5.4-0 libcurl4 libcjson1 libyaml-0-2 libssl3 libmicrohttpd12 ca-certificates \
      bash jq coreutils sed mawk \
    && rm -rf /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old \
    && ln -sf bash /bin/sh \
    && sh -c 'set -o pipefail'
COPY --from=kubectl /out/kubectl /usr/local/bin/kubectl
COPY --from=build /out/usr/ /usr/
USER 65534:65534
ENV HOME=/tmp
ENTRYPOINT ["/usr/bin/cozy-migrate", "run"]
