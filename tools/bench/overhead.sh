# shellcheck shell=bash disable=SC2154
# tools/bench/overhead.sh (sourced by tools/bench/run): the cost of one
# migration to the runner. 500 empty Lua migrations in one `cozy-migrate
# run` (an empty ledger, so every one runs and is recorded), timed from
# outside (wall clock) and from inside with tools/bench/reqtime.c preloaded:
# the child (fork, fresh sandbox, exit, reap), the ledger record write (one
# strategic merge PATCH each), the Event (sent without waiting for its
# answer: only what the runner spends putting it on the wire counts), the
# lease, and the rest (start-up, tree, plan, output). Then the same 500
# record writes replayed by the raw loop on a scratch ConfigMap growing the
# same way: as the engine sends them (strategic merge patch, metadata
# answered), and as JSON merge patches (the engine before), with the
# metadata or the whole object answered. With BENCH_BASELINE=BINARY|REVISION (an
# engine to compare, or a git revision built for it: tools/bench/lib.sh), the
# same 500 migrations run by it too, side by side. Targets: <= 5 ms a
# migration; at most 1.2x the raw cost of the request a migration must wait
# for (its record write, replayed raw); at least 1.8x faster than the
# baseline; and (issue 31) a migration, as measured inside the run (its
# share of the run's time from start to exit), at most 1.2x what it cannot
# do without: its record write and its child, measured in the same run.
# BENCH_EMPTY (500), BENCH_BASELINE (unset: not compared).
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
base_s=""
if [[ -n ${BENCH_BASELINE:-} ]]; then
	bns=bench-overhead-base-$$
	new_ns "$bns"
	empty_ledger "$bns"
	say "overhead: the same $empty migrations run by the baseline $BENCH_BASELINE"
	t0=$(now)
	"$BENCH_BASELINE" run --dir "$ov_tree" --namespace "$bns" >"$work/overhead-base.out" 2>&1 ||
		{ tail -20 "$work/overhead-base.out" >&2; say "overhead: the baseline run failed"; exit 1; }
	base_s=$(elapsed "$t0")
	drop_collection "$bns"
fi

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
awk -v n="$empty" -v wall="$ov_s" -v rm="$raw_meta" -v rf="$raw_full" -v rs="$raw_smp" -v base="$base_s" '
	{ c[$1] = $2; s[$1] = $3 }
	END {
		rest = s["total"] - s["child"] - s["record"] - s["event"] - s["lease"] - s["ledger-read"] - s["other"]
		printf "%-58s %7s %9s %12s\n", "part (measured inside the run)", "count", "total s", "ms/migration"
		printf "%-58s %7d %9.3f %12.2f\n", "child: fork, fresh sandbox, script, exit, reap", c["child"], s["child"], s["child"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "ledger record write (strategic merge PATCH, metadata answer)", c["record"], s["record"], s["record"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "Event (POST, blocking: only when its pool cannot take it)", c["event"], s["event"], s["event"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "lease: acquire, renewals, release", c["lease"], s["lease"], s["lease"] / n * 1000
		printf "%-58s %7d %9.3f %12.2f\n", "ledger read, discovery", c["ledger-read"] + c["other"], s["ledger-read"] + s["other"], (s["ledger-read"] + s["other"]) / n * 1000
		printf "%-58s %7s %9.3f %12.2f\n", "the rest: start-up, tree, plan, records, output", "", rest, rest / n * 1000
		printf "%-58s %7s %9.3f %12.2f\n", "total, wall clock from outside", "", wall, wall / n * 1000
		printf "\n%-58s %22s\n", "the same record writes replayed raw (libcurl loop)", "ms per write"
		printf "%-58s %22.2f\n", "merge patch, whole object answered (two changes ago)", rf * 1000
		printf "%-58s %22.2f\n", "merge patch, metadata answered (the engine before)", rm * 1000
		printf "%-58s %22.2f\n", "strategic merge patch, metadata answered (the engine now)", rs * 1000
		if (base != "") printf "\n%-58s %22.2f\n", "the baseline engine, wall clock per migration", base / n * 1000
	}' "$work/reqtime.out"
per=$(awk -v n="$empty" -v w="$ov_s" 'BEGIN { printf "%.2f", w / n * 1000 }')
lease_ms=$(awk -v n="$empty" '$1 == "lease" { printf "%.2f", $3 / n * 1000 }' "$work/reqtime.out")
lease_why="the Lease costs ${lease_ms:-?} ms a migration (watched: no read-back per migration)"
target "(d) <= 5 ms per empty migration" "$(awk -v p="$per" 'BEGIN { print (p <= 5 ? "met" : "MISSED") }')" "$per ms" "$lease_why"
vs_raw=$(awk -v n="$empty" -v w="$ov_s" -v r="$raw_smp" 'BEGIN { printf "%.2f", (w / n) / r }')
target "(d) a migration <= 1.2x its record write replayed raw" \
	"$(awk -v r="$vs_raw" 'BEGIN { print (r <= 1.2 ? "met" : "MISSED") }')" "${vs_raw}x" "$lease_why; then the child: fork, sandbox, reap"
read -r inside_ms parts_ms vs_parts < <(awk -v n="$empty" '
	{ s[$1] = $3 }
	END { in_ms = s["total"] / n * 1000; p = (s["record"] + s["child"]) / n * 1000
	      printf "%.2f %.2f %.2f\n", in_ms, p, (p > 0 ? in_ms / p : 0) }' "$work/reqtime.out")
rest_ms=$(awk -v i="$inside_ms" -v p="$parts_ms" 'BEGIN { printf "%.2f", i - p }')
target "(d) a migration <= 1.2x (its record write + its child), inside the run" \
	"$(awk -v r="$vs_parts" 'BEGIN { print (r <= 1.2 ? "met" : "MISSED") }')" \
	"${inside_ms} ms against ${parts_ms} ms: ${vs_parts}x" \
	"the rest is ${rest_ms} ms a migration, of it the Lease ${lease_ms:-?} ms (its watch answers the confirmations)"
if [[ -n $base_s ]]; then
	vs_base=$(awk -v b="$base_s" -v w="$ov_s" 'BEGIN { printf "%.2f", b / w }')
	target "(d) >= 1.8x faster than the baseline engine" \
		"$(awk -v r="$vs_base" 'BEGIN { print (r >= 1.8 ? "met" : "MISSED") }')" "${vs_base}x" "$lease_why"
else
	target "(d) >= 1.8x faster than the baseline engine" "not run" "set BENCH_BASELINE=BINARY or a git revision"
fi
drop_collection "$ovns"
