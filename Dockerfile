# The Helm hook Job's image: `cozy-migrate run` as a non-root user, with the
# engine (binary, stdlib, spec harness) and, when MIGRATIONS_TREE names one,
# a migrations tree with its generated manifest (migrations/order.d/), the
# legacy shell migrations and what they call. Without MIGRATIONS_TREE it is
# the engine alone: every command that needs a tree refuses (exit 16) until
# given --dir, and this repository's sample migrations never ship unasked
# (MIGRATIONS_TREE=. names them).
#
# The manifest is generated here from git when the tree's context holds its
# .git with every release tag (a full, not shallow, clone; e.g.
# actions/checkout with fetch-depth: 0; --build-arg ORDER_FLAGS=--check-prefix
# for a release), or taken as prepared (migrations/order.d made beforehand by
# `cozy-migrate order` on a full clone: what tools/image does, which also
# serves a tree in a subdirectory of a monorepo).
#
# A platform extends the image with what its frozen scripts call:
# EXTRA_PACKAGES (Debian packages, from DEBIAN_MIRROR when given) and
# IMAGE_FILES (a directory of the context laid over the image's /: its
# tools in usr/local/bin, its files). The last step records what the image
# holds (/usr/share/cozy-migrate/image-inventory) for `lint
# --image-inventory` (rule runnable). docs/shipping.md "Building the image".
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
# DEBIAN_MIRROR (and DEBIAN_SECURITY_MIRROR, default its debian-security
# sibling): the archive apt uses in this stage and the runtime's, chosen by
# the builder, never inherited from a base image or the build host.
ARG DEBIAN_MIRROR=
ARG DEBIAN_SECURITY_MIRROR=
RUN --mount=type=bind,source=tools/apt-mirror,target=/tmp/apt-mirror \
    sh /tmp/apt-mirror "$DEBIAN_MIRROR" "$DEBIAN_SECURITY_MIRROR" && apt-get update && apt-get install -y --no-install-recommends \
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
ARG MIGRATIONS_TREE=
# The chart's copy of the migrations index, checked against the tree the
# image ships (empty: the Makefile's default, deploy/helm/files/ for this
# repository's own tree, none for a platform's unless it names one), and
# the image it names (a digest-pinned copy names the image it was made
# for; without INDEX_IMAGE that image is one the build cannot know: exit 9).
ARG INDEX_FILE=
ARG INDEX_IMAGE=
ARG IMAGE_FILES=
COPY . /src
# The same targets as a developer's: generate order.d/ from the tags, lay
# out the image's filesystem under /out, and check the chart's index; then
# the platform's files over it.
RUN make install DESTDIR=/out PREFIX=/usr ORDER_FLAGS="$ORDER_FLAGS" MIGRATIONS_TREE="$MIGRATIONS_TREE" \
      ${INDEX_FILE:+INDEX_FILE="$INDEX_FILE"} ${INDEX_IMAGE:+INDEX_IMAGE="$INDEX_IMAGE"} \
    && if [ -n "$IMAGE_FILES" ]; then \
         [ -d "$IMAGE_FILES" ] || { echo "IMAGE_FILES=$IMAGE_FILES is not a directory of the context" >&2; exit 1; }; \
         cp -a "$IMAGE_FILES/." /out/; \
       fi

FROM ${RUNTIME_IMAGE}
ARG DEBIAN_MIRROR=
ARG DEBIAN_SECURITY_MIRROR=
ARG EXTRA_PACKAGES=
# bash runs the shell migrations; /bin/sh becomes bash because Debian's dash
# has no `set -o pipefail`; jq, coreutils (base64, timeout), sed and awk are
# what the legacy scripts call. Nothing else lands in the layer: apt's
# package lists and caches live in cache mounts (80 MB that a base image
# without Docker's apt clean-up would keep), and dpkg leaves out the
# documentation but copyrights, manual pages and translations.
RUN --mount=type=cache,target=/var/cache/apt --mount=type=cache,target=/var/lib/apt/lists \
    --mount=type=bind,source=tools/apt-mirror,target=/tmp/apt-mirror \
    printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
      'path-exclude=/usr/share/lintian/*' >/etc/dpkg/dpkg.cfg.d/01-cozy-minimal \
    && sh /tmp/apt-mirror "$DEBIAN_MIRROR" "$DEBIAN_SECURITY_MIRROR" \
    && apt-get update && apt-get install -y --no-install-recommends \
      liblua5.4-0 libcurl4 libcjson1 libyaml-0-2 libssl3 libmicrohttpd12 ca-certificates \
      bash jq coreutils sed mawk $EXTRA_PACKAGES \
    && rm -rf /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old \
    && ln -sf bash /bin/sh \
    && sh -c 'set -o pipefail'
COPY --from=kubectl /out/kubectl /usr/local/bin/kubectl
COPY --from=build /out/ /
# What the image holds, for `cozy-migrate lint --image-inventory`: the
# commands on its PATH and every path but the kernel's and scratch ones
# (the format is release/lint_runnable.c's).
RUN --mount=type=bind,source=tools/image-inventory,target=/tmp/image-inventory \
    bash /tmp/image-inventory >/usr/share/cozy-migrate/image-inventory
USER 65534:65534
ENV HOME=/tmp
ENTRYPOINT ["/usr/bin/cozy-migrate", "run"]
