# shellcheck shell=bash disable=SC2154
# tools/bench/gets.sh (sourced by tools/bench/run): 1,000 sequential GETs of
# one ConfigMap: kube.get in ONE cozy-migrate process, vs 1,000 kubectl
# invocations, vs the libcurl keep-alive loop (same TLS and client
# certificate). Targets: >= 30x faster than kubectl, within 1.5x of the loop.
# BENCH_GETS (1000), BENCH_KUBECTL_CAP seconds (180).
gets=${BENCH_GETS:-1000}
kubectl_cap=${BENCH_KUBECTL_CAP:-180}
gns=bench-gets-$$
new_ns "$gns"
"${kubectl[@]}" create configmap one -n "$gns" --from-literal=key=value >/dev/null

say "gets: $gets sequential GETs of configmap $gns/one"
cat >"$work/gets.lua" <<LUA
local kube = require('kube')
local n = 0
for _ = 1, $gets do
  if kube.get('configmaps', 'one', { namespace = '$gns' }) then n = n + 1 end
end
assert(n == $gets, 'got ' .. n)
print(kube.connections())
LUA
t0=$(now)
conns=$("$bin" lua "$work/gets.lua")
lua_s=$(elapsed "$t0")
[[ $conns == 1 ]] || say "gets: note: kube.get used $conns connections"

read -r curl_s _ < <(curlloop get "$server/api/v1/namespaces/$gns/configmaps/one" "$gets")

kdone=0
t0=$(now)
for ((i = 0; i < gets; i++)); do
	"${kubectl[@]}" get configmap one -n "$gns" -o json >/dev/null
	kdone=$((i + 1))
	if (($(awk -v a="$t0" -v b="$(now)" -v c="$kubectl_cap" 'BEGIN { print (b - a > c) }'))); then
		break
	fi
done
kubectl_s=$(elapsed "$t0")

echo
echo "(a) $gets sequential GETs of one ConfigMap (wall clock; process start-up included)"
awk -v n="$gets" -v lua="$lua_s" -v curl="$curl_s" -v kub="$kubectl_s" -v kn="$kdone" 'BEGIN {
	kper = kub / kn * 1000; lper = lua / n * 1000; cper = curl / n * 1000
	printf "%-34s %10s %12s %12s %12s\n", "method", "total s", "per-req ms", "vs kubectl", "vs curl loop"
	printf "%-34s %10.3f %12.3f %11.1fx %11.2fx\n", "kube.get, one cozy-migrate run", lua, lper, kper / lper, lper / cper
	printf "%-34s %10.3f %12.3f %11.1fx %11.2fx\n", "kubectl get, " kn " invocations", kub, kper, 1, kper / cper
	printf "%-34s %10.3f %12.3f %11.1fx %11.2fx\n", "libcurl keep-alive loop (C)", curl, cper, kper / cper, 1
}'
if ((kdone < gets)); then
	echo "(kubectl stopped after $kdone of $gets invocations: over the ${kubectl_cap}s cap; its per-request figure is from those)"
fi
read -r r1 r2 < <(awk -v n="$gets" -v lua="$lua_s" -v curl="$curl_s" -v kub="$kubectl_s" -v kn="$kdone" \
	'BEGIN { l = lua / n; printf "%.1f %.2f\n", (kub / kn) / l, l / (curl / n) }')
target "(a) kube.get >= 30x faster than kubectl" "$(awk -v r="$r1" 'BEGIN { print (r >= 30 ? "met" : "MISSED") }')" "${r1}x"
target "(a) kube.get within 1.5x of the curl loop" "$(awk -v r="$r2" 'BEGIN { print (r <= 1.5 ? "met" : "MISSED") }')" "${r2}x"
drop_collection "$gns"
