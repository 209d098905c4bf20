# shellcheck shell=bash disable=SC2154
# tools/bench/pace.sh (sourced by tools/bench/run): fleet.each's adaptive
# pace (host/kube/pace.h).
#
# (p) Throttled: the engine runs as an identity API Priority and Fairness
# gives few seats (tools/testenv apf: BENCH_PACE_SHARES of the server's
# nominal shares, 1 = 3 seats, one queue of BENCH_PACE_QUEUE), sweeping
# BENCH_PACE_N ConfigMaps (one label each) through `cozy-migrate run`: at
# each fixed concurrency of BENCH_PACE_SCAN (opts.adapt = false), then
# adaptive at ceiling 64. What the apiserver refused is its own count
# (apiserver_flowcontrol_rejected_requests_total of the level, against the
# dispatched ones, read from /metrics around each run). Targets: the
# adaptive sweep within 1.1x of the best fixed point of the scan, with at
# most 5% of its requests answered 429.
#
# (q) Unthrottled (the admin identity, exempt): the same sweep of
# BENCH_PACE_N2 objects at the default concurrency 8 (adaptive) against
# the engine BENCH_BASELINE names (today's sweep), or, without one, this
# engine with a fixed pace (what the sweep did before the pace), runs
# alternated BENCH_PACE_REPEAT times, medians compared. Target: within
# 1.05x.
pace_n=${BENCH_PACE_N:-1000}
pace_n2=${BENCH_PACE_N2:-2000}
pace_scan=${BENCH_PACE_SCAN:-1 2 3 4 6 8 16 32 64}
pace_shares=${BENCH_PACE_SHARES:-1}
pace_queue=${BENCH_PACE_QUEUE:-4}
pace_repeat=${BENCH_PACE_REPEAT:-3}
pace_level=bench-apf-$$

say "pace: a flow of $pace_shares share(s) and a queue of $pace_queue for the engine (tools/testenv apf)"
apf_kc=$(tools/testenv apf "$pace_level" "$pace_shares" "$pace_queue")
# the cleanup leaves no APF objects behind in a testenv it did not start
BENCH_NAMESPACES+=("$pace_level")
pace_cleanup_apf() {
	"${kubectl[@]}" delete flowschema,prioritylevelconfiguration "$pace_level" --ignore-not-found >/dev/null 2>&1 || true
	"${kubectl[@]}" delete clusterrolebinding "testenv-apf-$pace_level" --ignore-not-found >/dev/null 2>&1 || true
}

# pace_metrics: "<dispatched> <rejected>" of the level so far
pace_metrics() {
	"${kubectl[@]}" get --raw /metrics | awk -v l="priority_level=\"$pace_level\"" '
		index($0, l) && /^apiserver_flowcontrol_dispatched_requests_total/ { d += $2 }
		index($0, l) && /^apiserver_flowcontrol_rejected_requests_total/ { r += $2 }
		END { printf "%d %d\n", d, r }'
}

# pace_tree KEY NS OPTS: a tree whose one migration labels every object of
# NS with bench.cozystack.io/KEY=done through fleet.each with OPTS (Lua
# table fields after the selector)
pace_tree() {
	local t
	t=$(new_tree)
	add_lua "$t" "pace-$1" "local kube = require('kube')
local fleet = require('fleet')
fleet.each('configmaps', { namespace = '$2', label_selector = 'bench=pace'$3 }, function(cm)
  if (cm.metadata.labels or {})['bench.cozystack.io/$1'] == 'done' then return false end
  kube.patch('configmaps', cm.metadata.name,
    { metadata = { labels = { ['bench.cozystack.io/$1'] = 'done' } } }, { namespace = cm.metadata.namespace })
  return true
end)"
	echo "$t"
}

# pace_run BIN KUBECONFIG KEY NS OPTS: runs it; prints "<seconds> <rc> <in flight>"
pace_run() {
	local t ln t0 rc=0 s fl
	t=$(pace_tree "$3" "$4" "$5")
	ln=bench-pace-run-$3-$$
	new_ns "$ln"
	empty_ledger "$ln"
	t0=$(now)
	"$1" run --kubeconfig "$2" --timeout 1h --dir "$t" --namespace "$ln" >"$work/pace-$3.out" 2>&1 || rc=$?
	s=$(elapsed "$t0")
	fl=$({ grep -o 'in flight between [0-9]* and [0-9]* of [0-9]*' "$work/pace-$3.out" || true; } | tail -1 | awk '{ print $4 ".." $6 }')
	# no line: the window reached the ceiling unthrottled
	[[ -n $fl || $5 == *"adapt = false"* ]] || fl="..${5##*concurrency = }"
	echo "$s $rc ${fl:--}"
}

# pace_objects NS N: N ConfigMaps labelled bench=pace in NS (new)
pace_objects() {
	new_ns "$1"
	awk -v n="$2" -v s="$server" -v ns="$1" 'BEGIN {
		for (i = 1; i <= n; i++)
			printf "POST\t%s/api/v1/namespaces/%s/configmaps\t{\"metadata\":{\"name\":\"cm-%06d\",\"labels\":{\"bench\":\"pace\"}},\"data\":{\"index\":\"%d\"}}\n", s, ns, i, i
	}' >"$work/pace-create"
	CURLLOOP_CONCURRENCY=16 curlloop send "$work/pace-create" - >/dev/null
}

pace_done() {
	curlloop list "$server/api/v1/namespaces/$1/configmaps?labelSelector=bench.cozystack.io%2F$2%3Ddone" 500 | awk '{ print $2 }'
}

# (p) throttled
pns=bench-pace-$$
say "pace: $pace_n ConfigMaps; fixed concurrency $pace_scan, then adaptive at ceiling 64, as the throttled identity"
pace_objects "$pns" "$pace_n"
pace_rows=()
best_s="" best_c=""
for c in $pace_scan adaptive; do
	if [[ $c == adaptive ]]; then pkey=adapt64 opts=", concurrency = 64" label="64, adaptive"
	else pkey=fixed$c opts=", concurrency = $c, adapt = false" label="$c, fixed"; fi
	read -r d0 r0 < <(pace_metrics)
	read -r s rc fl < <(pace_run "$bin" "$apf_kc" "$pkey" "$pns" "$opts")
	read -r d1 r1 < <(pace_metrics)
	did=$(pace_done "$pns" "$pkey")
	rej=$((r1 - r0)) all=$((d1 - d0 + r1 - r0))
	pace_rows+=("$label|$s|$rc|$rej|$all|$fl|$did")
	say "pace: concurrency $label: ${s}s, $rej of $all requests refused, exit $rc, $did labelled"
	if [[ $c != adaptive && $rc == 0 && $did == "$pace_n" ]]; then
		if [[ -z $best_s ]] || awk -v a="$s" -v b="$best_s" 'BEGIN { exit !(a < b) }'; then
			best_s=$s best_c=$c
		fi
	fi
	[[ $c == adaptive ]] && { ad_s=$s ad_rc=$rc ad_rej=$rej ad_all=$all ad_fl=$fl ad_did=$did; }
done
drop_collection "$pns"

echo
echo "(p) fleet sweep under API Priority and Fairness: $pace_n ConfigMaps, one label each; the engine's flow has $pace_shares share(s) (3 seats per share here) and a queue of $pace_queue (wall clock; 429s: the apiserver's count)"
printf '%-22s %9s %7s %12s %8s %11s %9s\n' "concurrency" "total s" "exit" "429 answers" "of all" "in flight" "labelled"
for row in "${pace_rows[@]}"; do
	IFS='|' read -r label s rc rej all fl did <<<"$row"
	awk -v l="$label" -v s="$s" -v rc="$rc" -v r="$rej" -v a="$all" -v f="$fl" -v d="$did" 'BEGIN {
		printf "%-22s %9.3f %7d %12d %7.1f%% %11s %9d\n", l, s, rc, r, a ? r / a * 100 : 0, f, d }'
done
if [[ -n $best_s ]]; then
	ratio=$(awk -v a="$ad_s" -v b="$best_s" 'BEGIN { printf "%.2f", a / b }')
	echo "best fixed point: concurrency $best_c, ${best_s}s; the adaptive sweep ${ratio}x of it"
else
	ratio=""
	echo "no fixed point of the scan labelled every object"
fi
ok_all=$([[ $ad_rc == 0 && $ad_did == "$pace_n" ]] && echo yes || echo no)
pct=$(awk -v r="$ad_rej" -v a="$ad_all" 'BEGIN { printf "%.1f", a ? r / a * 100 : 0 }')
target "(p) throttled: adaptive at ceiling 64 within 1.1x of the best fixed" \
	"$(awk -v r="${ratio:-99}" -v ok="$ok_all" 'BEGIN { print (r <= 1.1 && ok == "yes" ? "met" : "MISSED") }')" \
	"${ratio:-?}x (${ad_s}s against concurrency ${best_c:-?} at ${best_s:-?}s)" \
	"its window moved between ${ad_fl} requests and the apiserver refused $ad_rej of its $ad_all requests; each refusal waits its Retry-After"
target "(p) throttled: at most 5% of the adaptive sweep's requests answered 429" \
	"$(awk -v p="$pct" -v ok="$ok_all" 'BEGIN { print (p <= 5 && ok == "yes" ? "met" : "MISSED") }')" \
	"${pct}% ($ad_rej of $ad_all)"

# (q) unthrottled
qns=bench-pace-q-$$
pace_objects "$qns" "$pace_n2"
if [[ -n ${BENCH_BASELINE:-} ]]; then
	base_bin=$BENCH_BASELINE base_opts="" base_label="the baseline engine ($BENCH_BASELINE), concurrency 8"
else
	base_bin=$bin base_opts=", adapt = false" base_label="this engine, fixed pace 8 (no BENCH_BASELINE)"
fi
say "pace: $pace_n2 ConfigMaps unthrottled: this engine (adaptive, default 8) against $base_label, $pace_repeat times each"
new_times=() base_times=()
for ((i = 1; i <= pace_repeat; i++)); do
	read -r s rc _ < <(pace_run "$bin" "$KUBECONFIG" "qnew$i" "$qns" "")
	[[ $rc == 0 ]] || { cat "$work/pace-qnew$i.out" >&2; say "pace: the unthrottled run failed"; exit 1; }
	new_times+=("$s")
	read -r s rc _ < <(pace_run "$base_bin" "$KUBECONFIG" "qbase$i" "$qns" "$base_opts")
	[[ $rc == 0 ]] || { cat "$work/pace-qbase$i.out" >&2; say "pace: the baseline run failed"; exit 1; }
	base_times+=("$s")
done
new_med=$(printf '%s\n' "${new_times[@]}" | median)
base_med=$(printf '%s\n' "${base_times[@]}" | median)
qratio=$(awk -v a="$new_med" -v b="$base_med" 'BEGIN { printf "%.2f", a / b }')
echo
echo "(q) the same sweep unthrottled: $pace_n2 ConfigMaps, admin identity, median of $pace_repeat alternated runs (wall clock)"
printf '%-60s %9s %s\n' "engine" "median s" "runs"
printf '%-60s %9.3f %s\n' "this engine, adaptive (ceiling 8, the default)" "$new_med" "${new_times[*]}"
printf '%-60s %9.3f %s\n' "$base_label" "$base_med" "${base_times[*]}"
spread=$(printf '%s\n' "${new_times[@]}" "${base_times[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f", (v[NR] - v[1]) / v[1] * 100 }')
target "(q) unthrottled: adaptive within 1.05x of $( [[ -n ${BENCH_BASELINE:-} ]] && echo "the baseline" || echo "a fixed pace")" \
	"$(awk -v r="$qratio" 'BEGIN { print (r <= 1.05 ? "met" : "MISSED") }')" "${qratio}x" \
	"the runs of this machine spread ${spread}% from fastest to slowest"
drop_collection "$qns"
pace_cleanup_apf
