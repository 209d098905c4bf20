# cozy-migrate: the Cozystack migration engine.
# `make` builds build/cozy-migrate; `make test` runs every suite; `make asan`
# runs them again under AddressSanitizer + UndefinedBehaviorSanitizer.

CC      ?= gcc
PKGS    := lua5.4 libcurl libcjson yaml-0.1 libcrypto
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wformat=2 \
           -Wno-unused-parameter
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))

SRCS    := $(wildcard host/*.c)
HDRS    := $(wildcard host/*.h)
OBJS    := $(patsubst host/%.c,build/obj/%.o,$(SRCS))
AOBJS   := $(patsubst host/%.c,build/asan/obj/%.o,$(SRCS))
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all deps test asan bench fuzz demo clean testenv-build lint

all: deps build/cozy-migrate

deps:
	@tools/deps

build/obj/%.o: host/%.c $(HDRS) | build/obj
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

build/cozy-migrate: $(OBJS)
	$(CC) $(CFLAGS) $(OBJS) $(PKG_LIBS) -lm -o $@

build/asan/obj/%.o: host/%.c $(HDRS) | build/asan/obj
	$(CC) $(CFLAGS) -O1 $(SAN) $(PKG_CFLAGS) -c $< -o $@

build/asan/cozy-migrate: $(AOBJS)
	$(CC) $(CFLAGS) $(SAN) $(AOBJS) $(PKG_LIBS) -lm -o $@

build/obj build/asan/obj:
	mkdir -p $@

testenv-build: deps
	@tools/testenv build

test: all testenv-build
	@tools/run-tests build/cozy-migrate

asan: deps build/asan/cozy-migrate testenv-build
	@ASAN=1 tools/run-tests build/asan/cozy-migrate

# The authoring contract on this repository's own tree (spec/release/
# self_lint_spec.lua runs the same inside `make test`).
lint: all
	build/cozy-migrate lint --dir . --history

bench: all testenv-build
	@tools/bench/run

fuzz: deps
	@tools/fuzz/run

demo: all testenv-build
	@tools/demo

clean:
	rm -rf build
