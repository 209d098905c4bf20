# cozy-migrate: the Cozystack migration engine.
# `make` builds build/cozy-migrate; `make test` runs every suite; `make asan`
# runs them again under AddressSanitizer + UndefinedBehaviorSanitizer.

CC      ?= gcc
PKGS    := lua5.4 libcurl libcjson yaml-0.1 libcrypto libmicrohttpd
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 \
           -Wno-unused-parameter -pthread -Ihost
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))

# host/ is one folder per layer (docs/internals.md "Layers"); an include names the
# folder ("base/util.h"), found through -Ihost.
SRCS    := $(wildcard host/*/*.c)
HDRS    := $(wildcard host/*/*.h)
OBJS    := $(patsubst host/%.c,build/obj/%.o,$(SRCS))
AOBJS   := $(patsubst host/%.c,build/asan/obj/%.o,$(SRCS))
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all deps test asan bench reliability fuzz valgrind demo clean testenv-build lint manifest install man \
        helm image cluster-test

all: deps build/cozy-migrate

deps:
	@tools/deps

build/obj/%.o: host/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

build/cozy-migrate: $(OBJS)
	$(CC) $(CFLAGS) $(OBJS) $(PKG_LIBS) -lm -o $@

build/asan/obj/%.o: host/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -O1 $(SAN) $(PKG_CFLAGS) -c $< -o $@

build/asan/cozy-migrate: $(AOBJS)
	$(CC) $(CFLAGS) $(SAN) $(AOBJS) $(PKG_LIBS) -lm -o $@

build/obj build/asan/obj:
	mkdir -p $@

# The reliability trials' wall-clock shim (LD_PRELOAD; never part of the
# engine): spec/reliability/skew_spec.lua runs runners with their clock off.
build/skewclock.so: tools/skewclock/skewclock.c | build/obj
	$(CC) -O2 -g -Wall -Wextra -Werror -shared -fPIC $< -ldl -o $@

testenv-build: deps
	@tools/testenv build

test: all build/skewclock.so testenv-build
	@tools/run-tests build/cozy-migrate

asan: deps build/asan/cozy-migrate build/skewclock.so testenv-build
	@ASAN=1 tools/run-tests build/asan/cozy-migrate

# The authoring contract on this repository's own tree (spec/release/
# self_lint_spec.lua runs the same inside `make test`), the one include
# direction of host/'s layers (tools/layers; spec/release/layers_spec.lua),
# and the house rules beside it: comments name files that exist, exports
# carry their module's prefix and are used, no function over 120 lines, no
# C file over 950 (tools/conventions; spec/release/conventions_spec.lua).
lint: all
	tools/layers
	tools/conventions
	build/cozy-migrate lint --dir . --history

# The image's filesystem (Dockerfile), laid out under DESTDIR: the binary in
# $(PREFIX)/share/cozy-migrate/bin (it finds stdlib/, the spec harness in
# spec/support/ and the tree next to itself) with $(PREFIX)/bin/cozy-migrate
# linking to it. The harness is what a platform repository's specs require
# (`cozy-migrate spec`; busted itself is the system's, Debian lua-busted).
# MIGRATIONS_TREE is the checkout whose migrations/ and legacy-sh/ ship (a
# platform repository; this one's samples only when named: MIGRATIONS_TREE=.);
# empty (the default) installs the engine and its harness and no tree, and
# the commands that need one refuse until given --dir (exit 16). Its order.d/
# is generated from its git history (ORDER_FLAGS --check-prefix for a
# release), or taken as prepared when it has none. `manifest` writes to
# ORDER_OUT (default: the tree's migrations/order.d, for a local run; the
# tree defaults to this checkout there); `install` generates straight into
# DESTDIR and leaves the tree as it was.
PREFIX          ?= /usr/local
DESTDIR         ?=
MIGRATIONS_TREE ?=
ORDER_FLAGS     ?=
MANIFEST_TREE    = $(or $(MIGRATIONS_TREE),.)
ORDER_OUT       ?= $(MANIFEST_TREE)/migrations/order.d
SHARE            = $(DESTDIR)$(PREFIX)/share/cozy-migrate
# The chart's copy of the migrations index (`cozy-migrate index`): install
# checks it against the tree it laid out, so the chart, the image and the
# index agree (exit 9 naming each slug that differs). This repository's
# chart holds it in deploy/helm/files; a platform tree names its own, or
# none (empty: nothing to check). INDEX_IMAGE is the image the copy names
# (a digest-pinned index is checked against that reference: the image's
# digest exists only once it is built, so the build cannot know it).
INDEX_FILE      ?= $(if $(filter .,$(MIGRATIONS_TREE)),deploy/helm/files/cozy-migrate-index.json,)
INDEX_IMAGE     ?=
# The spec harness a platform's specs use (docs/writing-migrations.md "The spec harness"); the
# rest of spec/support/ is this repository's own test tooling.
HARNESS          = spec/support/helpers.lua spec/support/cluster.lua spec/support/migration.lua \
                   spec/support/disposable.lua spec/support/output.lua

# A tree's history is the repository's it sits in only when that
# repository's HEAD holds its migrations/ there: a copy made inside a
# checkout (build/...) is no part of the checkout's history.
manifest: build/cozy-migrate
	@if git -C "$(MANIFEST_TREE)" cat-file -e HEAD:./migrations >/dev/null 2>&1; then \
	  build/cozy-migrate order --repo "$(MANIFEST_TREE)" --out "$(ORDER_OUT)" $(ORDER_FLAGS); \
	elif [ -d "$(MANIFEST_TREE)/migrations/order.d" ]; then \
	  echo "manifest: $(MANIFEST_TREE) has no git history of its own; using its prepared migrations/order.d"; \
	  if [ "$(ORDER_OUT)" != "$(MANIFEST_TREE)/migrations/order.d" ]; then \
	    rm -rf "$(ORDER_OUT)" && cp -R "$(MANIFEST_TREE)/migrations/order.d" "$(ORDER_OUT)"; \
	  fi; \
	else \
	  echo "manifest: $(MANIFEST_TREE) has neither git history of its own nor migrations/order.d (docs/shipping.md)" >&2; \
	  exit 1; \
	fi

# A man page per command (man(7) source), made by the binary from its
# command table and each command's --help (host/cli/man.c): build/man.
man: build/cozy-migrate
	@rm -rf build/man && mkdir -p build/man
	build/cozy-migrate man --out build/man

install: build/cozy-migrate man
	install -d "$(SHARE)/bin" "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(PREFIX)/share/man/man1"
	install -m 0644 build/man/*.1 "$(DESTDIR)$(PREFIX)/share/man/man1/"
	install -m 0755 build/cozy-migrate "$(SHARE)/bin/cozy-migrate"
	ln -sfn ../share/cozy-migrate/bin/cozy-migrate "$(DESTDIR)$(PREFIX)/bin/cozy-migrate"
	rm -rf "$(SHARE)/stdlib" "$(SHARE)/spec" "$(SHARE)/migrations" "$(SHARE)/legacy-sh"
	cp -R stdlib "$(SHARE)/stdlib"
	install -d "$(SHARE)/spec/support"
	install -m 0644 $(HARNESS) "$(SHARE)/spec/support/"
	@if [ -z "$(MIGRATIONS_TREE)" ]; then \
	  echo "install: no MIGRATIONS_TREE: the engine and its harness, no migrations (commands that need a tree take --dir)"; \
	  if [ -n "$(INDEX_FILE)" ]; then echo "install: INDEX_FILE=$(INDEX_FILE) needs MIGRATIONS_TREE (the tree it indexes)" >&2; exit 2; fi; \
	else \
	  cp -R "$(MIGRATIONS_TREE)/migrations" "$(SHARE)/migrations" && \
	  cp -R "$(MIGRATIONS_TREE)/legacy-sh" "$(SHARE)/legacy-sh" && \
	  $(MAKE) --no-print-directory manifest ORDER_OUT="$(SHARE)/migrations/order.d" && \
	  if [ -n "$(INDEX_FILE)" ]; then \
	    "$(SHARE)/bin/cozy-migrate" index --dir "$(SHARE)" --check "$(INDEX_FILE)" \
	      $(if $(INDEX_IMAGE),--image "$(INDEX_IMAGE)"); \
	  fi; \
	fi
	chmod -R a+rX "$(SHARE)"

# helm from its Go module (tools/helm), the chart's test tool; make test
# builds it too (testenv-build).
helm: deps
	@tools/testenv build helm

# The hook's image from the Dockerfile, with buildah on local base images made
# with debootstrap (tools/image); loaded into the cluster's containerd when
# `tools/testenv cluster up` is running. IMAGE_TAG names it; MIGRATIONS_TREE
# is the tree it ships (none: the engine alone, the base a platform
# extends); IMAGE_FLAGS more of tools/image's (--packages, --files,
# --mirror, --push, --digestfile: docs/shipping.md "Building the image").
IMAGE_TAG   ?= localhost/cozy-migrate:dev
IMAGE_FLAGS ?=
image: all
	@TESTENV_CLUSTER=1 tools/deps
	@load=""; if tools/testenv cluster status >/dev/null 2>&1; then load=--load; fi; \
	  tools/image build --tag "$(IMAGE_TAG)" $(if $(MIGRATIONS_TREE),--tree "$(MIGRATIONS_TREE)") \
	    $(IMAGE_FLAGS) $$load

# The upgrade lane on a real single-node cluster (tools/cluster-test; the
# docs/testing.md's "The upgrade lane" has what it does and costs).
cluster-test: all
	@tools/cluster-test

bench: all testenv-build
	@tools/bench/run

# The reliability trials at full counts (crash, concurrency, faults, an
# apiserver restart, a stopped runner, stop signals as PID 1, clock skew, a
# deleted Lease or ledger, a full ledger, colliding holders), printed as a
# table; `make test` runs their short form.
reliability: all build/skewclock.so testenv-build
	@tools/reliability/run build/cozy-migrate

fuzz: deps
	@tools/fuzz/run

# The end-to-end smoke under valgrind memcheck (tools/valgrind/run).
valgrind: all testenv-build
	@tools/valgrind/run build/cozy-migrate

demo: all testenv-build
	@tools/demo

clean:
	rm -rf build
