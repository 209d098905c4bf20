# shellcheck shell=bash disable=SC2154
# tools/bench/fleet.sh (sourced by tools/bench/run): the fleet sweep with its
# writes in flight together. 2,000 and 20,000 ConfigMaps, each needing one
# label, done four ways, each with a label of its own:
#   - fleet.each through `cozy-migrate run`, concurrency 8 (the default);
#   - the same migration, concurrency 1 (one object at a time);
#   - the raw sequential limit: the libcurl loop paging the same list, then
#     sending the same merge patches one at a time on one connection;
#   - the raw concurrent limit: the same, 8 patches in flight (libcurl's
#     multi interface: HTTP/2 streams on one connection, as the engine).
# Peak RSS of each run (GNU time, the migration's child included). Targets:
# the concurrent sweep >= 3x faster than the raw sequential loop, within
# 1.2x of the raw concurrent loop, its RSS flat within 10% between sizes.
# BENCH_FLEET_SIZES ("2000 20000"), BENCH_FLEET_CONCURRENCY (8).
fleet_sizes=${BENCH_FLEET_SIZES:-2000 20000}
fleet_c=${BENCH_FLEET_CONCURRENCY:-8}
fleet_rows=()

# fleet_tree KEY CONC NS: a tree whose one migration labels every object of
# NS with bench.cozystack.io/KEY=done through fleet.each at CONC
fleet_tree() { sweep_tree "fleet-$1" "$1" "$3" bench=fleet ", concurrency = $2"; }

# fleet_run KEY CONC NS SIZE: runs it; prints "<seconds> <peak RSS kB>"
fleet_run() {
	local t ln t0 kb
	t=$(fleet_tree "$1" "$2" "$3")
	ln=bench-fleet-run-$1-$4-$$
	new_ns "$ln"
	empty_ledger "$ln"
	t0=$(now)
	kb=$(peak_rss "$work/fleet-$1.out" "$bin" run --timeout 1h --dir "$t" --namespace "$ln" 2>"$work/fleet-$1.err") ||
		{ cat "$work/fleet-$1.out" "$work/fleet-$1.err" >&2; say "fleet: the $1 run failed"; exit 1; }
	echo "$(elapsed "$t0") $kb"
}

# fleet_done NS KEY: how many objects of NS carry KEY=done
fleet_done() {
	curlloop list "$server/api/v1/namespaces/$1/configmaps?labelSelector=bench.cozystack.io%2F$2%3Ddone" 500 | awk '{ print $2 }'
}

for n in $fleet_sizes; do
	fns=bench-fleet-$n-$$
	say "fleet: creating $n ConfigMaps"
	bench_configmaps "$fns" "$n" fleet
	for k in rawseq rawconc; do
		awk -v n="$n" -v s="$server" -v ns="$fns" -v k="$k" 'BEGIN {
			for (i = 1; i <= n; i++)
				printf "PATCH\t%s/api/v1/namespaces/%s/configmaps/cm-%06d\t{\"metadata\":{\"labels\":{\"bench.cozystack.io/%s\":\"done\"}}}\n", s, ns, i, k
		}' >"$work/fleet-$k"
	done
	say "fleet: $n objects: fleet.each with concurrency $fleet_c, then 1, through run"
	read -r conc_s conc_kb < <(fleet_run conc "$fleet_c" "$fns" "$n")
	read -r seq_s seq_kb < <(fleet_run seq 1 "$fns" "$n")
	say "fleet: $n objects: the raw loops, sequential and $fleet_c in flight"
	read -r l1 _ < <(curlloop list "$server/api/v1/namespaces/$fns/configmaps?labelSelector=bench%3Dfleet" 500)
	read -r p1 _ < <(curlloop send "$work/fleet-rawseq" -)
	read -r l2 _ < <(curlloop list "$server/api/v1/namespaces/$fns/configmaps?labelSelector=bench%3Dfleet" 500)
	read -r p2 _ < <(CURLLOOP_CONCURRENCY=$fleet_c curlloop send "$work/fleet-rawconc" -)
	rawseq_s=$(awk -v a="$l1" -v b="$p1" 'BEGIN { printf "%.3f", a + b }')
	rawconc_s=$(awk -v a="$l2" -v b="$p2" 'BEGIN { printf "%.3f", a + b }')
	done_all=yes
	for k in conc seq rawseq rawconc; do
		d=$(fleet_done "$fns" "$k")
		[[ $d == "$n" ]] || { done_all=no; say "fleet: note: $k labelled $d of $n"; }
	done
	fleet_rows+=("$n $conc_s $conc_kb $seq_s $seq_kb $rawseq_s $rawconc_s $done_all")
	drop_collection "$fns"
done

echo
echo "(f) fleet sweep with concurrent writes: one label per ConfigMap (wall clock; peak RSS of the run, MB)"
printf '%s\n' "${fleet_rows[@]}" | awk -v c="$fleet_c" '
	{
		printf "%-8s %-44s %9s %9s %12s %12s\n", "objects", "method", "total s", "RSS MB", "vs raw seq", "vs raw conc"
		printf "%-8d %-44s %9.3f %9.1f %11.2fx %11.2fx\n", $1, "fleet.each, concurrency " c ", run", $2, $3 / 1024, $6 / $2, $2 / $7
		printf "%-8d %-44s %9.3f %9.1f %11.2fx %11.2fx\n", $1, "fleet.each, concurrency 1, run", $4, $5 / 1024, $6 / $4, $4 / $7
		printf "%-8d %-44s %9.3f %9s %11.2fx %11.2fx\n", $1, "raw libcurl loop, sequential", $6, "-", 1, $6 / $7
		printf "%-8d %-44s %9.3f %9s %11.2fx %11.2fx\n", $1, "raw libcurl loop, " c " in flight", $7, "-", $6 / $7, 1
		if ($8 != "yes") print "(not every way labelled every object: these rows do not compare)"
	}'
for row in "${fleet_rows[@]}"; do
	read -r n conc_s _ seq_s _ rawseq_s rawconc_s ok <<<"$row"
	read -r vs_seq vs_conc < <(awk -v c="$conc_s" -v s="$rawseq_s" -v r="$rawconc_s" 'BEGIN { printf "%.2f %.2f\n", s / c, c / r }')
	limit=$(awk -v s="$rawseq_s" -v r="$rawconc_s" 'BEGIN { printf "%.2f", s / r }')
	target "(f) fleet $n: concurrent >= 3x faster than raw sequential" \
		"$(awk -v r="$vs_seq" -v ok="$ok" 'BEGIN { print (r >= 3 && ok == "yes" ? "met" : "MISSED") }')" "${vs_seq}x" \
		"the raw loop with the same requests in flight is itself only ${limit}x the sequential one: the apiserver, not the round trips, is the limit here"
	target "(f) fleet $n: concurrent within 1.2x of raw concurrent" \
		"$(awk -v r="$vs_conc" -v ok="$ok" 'BEGIN { print (r <= 1.2 && ok == "yes" ? "met" : "MISSED") }')" "${vs_conc}x"
done
read -r fgrowth < <(printf '%s\n' "${fleet_rows[@]}" | awk '
	{ v = $3; if (NR == 1 || v < lo) lo = v; if (NR == 1 || v > hi) hi = v }
	END { printf "%.1f\n", (hi - lo) / lo * 100 }')
target "(f) fleet: concurrent sweep RSS flat within 10% between sizes" \
	"$(awk -v g="$fgrowth" 'BEGIN { print (g <= 10 ? "met" : "MISSED") }')" "${fgrowth}% apart"
