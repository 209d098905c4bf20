-- What the runner specs (spec/e2e/runner_*_spec.lua) share: a namespace of
-- their own per case, the runner's ledger ConfigMap and Lease read with
-- kubectl, marker migrations that prove they ran, and the built binary run
-- as `cozy-migrate run|plan|status`, alone or beside another runner.
--
-- Lua migrations prove they ran by creating a ConfigMap `ran-<name>` (the
-- sandbox has no filesystem and no os.getenv, so the namespace is baked into
-- the script text); shell migrations append a line to a file.
local h = require('support.helpers')
local json = require('json')

local M = {}

M.LEDGER = 'cozystack-version'
M.LEASE = 'cozystack-version-lock'

-- busted loads this module afresh for each spec file, so the counter
-- restarts: the stamp keeps the names of two files (or two runs) apart.
local counter = 0
local namespaces = {}
local stamp = h.unique()

-- new_ns() creates a namespace of its own for one case; delete_namespaces
-- (a teardown) removes every one this file created.
function M.new_ns()
  counter = counter + 1
  local ns = string.format('rt-%d-%s', counter, stamp)
  h.must(h.kubectl('create namespace ' .. ns), 'create namespace')
  namespaces[#namespaces + 1] = ns
  return ns
end

function M.delete_namespaces()
  for _, ns in ipairs(namespaces) do
    h.kubectl('delete namespace ' .. ns .. ' --wait=false')
  end
  namespaces = {}
end

-- get(kind, name, ns): the object as decoded JSON, or nil when it does not
-- exist (any other kubectl failure fails the case).
local function get(kind, name, ns)
  local r = h.kubectl(string.format('get %s %s -n %s -o json', kind, name, ns))
  if r.code ~= 0 then
    assert(h.has(r.err, 'NotFound') or h.has(r.err, 'not found'), r.err)
    return nil
  end
  return json.decode(r.out)
end

-- The ledger ConfigMap, or nil when it does not exist.
function M.get_ledger(ns) return get('configmap', M.LEDGER, ns) end

-- The runner's Lease, or nil when it does not exist.
function M.get_lease(ns) return get('lease', M.LEASE, ns) end

-- records(ns) -> {slug = decoded record (or the raw string when it is not
-- JSON)}, raw {slug = string}, the ConfigMap. nil when there is no ledger.
function M.records(ns)
  local cm = M.get_ledger(ns)
  if not cm then return nil end
  local out, raw = {}, {}
  for k, v in pairs(cm.data or {}) do
    if k:sub(1, 2) == 'm.' then
      local ok, d = pcall(json.decode, v)
      out[k:sub(3)] = ok and d or v
      raw[k:sub(3)] = v
    end
  end
  return out, raw, cm
end

-- make_ledger(ns, data [, name]): a ledger made the way an older chart made
-- it: kubectl create (no last-applied annotation), with data {key = string}.
function M.make_ledger(ns, data, name)
  local obj = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = name or M.LEDGER, namespace = ns } }
  if data and next(data) then obj.data = data end
  h.kcreate(obj, 'create ledger')
end

-- Names of the ConfigMaps the Lua migrations created (ran-*), as a set,
-- and how many start with each `ran-<name>-` (generateName markers).
function M.markers(ns)
  local list = h.kubectl_json('get configmaps -n ' .. ns)
  local set, gen = {}, {}
  for _, it in ipairs(list.items) do
    local n = it.metadata.name
    if n:sub(1, 4) == 'ran-' then
      set[n] = true
      local base = n:match('^ran%-(.+)%-[a-z0-9]+$')
      if base then gen[base] = (gen[base] or 0) + 1 end
    end
  end
  return set, gen
end

-- Lua body creating ConfigMap ran-<name> in ns.
function M.lua_marker(ns, name)
  return string.format("require('kube').create('configmaps', {metadata={name=%q}}, {namespace=%q})",
    'ran-' .. name, ns)
end

-- Lua body creating a ConfigMap named ran-<name>-xxxxx (one per execution).
function M.lua_gen_marker(ns, name)
  return string.format(
    "require('kube').create('configmaps', {metadata={generateName=%q}}, {namespace=%q})",
    'ran-' .. name .. '-', ns)
end

-- Lua body of a migration that proves it ran (ran-<slug>-xxxxx), holds a
-- mutual-exclusion marker (ConfigMap `running`, whose create fails while
-- another migration holds it) for secs seconds, and leaves an
-- `overlap-<slug>-` ConfigMap when another migration held it: what the lock
-- specs count with overlaps(ns).
function M.exclusive(ns, slug, secs)
  return string.format([[
local kube = require('kube')
local ns = %q
local ok = pcall(kube.create, 'configmaps', {metadata = {name = 'running'}}, {namespace = ns})
if not ok then kube.create('configmaps', {metadata = {generateName = 'overlap-%s-'}}, {namespace = ns}) end
kube.create('configmaps', {metadata = {generateName = 'ran-%s-'}}, {namespace = ns})
kube.sleep(%s)
if ok then kube.delete('configmaps', 'running', {namespace = ns}) end
]], ns, slug, slug, tostring(secs))
end

-- How many times two exclusive() migrations overlapped in ns.
function M.overlaps(ns)
  local n = 0
  for _, it in ipairs(h.kubectl_json('get configmaps -n ' .. ns).items) do
    if it.metadata.name:match('^overlap%-') then n = n + 1 end
  end
  return n
end

-- Shell body appending "<slug> <namespace>" to file.
function M.sh_append(file)
  return string.format('echo "$MIGRATION_SLUG $NAMESPACE" >> %s', h.q(file))
end

-- The Events in ns (the runner leaves them on the ledger).
function M.events(ns)
  return h.kubectl_json('get events -n ' .. ns).items
end

-- run(dir, ns, flags... [, {env=}]): `cozy-migrate run` on a tree.
function M.run(dir, ns, ...)
  return h.cozy('run', '--dir', dir, '--namespace', ns, ...)
end

-- plan(dir, ns, flags...): `cozy-migrate plan` on a tree.
function M.plan(dir, ns, ...)
  return h.cozy('plan', '--dir', dir, '--namespace', ns, ...)
end

-- status(dir, ns): `cozy-migrate status -o json`, which must succeed,
-- decoded: one entry per slug, in manifest order.
function M.status(dir, ns)
  return json.decode(h.must(h.cozy('status', '--dir', dir, '--namespace', ns, '-o', 'json'), 'status').out)
end

-- The shell command line of `cozy-migrate run` on dir and ns, with flags.
function M.cmd(dir, ns, flags)
  return string.format('%s run --dir %s --namespace %s %s', h.q(h.bin), h.q(dir), ns, flags)
end

-- The files a shell line left in dir, read on demand: files.o1 is the text
-- of dir/o1 ('' when it does not exist); files.dir is dir.
local function files(dir)
  return setmetatable({ dir = dir }, { __index = function(_, name) return h.slurp(dir .. '/' .. name) end })
end

-- until_line(file, word): a shell line that waits until file holds a line
-- with word (a migration's "start" marker), at most 30 s: what runs after
-- it starts from the migration, however long the runner took to get there.
function M.until_line(file, word)
  return string.format('for i in $(seq 600); do grep -qs %s %s && break; sleep 0.05; done', h.q(word), h.q(file))
end

-- until_configmap(ns, prefix): a shell line that waits until a ConfigMap
-- whose name starts with prefix exists in ns (a migration's ran- marker,
-- or one a script creates to say where it is), polling kubectl.
function M.until_configmap(ns, prefix)
  return string.format('until %s kubectl get configmaps -n %s -o name | grep -q %s; do sleep 0.1; done',
    h.q(h.testenv), ns, h.q('^configmap/' .. prefix))
end

-- alongside(base, delay, second): starts the runner command `base` in the
-- background (output in o1/e1, pid in pid, exit code in r1), runs the shell
-- snippet `second` after `delay` seconds ($p is the first runner's pid) in
-- the same directory, waits for the first, and returns those files.
function M.alongside(base, delay, second)
  local dir = h.tmpdir()
  h.run(string.format('cd %s && { %s >o1 2>e1 & p=$!; echo $p >pid; sleep %s; %s; wait $p; echo $? >r1; }',
    h.q(dir), base, delay, second))
  return files(dir)
end

-- together(a, b): starts the runner commands a and b at once, waits for both
-- and returns their files: o1/e1/r1 of a, o2/e2/r2 of b.
function M.together(a, b)
  local dir = h.tmpdir()
  h.must(h.run(string.format(
    'cd %s && { ( %s >o1 2>e1; echo $? >r1 ) & ( %s >o2 2>e2; echo $? >r2 ) & wait; }',
    h.q(dir), a, b)))
  return files(dir)
end

return M
