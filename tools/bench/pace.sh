# shellcheck shell=bash disable=SC2154
# tools/bench/pace.sh (sourced by tools/bench/run): fleet.each's adaptive
# pace (host/client/pace.h).
#
# (p) Throttled: the engine runs as an identity API Priority and Fairness
# gives few seats (tools/testenv apf: BENCH_PACE_SHARES of the server's
# nominal shares, 1 = 3 seats, one queue of BENCH_PACE_QUEUE), sweeping
# BENCH_PACE_N ConfigMaps (one label each) through `cozy-migrate run`: at
# each fixed concurrency of BENCH_PACE_SCAN (opts.adapt = false), then the
# best point of that scan and the adaptive sweep at ceiling 64 alternated
# BENCH_PACE_REPEAT times, medians compared. Every run sweeps ConfigMaps
# of its own, made for it, as an identity of a priority level of its own:
# a second sweep of the same objects is slower (each run before it grew
# them and their history), and a level refused often answers later
# refusals with a longer Retry-After; both made whatever ran last look
# worse. What the apiserver refused is its own count
# (apiserver_flowcontrol_rejected_requests_total of the level, against the
# dispatched ones, read from /metrics around each run). Targets: the
# adaptive sweep's median within 1.1x of the best point's, with at most 5%
# of its requests answered 429.
#
# (q) Unthrottled (the admin identity, exempt): the same sweep of
# BENCH_PACE_N2 objects at the default concurrency 8 (adaptive) against
# the engine BENCH_BASELINE names (today's sweep), or, without one, this
# engine with a fixed pace (what the sweep did before the pace), runs
# alternated BENCH_PACE_REPEAT times (5), each on ConfigMaps of its own,
# medians compared. Target: within 1.05x.
pace_n=${BENCH_PACE_N:-1000}
pace_n2=${BENCH_PACE_N2:-2000}
pace_scan=${BENCH_PACE_SCAN:-1 2 3 4 6 8 16 32 64}
pace_shares=${BENCH_PACE_SHARES:-1}
pace_queue=${BENCH_PACE_QUEUE:-4}
pace_repeat=${BENCH_PACE_REPEAT:-5}
pace_level=bench-apf-$$
pace_levels=()

say "pace: a flow of $pace_shares share(s) and a queue of $pace_queue for the engine, a priority level of its own for each run (tools/testenv apf)"
# pace_apf NAME: a throttled identity with a priority level of its own
# (API Priority and Fairness raises a level's Retry-After, up to 32 s,
# after many refusals and lowers it only as later ones come: a level the
# scan's high points were refused at would make any later run's one
# refusal cost that much); sets p_kc to its kubeconfig
pace_apf() {
	p_kc=$(tools/testenv apf "$1" "$pace_shares" "$pace_queue")
	pace_levels+=("$1")
	# the cleanup leaves no APF objects behind in a testenv it did not start
	BENCH_NAMESPACES+=("$1")
}
pace_cleanup_apf() {
	local l
	for l in "${pace_levels[@]}"; do
		"${kubectl[@]}" delete flowschema,prioritylevelconfiguration "$l" --ignore-not-found >/dev/null 2>&1 || true
		"${kubectl[@]}" delete clusterrolebinding "testenv-apf-$l" --ignore-not-found >/dev/null 2>&1 || true
	done
}

# pace_metrics LEVEL: "<dispatched> <rejected>" of the level so far
pace_metrics() {
	"${kubectl[@]}" get --raw /metrics | awk -v l="priority_level=\"$1\"" '
		index($0, l) && /^apiserver_flowcontrol_dispatched_requests_total/ { d += $2 }
		index($0, l) && /^apiserver_flowcontrol_rejected_requests_total/ { r += $2 }
		END { printf "%d %d\n", d, r }'
}

# pace_tree KEY NS OPTS: a tree whose one migration labels every object of
# NS with bench.cozystack.io/KEY=done through fleet.each with OPTS (Lua
# table fields after the selector)
pace_tree() { sweep_tree "pace-$1" "$1" "$2" bench=pace "$3"; }

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
pace_objects() { bench_configmaps "$1" "$2" pace; }

pace_done() {
	curlloop list "$server/api/v1/namespaces/$1/configmaps?labelSelector=bench.cozystack.io%2F$2%3Ddone" 500 | awk '{ print $2 }'
}

# (p) throttled
say "pace: $pace_n ConfigMaps for each run; fixed concurrency $pace_scan, then the best of them and adaptive at ceiling 64 alternated $pace_repeat times, as the throttled identity"
pace_rows=()
best_s="" best_c=""
# pace_point LABEL KEY OPTS: one run on ConfigMaps and a priority level of
# its own; sets
# p_s p_rc p_rej p_all p_fl p_did and adds a row to the table
pace_point() {
	local ns=bench-pace-$$-$2 d0 r0 d1 r1
	pace_objects "$ns" "$pace_n"
	pace_apf "$pace_level-$2"
	read -r d0 r0 < <(pace_metrics "$pace_level-$2")
	read -r p_s p_rc p_fl < <(pace_run "$bin" "$p_kc" "$2" "$ns" "$3")
	read -r d1 r1 < <(pace_metrics "$pace_level-$2")
	p_did=$(pace_done "$ns" "$2")
	p_rej=$((r1 - r0)) p_all=$((d1 - d0 + r1 - r0))
	drop_collection "$ns"
	pace_rows+=("$1|$p_s|$p_rc|$p_rej|$p_all|$p_fl|$p_did")
	say "pace: concurrency $1: ${p_s}s, $p_rej of $p_all requests refused, exit $p_rc, $p_did labelled"
}
for c in $pace_scan; do
	pace_point "$c, fixed" "fixed$c" ", concurrency = $c, adapt = false"
	if [[ $p_rc == 0 && $p_did == "$pace_n" ]]; then
		if [[ -z $best_s ]] || awk -v a="$p_s" -v b="$best_s" 'BEGIN { exit !(a < b) }'; then
			best_s=$p_s best_c=$c
		fi
	fi
done
best_times=() ad_times=() ad_rej=0 ad_all=0 ad_ok=yes ad_lo="" ad_hi=""
for ((i = 1; i <= pace_repeat; i++)); do
	if [[ -n $best_c ]]; then
		pace_point "$best_c, fixed (again)" "best$i" ", concurrency = $best_c, adapt = false"
		[[ $p_rc == 0 && $p_did == "$pace_n" ]] && best_times+=("$p_s")
	fi
	pace_point "64, adaptive" "adapt$i" ", concurrency = 64"
	ad_times+=("$p_s")
	ad_rej=$((ad_rej + p_rej)) ad_all=$((ad_all + p_all))
	[[ $p_rc == 0 && $p_did == "$pace_n" ]] || ad_ok=no
	# the window's range over the runs ("lo..hi" each)
	lo=${p_fl%%..*} hi=${p_fl##*..}
	[[ -n $lo && ( -z $ad_lo || $lo -lt $ad_lo ) ]] && ad_lo=$lo
	[[ -n $hi && ( -z $ad_hi || $hi -gt $ad_hi ) ]] && ad_hi=$hi
done
ad_s=$(printf '%s\n' "${ad_times[@]}" | median)
ad_fl="${ad_lo}..${ad_hi}"

echo
echo "(p) fleet sweep under API Priority and Fairness: $pace_n ConfigMaps of its own for each run, one label each; the engine's flow has $pace_shares share(s) (3 seats per share here) and a queue of $pace_queue (wall clock; 429s: the apiserver's count)"
printf '%-22s %9s %7s %12s %8s %11s %9s\n' "concurrency" "total s" "exit" "429 answers" "of all" "in flight" "labelled"
for row in "${pace_rows[@]}"; do
	IFS='|' read -r label s rc rej all fl did <<<"$row"
	awk -v l="$label" -v s="$s" -v rc="$rc" -v r="$rej" -v a="$all" -v f="$fl" -v d="$did" 'BEGIN {
		printf "%-22s %9.3f %7d %12d %7.1f%% %11s %9d\n", l, s, rc, r, a ? r / a * 100 : 0, f, d }'
done
if [[ ${#best_times[@]} -gt 0 ]]; then
	best_med=$(printf '%s\n' "${best_times[@]}" | median)
	ratio=$(awk -v a="$ad_s" -v b="$best_med" 'BEGIN { printf "%.2f", a / b }')
	echo "best fixed point of the scan: concurrency $best_c (${best_s}s); alternated $pace_repeat times: its median ${best_med}s (${best_times[*]}), the adaptive sweep's ${ad_s}s (${ad_times[*]}): ${ratio}x"
else
	ratio="" best_med=""
	echo "no fixed point of the scan labelled every object"
fi
pct=$(awk -v r="$ad_rej" -v a="$ad_all" 'BEGIN { printf "%.1f", a ? r / a * 100 : 0 }')
target "(p) throttled: adaptive at ceiling 64 within 1.1x of the best fixed" \
	"$(awk -v r="${ratio:-99}" -v ok="$ad_ok" 'BEGIN { print (r <= 1.1 && ok == "yes" ? "met" : "MISSED") }')" \
	"${ratio:-?}x (median ${ad_s}s against concurrency ${best_c:-?}'s ${best_med:-?}s)" \
	"its window moved between ${ad_fl} requests and the apiserver refused $ad_rej of its $ad_all requests; each refusal waits its Retry-After"
target "(p) throttled: at most 5% of the adaptive sweep's requests answered 429" \
	"$(awk -v p="$pct" -v ok="$ad_ok" 'BEGIN { print (p <= 5 && ok == "yes" ? "met" : "MISSED") }')" \
	"${pct}% ($ad_rej of $ad_all, $pace_repeat runs)"

# (q) unthrottled, each run on ConfigMaps of its own (as in (p))
# pace_qrun BIN KEY OPTS: sets q_s (seconds) and q_rc
pace_qrun() {
	local ns=bench-pace-q-$$-$2
	pace_objects "$ns" "$pace_n2"
	read -r q_s q_rc _ < <(pace_run "$1" "$KUBECONFIG" "$2" "$ns" "$3")
	drop_collection "$ns"
}
if [[ -n ${BENCH_BASELINE:-} ]]; then
	base_bin=$BENCH_BASELINE base_opts="" base_label="the baseline engine ($BENCH_BASELINE), concurrency 8"
else
	base_bin=$bin base_opts=", adapt = false" base_label="this engine, fixed pace 8 (no BENCH_BASELINE)"
fi
say "pace: $pace_n2 ConfigMaps unthrottled: this engine (adaptive, default 8) against $base_label, $pace_repeat times each"
new_times=() base_times=()
for ((i = 1; i <= pace_repeat; i++)); do
	pace_qrun "$bin" "qnew$i" ""
	s=$q_s rc=$q_rc
	[[ $rc == 0 ]] || { cat "$work/pace-qnew$i.out" >&2; say "pace: the unthrottled run failed"; exit 1; }
	new_times+=("$s")
	pace_qrun "$base_bin" "qbase$i" "$base_opts"
	s=$q_s rc=$q_rc
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
pace_cleanup_apf
