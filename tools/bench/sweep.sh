# shellcheck shell=bash disable=SC2154
# tools/bench/sweep.sh (sourced by tools/bench/run): a fleet sweep. 2,000
# ConfigMaps across 20 namespaces, each needing one label, done three ways:
#   - a Lua migration (kube.list over all namespaces, kube.patch per object)
#     through `cozy-migrate run`;
#   - the same work as a legacy bash migration through `cozy-migrate run`,
#     calling kubectl once per object (kubectl get, then kubectl patch);
#   - the raw limit: the libcurl keep-alive loop sending the same list pages
#     and the same merge patches, no JSON work at all.
# Each way sets a label of its own, so each finds all 2,000 objects to do.
# Targets: Lua >= 30x faster than bash, within 1.3x of the limit.
# BENCH_SWEEP_NS (20), BENCH_SWEEP_PER_NS (100).
sweep_ns=${BENCH_SWEEP_NS:-20}
sweep_per=${BENCH_SWEEP_PER_NS:-100}
sweep_n=$((sweep_ns * sweep_per))
fleet="bench.cozystack.io/fleet=sweep-$$"
say "sweep: creating $sweep_n ConfigMaps in $sweep_ns namespaces"
: >"$work/sweep-create"
: >"$work/sweep-patch"
for ((i = 1; i <= sweep_ns; i++)); do
	ns=$(printf 'bench-sweep-%02d-%s' "$i" "$$")
	new_ns "$ns"
	for ((j = 1; j <= sweep_per; j++)); do
		printf 'POST\t%s/api/v1/namespaces/%s/configmaps\t{"metadata":{"name":"cm-%04d","labels":{"bench.cozystack.io/fleet":"sweep-%s"}},"data":{"index":"%d"}}\n' \
			"$server" "$ns" "$j" "$$" "$j" >>"$work/sweep-create"
		printf 'PATCH\t%s/api/v1/namespaces/%s/configmaps/cm-%04d\t{"metadata":{"labels":{"bench.cozystack.io/raw":"done"}}}\n' \
			"$server" "$ns" "$j" >>"$work/sweep-patch"
	done
done
curlloop send "$work/sweep-create" - >/dev/null

# count_labelled KEY: how many of the fleet carry KEY=done
count_labelled() {
	curlloop list "$server/api/v1/configmaps?labelSelector=${fleet//=/%3D},${1//\//%2F}%3Ddone" 500 | awk '{ print $2 }'
}

# The Lua migration.
lua_tree=$(new_tree)
add_lua "$lua_tree" fleet-label "local kube = require('kube')
local log = require('log')
local n = 0
for cm in kube.list('configmaps', { all_namespaces = true, label_selector = '$fleet' }) do
  if (cm.metadata.labels or {})['bench.cozystack.io/lua'] ~= 'done' then
    kube.patch('configmaps', cm.metadata.name,
      { metadata = { labels = { ['bench.cozystack.io/lua'] = 'done' } } }, { namespace = cm.metadata.namespace })
    n = n + 1
  end
end
log.info('labelled ' .. n)"
new_ns "bench-sweep-lua-$$"
empty_ledger "bench-sweep-lua-$$"
say "sweep: the Lua migration through cozy-migrate run"
t0=$(now)
"$bin" run --dir "$lua_tree" --namespace "bench-sweep-lua-$$" >"$work/sweep-lua.out" 2>&1 ||
	{ cat "$work/sweep-lua.out" >&2; say "sweep: the Lua run failed"; exit 1; }
lua_s=$(elapsed "$t0")
lua_done=$(count_labelled bench.cozystack.io/lua)

# The bash migration.
sh_tree=$(new_tree)
add_sh "$sh_tree" fleet-label "set -euo pipefail
kubectl get configmaps --all-namespaces -l '$fleet' \\
  -o jsonpath='{range .items[*]}{.metadata.namespace}{\" \"}{.metadata.name}{\" \"}{.metadata.labels.bench\\.cozystack\\.io/bash}{\"\\n\"}{end}' |
while read -r ns name done; do
  [ \"\$done\" = done ] && continue
  kubectl patch configmap \"\$name\" -n \"\$ns\" --type merge \\
    -p '{\"metadata\":{\"labels\":{\"bench.cozystack.io/bash\":\"done\"}}}' >/dev/null
done"
new_ns "bench-sweep-sh-$$"
empty_ledger "bench-sweep-sh-$$"
say "sweep: the bash migration through cozy-migrate run ($sweep_n kubectl invocations)"
t0=$(now)
"$bin" run --dir "$sh_tree" --namespace "bench-sweep-sh-$$" >"$work/sweep-sh.out" 2>&1 ||
	{ tail -20 "$work/sweep-sh.out" >&2; say "sweep: the bash run failed"; exit 1; }
sh_s=$(elapsed "$t0")
sh_done=$(count_labelled bench.cozystack.io/bash)

# The raw limit: the same list pages, then the same patches.
say "sweep: the raw libcurl loop"
read -r list_s listed < <(curlloop list "$server/api/v1/configmaps?labelSelector=${fleet//=/%3D}" 500)
read -r patch_s patched _ < <(curlloop send "$work/sweep-patch" -)
raw_s=$(awk -v a="$list_s" -v b="$patch_s" 'BEGIN { printf "%.3f", a + b }')
raw_done=$(count_labelled bench.cozystack.io/raw)
[[ $listed == "$sweep_n" && $patched == "$sweep_n" ]] || say "sweep: note: the raw loop listed $listed and patched $patched"

echo
echo "(c) fleet sweep: $sweep_n ConfigMaps in $sweep_ns namespaces, one label each (wall clock)"
awk -v n="$sweep_n" -v l="$lua_s" -v s="$sh_s" -v r="$raw_s" -v ld="$lua_done" -v sd="$sh_done" -v rd="$raw_done" 'BEGIN {
	printf "%-48s %9s %13s %9s %9s %9s\n", "method", "total s", "per-object ms", "labelled", "vs bash", "vs limit"
	printf "%-48s %9.3f %13.3f %9d %8.1fx %8.2fx\n", "Lua migration, cozy-migrate run", l, l / n * 1000, ld, s / l, l / r
	printf "%-48s %9.3f %13.3f %9d %8.1fx %8.2fx\n", "bash migration, kubectl per object, run", s, s / n * 1000, sd, 1, s / r
	printf "%-48s %9.3f %13.3f %9d %8.1fx %8.2fx\n", "raw libcurl keep-alive loop (the limit)", r, r / n * 1000, rd, s / r, 1
}'
read -r r1 r2 < <(awk -v l="$lua_s" -v s="$sh_s" -v r="$raw_s" 'BEGIN { printf "%.1f %.2f\n", s / l, l / r }')
all_done=$([[ $lua_done == "$sweep_n" && $sh_done == "$sweep_n" && $raw_done == "$sweep_n" ]] && echo yes || echo no)
[[ $all_done == yes ]] || echo "(not every way labelled all $sweep_n objects: the figures above do not compare)"
raw_vs_bash=$(awk -v s="$sh_s" -v r="$raw_s" 'BEGIN { printf "%.1f", s / r }')
target "(c) sweep: Lua >= 30x faster than bash+kubectl" \
	"$(awk -v r="$r1" -v ok="$all_done" 'BEGIN { print (r >= 30 && ok == "yes" ? "met" : "MISSED") }')" "${r1}x" \
	"the raw sequential loop itself is only ${raw_vs_bash}x bash+kubectl here; the concurrent sweep (f) goes past it"
target "(c) sweep: Lua within 1.3x of the raw loop" \
	"$(awk -v r="$r2" -v ok="$all_done" 'BEGIN { print (r <= 1.3 && ok == "yes" ? "met" : "MISSED") }')" "${r2}x"
for ((i = 1; i <= sweep_ns; i++)); do drop_collection "$(printf 'bench-sweep-%02d-%s' "$i" "$$")"; done
