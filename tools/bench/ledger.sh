# shellcheck shell=bash disable=SC2154
# tools/bench/ledger.sh (sourced by tools/bench/run): a ledger of 2,000
# records. One run of 2,000 empty migrations fills it (reqtime.c logs each
# record write, so the write at 100, 500 and 2,000 records are read off the
# real run); then `cozy-migrate run` with nothing pending (a ledger read, the
# plan, the Lease's mark; no lock) against one `kubectl get` of the ledger, 11 times each (the median);
# then one record write replayed raw at 100, 500 and 2,000 records, three
# ways (whole object answered, metadata answered, and as the engine sends
# it: a strategic merge patch, metadata answered): how a write's cost grows
# with the ledger. Target: the idle run at most 1x one kubectl get.
# BENCH_LEDGER (2000), BENCH_REPEAT (11).
lrec=${BENCH_LEDGER:-2000}
repeat=${BENCH_REPEAT:-11}
lg_tree=$(new_tree)
for ((i = 1; i <= lrec; i++)); do add_lua "$lg_tree" "$(printf 'rec-%04d' "$i")" ""; done
lgns=bench-ledger-$$
new_ns "$lgns"
empty_ledger "$lgns"
say "ledger: filling a ledger with $lrec records (one run of $lrec empty migrations)"
t0=$(now)
REQTIME_OUT=$work/ledger-fill.out REQTIME_LOG=$work/ledger-fill.log LD_PRELOAD=$REQTIME \
	"$bin" run --dir "$lg_tree" --namespace "$lgns" >"$work/ledger-fill" 2>&1 ||
	{ tail -20 "$work/ledger-fill" >&2; say "ledger: the run failed"; exit 1; }
fill_s=$(elapsed "$t0")
# k-th record write found k-1 records in the ledger
at_ms() { awk -v a="$1" -v b="$2" '$1 == "record" { k++; if (k >= a && k <= b) printf "%.6f\n", $2 * 1000 }' "$work/ledger-fill.log" | median; }
run_100=$(at_ms 91 110)
run_500=$(at_ms 491 510)
run_top=$(at_ms $((lrec - 19)) "$lrec")
bytes=$("${kubectl[@]}" get configmap cozystack-version -n "$lgns" -o json | wc -c)

say "ledger: run with nothing pending vs kubectl get, $repeat times each"
: >"$work/idle"
: >"$work/kget"
for ((i = 0; i < repeat; i++)); do
	t0=$(now)
	"$bin" run --dir "$lg_tree" --namespace "$lgns" >"$work/idle.out" 2>&1 ||
		{ tail -20 "$work/idle.out" >&2; say "ledger: the idle run failed"; exit 1; }
	elapsed "$t0" >>"$work/idle"
	echo >>"$work/idle"
	t0=$(now)
	"${kubectl[@]}" get configmap cozystack-version -n "$lgns" -o json >/dev/null
	elapsed "$t0" >>"$work/kget"
	echo >>"$work/kget"
done
grep -q 'nothing to run' "$work/idle.out" || say "ledger: note: the idle run did not say 'nothing to run'"
idle_s=$(median <"$work/idle")
kget_s=$(median <"$work/kget")

# One record write, raw, on a scratch ConfigMap holding N records.
"${kubectl[@]}" get configmap cozystack-version -n "$lgns" -o json |
	jq -c '.data | to_entries | map(select(.key | startswith("m.")))' >"$work/records.json"
sample=$(jq -r '.[0].value' "$work/records.json")
raw_write() { # raw_write NAME RECORDS PATCH-TYPE ACCEPT -> median ms of 20 writes
	local url=$server/api/v1/namespaces/$lgns/configmaps/$1
	"${kubectl[@]}" create configmap "$1" -n "$lgns" >/dev/null
	jq -r --arg url "$url" --argjson n "$2" \
		'"PATCH\t\($url)\t\({data: (.[0:$n] | from_entries)} | tojson)"' "$work/records.json" >"$work/seed"
	curlloop send "$work/seed" - >/dev/null
	: >"$work/writes"
	for ((k = 1; k <= 20; k++)); do
		jq -nr --arg url "$url" --arg k "m.extra-$k" --arg v "$sample" '"PATCH\t\($url)\t\({data: {($k): $v}} | tojson)"' >>"$work/writes"
	done
	CURLLOOP_PATCH_TYPE=$3 CURLLOOP_ACCEPT=$4 CURLLOOP_TIMES=$work/times curlloop send "$work/writes" - >/dev/null
	awk '{ printf "%.6f\n", $1 * 1000 }' "$work/times" | median
	drop_one() { "${kubectl[@]}" delete configmap "$1" -n "$lgns" >/dev/null; }
	drop_one "$1"
}
meta='application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1'
say "ledger: one record write replayed raw at 100, 500 and $lrec records, three ways"
rows=()
for way in "merge-full application/merge-patch+json application/json" \
	"merge-meta application/merge-patch+json $meta" \
	"smp-meta application/strategic-merge-patch+json $meta"; do
	read -r name ptype accept <<<"$way"
	rows+=("$name $(raw_write "s-$name-100" 100 "$ptype" "$accept") $(raw_write "s-$name-500" 500 "$ptype" "$accept") $(raw_write "s-$name-top" "$lrec" "$ptype" "$accept")")
done

echo
echo "(e) a ledger of $lrec records ($((bytes / 1024)) KiB as JSON; filled by one run of $lrec migrations in ${fill_s}s)"
awk -v i="$idle_s" -v k="$kget_s" -v n="$repeat" 'BEGIN {
	printf "%-62s %9s %9s\n", "command (median of " n ")", "s", "vs kubectl"
	printf "%-62s %9.3f %9.2fx\n", "cozy-migrate run, nothing pending (read, plan, the Lease mark)", i, i / k
	printf "%-62s %9.3f %9.2fx\n", "kubectl get configmap cozystack-version -o json", k, 1
}'
echo
printf '%-62s %9s %9s %9s\n' "one record write (median ms): how it grows with the ledger" "at 100" "at 500" "at $lrec"
printf '%-62s %9.2f %9.2f %9.2f\n' "in the real run above (strategic merge patch, metadata answered)" "$run_100" "$run_500" "$run_top"
printf '%s\n' "${rows[@]}" | awk '
	BEGIN { d["merge-full"] = "raw: merge patch, whole object answered (two changes ago)"
		d["merge-meta"] = "raw: merge patch, metadata answered (the engine before)"
		d["smp-meta"] = "raw: strategic merge patch, metadata answered (the engine now)" }
	{ printf "%-62s %9.2f %9.2f %9.2f\n", d[$1], $2, $3, $4 }'
ratio=$(awk -v i="$idle_s" -v k="$kget_s" 'BEGIN { printf "%.2f", i / k }')
target "(e) idle run over $lrec records <= 1x one kubectl get" "$(awk -v r="$ratio" 'BEGIN { print (r <= 1 ? "met" : "MISSED") }')" "${ratio}x"
