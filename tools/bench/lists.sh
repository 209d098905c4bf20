# shellcheck shell=bash disable=SC2154
# tools/bench/lists.sh (sourced by tools/bench/run): iterating 5,000, 20,000
# and 50,000 ConfigMaps (200-byte payload each) with kube.list in one
# `cozy-migrate lua` process: its time and the peak RSS of the whole process
# (GNU time), next to the raw API floor (the curl loop paging the same list,
# one page in memory) and kubectl (which holds the whole list). Targets: the
# RSS flat within 10% across sizes, and under 40 MB.
# BENCH_SIZES ("5000 20000 50000").
sizes=${BENCH_SIZES:-5000 20000 50000}
rows=()
payload=$(printf 'x%.0s' $(seq 200))
for n in $sizes; do
	lns=bench-list-$n-$$
	new_ns "$lns"
	say "lists: creating $n ConfigMaps"
	awk -v n="$n" -v s="$server" -v ns="$lns" -v p="$payload" 'BEGIN {
		for (i = 1; i <= n; i++)
			printf "POST\t%s/api/v1/namespaces/%s/configmaps\t{\"metadata\":{\"name\":\"cm-%06d\",\"labels\":{\"bench\":\"list\"}},\"data\":{\"payload\":\"%s\",\"index\":\"%d\"}}\n", s, ns, i, p, i
	}' >"$work/list-create"
	read -r create_s _ < <(curlloop send "$work/list-create" -)
	cat >"$work/iterate.lua" <<LUA
local kube = require('kube')
local t0, n, bytes = kube.now(), 0, 0
for cm in kube.list('configmaps', { namespace = '$lns' }) do
  n = n + 1
  bytes = bytes + #cm.data.payload
end
assert(n == $n, 'iterated ' .. n)
print(string.format('%.3f', kube.now() - t0))
LUA
	say "lists: iterating $n ConfigMaps three ways"
	lua_kb=$(peak_rss "$work/iter.out" "$bin" lua --timeout 30m "$work/iterate.lua")
	lua_iter_s=$(cat "$work/iter.out")
	curl_kb=$(peak_rss "$work/curl.out" "$CURLLOOP" list "$server/api/v1/namespaces/$lns/configmaps" 500 \
		"$ca" "$crt" "$key")
	read -r curl_iter_s curl_items <"$work/curl.out"
	[[ $curl_items == "$n" ]] || say "lists: note: the curl loop counted $curl_items items, not $n"
	t0=$(now)
	kubectl_kb=$(peak_rss /dev/null "${kubectl[@]}" get configmaps -n "$lns" -o json --chunk-size=500)
	kubectl_s=$(elapsed "$t0")
	rows+=("$n $create_s $lua_iter_s $lua_kb $curl_iter_s $curl_kb $kubectl_s $kubectl_kb")
	drop_collection "$lns"
done

echo
echo "(b) iterating ConfigMaps (page size 500): time, and peak RSS of the whole process (GNU time, MB)"
printf '%s\n' "${rows[@]}" | awk '
	{ n[NR] = $1; cr[NR] = $2; ls[NR] = $3; l[NR] = $4 / 1024; cs[NR] = $5; c[NR] = $6 / 1024; ks[NR] = $7; k[NR] = $8 / 1024 }
	END {
		printf "%-8s %9s | %12s %14s | %12s %14s | %10s %12s\n", "objects", "create s", "kube.list s", "kube.list RSS",
			"curl loop s", "curl loop RSS", "kubectl s", "kubectl RSS"
		for (i = 1; i <= NR; i++)
			printf "%-8d %9.1f | %12.3f %14.1f | %12.3f %14.1f | %10.3f %12.1f\n", n[i], cr[i], ls[i], l[i], cs[i], c[i], ks[i], k[i]
	}'
read -r growth hi < <(printf '%s\n' "${rows[@]}" | awk '
	{ v = $4 / 1024; if (NR == 1 || v < lo) lo = v; if (NR == 1 || v > hi) hi = v }
	END { printf "%.1f %.1f\n", (hi - lo) / lo * 100, hi }')
target "(b) kube.list RSS flat within 10% across sizes" "$(awk -v g="$growth" 'BEGIN { print (g <= 10 ? "met" : "MISSED") }')" "${growth}% apart"
target "(b) kube.list RSS under 40 MB" "$(awk -v h="$hi" 'BEGIN { print (h < 40 ? "met" : "MISSED") }')" "max ${hi} MB"
