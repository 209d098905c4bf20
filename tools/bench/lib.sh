# shellcheck shell=bash disable=SC2154,SC2034
# tools/bench/lib.sh: what the benchmark sections share (sourced by
# tools/bench/run, never run alone): the local apiserver, its admin
# credentials as files for the raw loops, the raw loops themselves
# (curlloop.c, reqtime.c), timing helpers and migration trees on disk.
#
# Set by bench_setup: root, bin, work, kubectl (array), server, ca/crt/key,
# CURLLOOP, REQTIME (the preload library).

say() { printf 'bench: %s\n' "$*" >&2; }
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# peak_rss OUT CMD...: runs CMD (stdout to OUT), prints its peak RSS in kB
peak_rss() {
	local out=$1
	shift
	/usr/bin/time -v -o "$work/time" "$@" >"$out"
	awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time"
}

# A line for the closing summary: target NAME met|MISSED DETAIL
TARGETS=()
# target NAME VERDICT FIGURE [WHY]: one line of the targets list; WHY (what
# the same run measured that explains it) is printed only when MISSED.
target() {
	local why=""
	[[ $2 == MISSED && -n ${4:-} ]] && why="  ($4)"
	TARGETS+=("$(printf '%-58s %-7s %s%s' "$1" "$2" "$3" "$why")")
}

bench_setup() {
	bin=$(realpath "${COZY_MIGRATE:-build/cozy-migrate}")
	[[ -x $bin ]] || { say "$bin is not built (make build/cozy-migrate)"; exit 1; }
	[[ -x /usr/bin/time ]] || { say "/usr/bin/time is missing (tools/deps installs it)"; exit 1; }
	work=$(mktemp -d)
	started=""
	trap bench_cleanup EXIT
	if ! tools/testenv status >/dev/null 2>&1; then
		say "starting a local apiserver in $TESTENV_DIR"
		tools/testenv up >/dev/null
		started=1
	fi
	eval "export $(tools/testenv env)"
	kubectl=("$root/build/testenv/bin/kubectl" --kubeconfig "$KUBECONFIG" --context testenv)
	# kubectl for the shell migrations: the built one, first on PATH
	export PATH="$root/build/testenv/bin:$PATH"

	view() { "${kubectl[@]}" config view --raw --minify -o "jsonpath=$1"; }
	ca=$work/ca.crt crt=$work/admin.crt key=$work/admin.key
	view '{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$ca"
	view '{.users[0].user.client-certificate-data}' | base64 -d >"$crt"
	(umask 077 && view '{.users[0].user.client-key-data}' | base64 -d >"$key")
	server=$(view '{.clusters[0].cluster.server}')
	CURLLOOP=$work/curlloop
	REQTIME=$work/reqtime.so
	local curlflags
	read -r -a curlflags <<<"$(pkg-config --cflags --libs libcurl)"
	gcc -O2 -Wall -Wextra -Werror -o "$CURLLOOP" tools/bench/curlloop.c "${curlflags[@]}"
	gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$REQTIME" tools/bench/reqtime.c -ldl "${curlflags[@]}"
	BENCH_NAMESPACES=()
	bench_baseline
}

# BENCH_BASELINE names the engine the (d) and (q) rows compare against: a
# built binary, or a git revision of this repository (a tag, a branch, a
# commit), which is built here from that revision's files alone (git
# archive) into build/bench/baseline-<commit>/ and kept there for the next
# run, so a figure against "the engine before X" can be reproduced by anyone
# with the repository.
bench_baseline() {
	local rev=${BENCH_BASELINE:-} commit dir
	[[ -z $rev || -x $rev ]] && return 0
	commit=$(git -C "$root" rev-parse --verify --quiet "$rev^{commit}") ||
		{ say "BENCH_BASELINE=$rev is neither an executable file nor a revision of this repository"; exit 2; }
	dir=$root/build/bench/baseline-$commit
	if [[ ! -x $dir/build/cozy-migrate ]]; then
		say "building the baseline engine from $rev ($commit) in $dir"
		rm -rf "$dir" && mkdir -p "$dir"
		git -C "$root" archive "$commit" | tar -x -C "$dir"
		make -s -C "$dir" build/cozy-migrate >"$work/baseline-build.log" 2>&1 ||
			{ say "the baseline $rev did not build (log: $work/baseline-build.log)"; tail -5 "$work/baseline-build.log" >&2; exit 2; }
	fi
	BENCH_BASELINE=$dir/build/cozy-migrate
	say "baseline engine: $rev ($commit), $BENCH_BASELINE"
}

bench_cleanup() {
	if [[ -z ${started:-} && ${#BENCH_NAMESPACES[@]} -gt 0 ]]; then
		# a testenv we did not start: leave it as we found it (one DELETE of
		# each namespace's ConfigMaps first: kubectl goes one by one)
		local ns
		for ns in "${BENCH_NAMESPACES[@]}"; do
			"${kubectl[@]}" delete --raw "/api/v1/namespaces/$ns/configmaps" >/dev/null 2>&1 || true
		done
		"${kubectl[@]}" delete namespace "${BENCH_NAMESPACES[@]}" --wait=false >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
	if [[ -n ${started:-} ]]; then tools/testenv down >/dev/null 2>&1 || true; fi
}

# new_ns NAME: creates the namespace, remembered for the cleanup
new_ns() {
	"${kubectl[@]}" create namespace "$1" >/dev/null
	BENCH_NAMESPACES+=("$1")
}

# curlloop MODE ARG1 ARG2: the raw loop with the admin identity
curlloop() { "$CURLLOOP" "$1" "$2" "$3" "$ca" "$crt" "$key"; }

# bench_configmaps NS N VALUE: the namespace NS (new) with N ConfigMaps
# cm-000001... labelled bench=VALUE, created by the raw loop
bench_configmaps() {
	new_ns "$1"
	awk -v n="$2" -v s="$server" -v ns="$1" -v v="$3" 'BEGIN {
		for (i = 1; i <= n; i++)
			printf "POST\t%s/api/v1/namespaces/%s/configmaps\t{\"metadata\":{\"name\":\"cm-%06d\",\"labels\":{\"bench\":\"%s\"}},\"data\":{\"index\":\"%d\"}}\n", s, ns, i, v, i
	}' >"$work/$3-create"
	CURLLOOP_CONCURRENCY=16 curlloop send "$work/$3-create" - >/dev/null
}

# drop_collection NS: deletes every ConfigMap of NS in one request
drop_collection() { "${kubectl[@]}" delete --raw "/api/v1/namespaces/$1/configmaps" >/dev/null; }

# An empty ledger in NS (so `run` is an upgrade, not a fresh install).
empty_ledger() { "${kubectl[@]}" create configmap cozystack-version -n "$1" >/dev/null; }

# new_tree: an empty migration tree; prints its directory
new_tree() {
	local d
	d=$(mktemp -d "$work/tree.XXXXXX")
	mkdir -p "$d/migrations/pre-apply" "$d/migrations/order.d" "$d/legacy-sh/lib"
	: >"$d/migrations/revoked"
	echo "$d"
}

# add_lua TREE SLUG BODY: a pre-apply Lua migration, listed in batch 00001
add_lua() {
	printf -- '-- cozystack-migration: on-error=abort\n%s\n' "$3" >"$1/migrations/pre-apply/$2.lua"
	echo "$2" >>"$1/migrations/order.d/00001-v1.0.0"
}

# sweep_tree SLUG KEY NS SELECTOR OPTS: a tree whose one migration SLUG
# labels every object of NS matching SELECTOR with bench.cozystack.io/KEY=done
# through fleet.each with OPTS (Lua table fields after the selector);
# prints its directory
sweep_tree() {
	local t
	t=$(new_tree)
	add_lua "$t" "$1" "local kube = require('kube')
local fleet = require('fleet')
fleet.each('configmaps', { namespace = '$3', label_selector = '$4'$5 }, function(cm)
  if (cm.metadata.labels or {})['bench.cozystack.io/$2'] == 'done' then return false end
  kube.patch('configmaps', cm.metadata.name,
    { metadata = { labels = { ['bench.cozystack.io/$2'] = 'done' } } }, { namespace = cm.metadata.namespace })
  return true
end)"
	echo "$t"
}

# add_sh TREE SLUG BODY: a legacy shell migration: numbered in legacy-map and
# listed in 00000-legacy in that order, as the runner requires
add_sh() {
	printf '# cozystack-migration: on-error=abort\n%s\n' "$3" >"$1/legacy-sh/$2.sh"
	echo "$2" >>"$1/migrations/order.d/00000-legacy"
	echo "$(($(grep -c . "$1/legacy-sh/legacy-map" 2>/dev/null || true) + 1)) $2" >>"$1/legacy-sh/legacy-map"
}
