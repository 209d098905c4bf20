# shellcheck shell=bash disable=SC2154
# tools/bench/overhead.sh (sourced by tools/bench/run): the cost of one
# migration to the runner. 500 empty Lua migrations in one `cozy-migrate
# run` (an empty ledger, so every one runs and is recorded), timed from
# outside (wall clock) and from inside with tools/bench/reqtime.c preloaded:
# the child (fork, fresh sandbox, exit, reap), the ledger record write (one
# merge PATCH each), the Event, the lease, and the rest (start-up, tree,
# plan, output). Then the same 500 record writes replayed by the raw loop on
# a scratch ConfigMap growing the same way, with the answer the engine asks
# for (metadata only), with the whole object back (what it asked for before),
# and as a strategic merge patch (what would change it). Target: <= 5 ms a
# migration. BENCH_EMPTY (500).
empty=${BENCH_EMPTY:-500}
ov_tree=$(new_tree)
for ((i = 1; i <= empty; i++)); do add_lua "$ov_tree" "$(printf 'empty-%04d' "$i")" ""; done
ovns=bench-overhead-$$
new_ns "$ovns"
empty_ledger "$ovns"
say "overhead: $empty empty migrations in one run"
t0=$(now)
REQTIME_OUT=$work/reqtime.out REQTIME_LOG=$work/reqtime.log LD_PRELOAD=$REQTIME \
	"$bin" run --dir "$ov_tree" --namespace "$ovns" >"$work/overhead.out" 2>&1 ||
	{ tail -20 "$work/overhead.out" >&2; say "overhead: the run failed"; exit 1; }
ov_s=$(elapsed "$t0")
recorded=$("${kubectl[@]}" get configmap cozystack-version -n "$ovns" -o json |
	jq '[.data | to_entries[] | select(.key | startswith("m.")) | .value | fromjson | select(.state == "ok")] | length')

# The same record writes, replayed raw on scratch ConfigMaps.
replay() { # replay NAME PATCH-TYPE ACCEPT -> seconds per write
	"${kubectl[@]}" create configmap "$1" -n "$ovns" >/dev/null
	"${kubectl[@]}" get configmap cozystack-version -n "$ovns" -o json |
		jq -r --arg url "$server/api/v1/namespaces/$ovns/configmaps/$1" \
			'.data | to_entries[] | select(.key | startswith("m.")) | "PATCH\t\($url)\t\({data: {(.key): .value}} | tojson)"' \
			>"$work/replay"
	CURLLOOP_PATCH_TYPE=$2 CURLLOOP_ACCEPT=$3 curlloop send "$work/replay" - | awk '{ printf "%.6f\n", $1 / $2 }'
}
meta='application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1'
say "overhead: replaying the $empty record writes raw, three ways"
raw_meta=$(replay replay-merge-meta application/merge-patch+json "$meta")
raw_full=$(replay replay-merge-full application/merge-patch+json application/json)
raw_smp=$(replay replay-smp-meta application/strategic-merge-patch+json "$meta")

echo
echo "(d) per-migration overhead: $empty empty Lua migrations in one cozy-migrate run ($recorded recorded ok)"
awk -v n="$empty" -v wall="$ov_s" -v rm="$raw_meta" -v rf="$raw_full" -v rs="$raw_smp" '
	{ c[$1] = $2; s[$1] = $3 }
	END {
		rest = s["total"] - s["child"] - s["record"] - s["event"] - s["lease"] - s["ledger-read"] - s["other"]
		printf "%-58s %7s %9s %12s\n", "part (measured inside the run)", "count", "total s", "ms/migration"
		printf "%-58s %7d %9.3f %12.2f\n", "child: fork, fresh sandbox, script, exit, reap", c["child"], s["child"], s["child"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "ledger record write (merge PATCH, metadata answer)", c["record"], s["record"], s["record"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "Event (POST)", c["event"], s["event"], s["event"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "lease: acquire, renewals, release", c["lease"], s["lease"], s["lease"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "ledger read, discovery", c["ledger-read"] + c["other"], s["ledger-read"] + s["other"], (s["ledger-read"] + s["other"]) / n * 1000
		printf "%-58s %7s %9.3f %12.2f\n", "the rest: start-up, tree, plan, records, output", "", rest, rest / n * 1000
		printf "%-58s %7s %9.3f %12.2f\n", "total, wall clock from outside", "", wall, wall / n * 1000
		printf "\n%-58s %22s\n", "the same record writes replayed raw (libcurl loop)", "ms per write"
		printf "%-58s %22.2f\n", "merge patch, whole object answered (before)", rf * 1000
		printf "%-58s %22.2f\n", "merge patch, metadata answered (the engine now)", rm * 1000
		printf "%-58s %22.2f\n", "strategic merge patch, metadata answered (a proposal)", rs * 1000
	}' "$work/reqtime.out"
per=$(awk -v n="$empty" -v w="$ov_s" 'BEGIN { printf "%.2f", w / n * 1000 }')
target "(d) <= 5 ms per empty migration" "$(awk -v p="$per" 'BEGIN { print (p <= 5 ? "met" : "MISSED") }')" "$per ms"
drop_collection "$ovns"
