# shellcheck shell=bash disable=SC2154
# tools/bench/gateway.sh (sourced by tools/bench/run): what a shell
# migration pays for reaching the cluster through the runner's loopback
# gateway (host/gateway/server.c) instead of with the runner's credentials.
#
#   (g) per kubectl call: the same bash loop of kubectl get/patch/apply,
#       run by `cozy-migrate exec` (its kubectl through the gateway) and by
#       bash directly (kubectl straight to the apiserver); the gateway's
#       peak memory (the shell supervisor's VmHWM, exec's JSON).
#       Target: within 1.1x per call.
#   (h) an imported legacy chain of 14 scripts (kubectl get, patch, apply,
#       and the stamp of version each), through `cozy-migrate run` vs the
#       same 14 scripts run by bash one after another. Target: within
#       1.05x + 0.3 s (issue 31, point 3).
#
# BENCH_GW_CALLS (60: kubectl calls in (g), a third of each verb),
# BENCH_GW_ROUNDS (3: (h) is run this many times, the median taken).
calls=${BENCH_GW_CALLS:-60}
rounds=${BENCH_GW_ROUNDS:-3}
gwns=bench-gw-$$
new_ns "$gwns"
"${kubectl[@]}" create configmap subject -n "$gwns" --from-literal=n=0 >/dev/null

# The loop both ways: kubectl get, patch, apply in turn, timed inside bash.
cat >"$work/gw-loop.sh" <<EOF
#!/bin/bash
set -euo pipefail
t0=\$EPOCHREALTIME
for ((i = 0; i < $calls / 3; i++)); do
	kubectl -n $gwns get configmap subject -o name >/dev/null
	kubectl -n $gwns patch configmap subject -p "{\"data\":{\"n\":\"\$i\"}}" >/dev/null
	kubectl -n $gwns create configmap applied --from-literal=n=\$i --dry-run=client -o yaml |
		kubectl -n $gwns apply -f - >/dev/null
done
echo "loop_s \$(awk -v a="\$t0" -v b="\$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')"
EOF
say "gateway: $calls kubectl calls through the gateway and direct"
"$bin" exec --quiet gw-loop "$work/gw-loop.sh" >"$work/gw-exec.json"
gw_s=$(jq -r '.tail' "$work/gw-exec.json" | awk '/^loop_s/ { print $2 }')
gw_kb=$(jq -r '.gateway.peak_rss_kb' "$work/gw-exec.json")
gw_n=$(jq -r '.gateway.requests' "$work/gw-exec.json")
direct_s=$(bash "$work/gw-loop.sh" | awk '/^loop_s/ { print $2 }')

echo
echo "(g) $calls kubectl calls (get, patch, apply in turn), timed inside bash"
awk -v n="$calls" -v g="$gw_s" -v d="$direct_s" -v kb="$gw_kb" -v req="$gw_n" 'BEGIN {
	printf "%-44s %10s %12s %10s\n", "kubectl", "total s", "per-call ms", "vs direct"
	printf "%-44s %10.3f %12.2f %9.2fx\n", "direct to the apiserver (runner credentials)", d, d / n * 1000, 1
	printf "%-44s %10.3f %12.2f %9.2fx\n", "through the gateway (" req " requests)", g, g / n * 1000, g / d
	printf "gateway process peak RSS: %d kB\n", kb
}'
read -r gratio < <(awk -v g="$gw_s" -v d="$direct_s" 'BEGIN { printf "%.2f\n", g / d }')
target "(g) kubectl through the gateway within 1.1x per call" \
	"$(awk -v r="$gratio" 'BEGIN { print (r <= 1.1 ? "met" : "MISSED") }')" "${gratio}x, ${gw_kb} kB" \
	"$(awk -v g="$gw_s" -v d="$direct_s" -v n="$calls" 'BEGIN { printf "%.2f ms more per call", (g - d) / n * 1000 }')"

# (h) the 14-script chain: each a legacy script as the platform's are.
chain_script() { # N NS: the body of legacy script N in namespace NS
	cat <<EOF
set -euo pipefail
kubectl -n $2 get configmap subject -o jsonpath='{.data.n}' >/dev/null
kubectl -n $2 patch configmap subject -p '{"data":{"step":"$1"}}' >/dev/null
kubectl -n $2 create configmap step-$1 --from-literal=n=$1 --dry-run=client -o yaml | kubectl -n $2 apply -f - >/dev/null
kubectl -n $2 create configmap cozystack-version --from-literal=version=$(($1 + 1)) --dry-run=client -o yaml |
	kubectl -n $2 apply -f - >/dev/null
EOF
}
eng=() dir=()
for ((r = 0; r < rounds; r++)); do
	ens=bench-chain-e$r-$$ dns=bench-chain-d$r-$$
	new_ns "$ens"
	new_ns "$dns"
	for ns in "$ens" "$dns"; do
		"${kubectl[@]}" create configmap subject -n "$ns" --from-literal=n=0 >/dev/null
		"${kubectl[@]}" create configmap cozystack-version -n "$ns" --from-literal=version=1 >/dev/null
	done
	tree=$(new_tree)
	ddir=$(mktemp -d "$work/direct.XXXXXX")
	for ((i = 1; i <= 14; i++)); do
		add_sh "$tree" "chain-$i" "$(chain_script "$i" "$ens")"
		{ echo '#!/bin/bash'; chain_script "$i" "$dns"; } >"$ddir/$i.sh"
	done
	say "gateway: the 14-script chain, round $((r + 1)) of $rounds"
	t0=$(now)
	"$bin" run --dir "$tree" --namespace "$ens" >"$work/chain.out" 2>&1 ||
		{ say "the chain through the engine failed:"; cat "$work/chain.out" >&2; exit 1; }
	eng+=("$(elapsed "$t0")")
	[[ $("${kubectl[@]}" get configmap cozystack-version -n "$ens" -o jsonpath='{.data.version}') == 15 ]] ||
		{ say "the chain through the engine did not stamp version 15"; exit 1; }
	t0=$(now)
	for ((i = 1; i <= 14; i++)); do NAMESPACE=$dns bash "$ddir/$i.sh"; done
	dir+=("$(elapsed "$t0")")
done
eng_s=$(printf '%s\n' "${eng[@]}" | median)
dir_s=$(printf '%s\n' "${dir[@]}" | median)
echo
echo "(h) an imported legacy chain of 14 scripts (get, patch, apply, stamp each), median of $rounds"
awk -v e="$eng_s" -v d="$dir_s" 'BEGIN {
	printf "%-44s %10s %14s %12s\n", "how", "total s", "per script ms", "limit s"
	printf "%-44s %10.3f %14.1f %12s\n", "bash, one script after another (direct)", d, d / 14 * 1000, "-"
	printf "%-44s %10.3f %14.1f %12.3f\n", "cozy-migrate run (gateway, records)", e, e / 14 * 1000, d * 1.05 + 0.3
}'
verdict=$(awk -v e="$eng_s" -v d="$dir_s" 'BEGIN { print (e <= d * 1.05 + 0.3 ? "met" : "MISSED") }')
target "(h) legacy chain of 14 within 1.05x + 0.3 s of bash" "$verdict" \
	"$(awk -v e="$eng_s" -v d="$dir_s" 'BEGIN { printf "%.3fs vs %.3fs (limit %.3fs)", e, d, d * 1.05 + 0.3 }')" \
	"$(awk -v e="$eng_s" -v d="$dir_s" 'BEGIN { printf "%.1f ms more per script", (e - d) / 14 * 1000 }')"
