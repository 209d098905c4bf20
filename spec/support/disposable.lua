-- Whether the cluster the specs would run against says it is disposable,
-- asked once per cluster and run before the harness sends it anything.
--
-- Specs create and delete namespaces, CRDs and policies, and the migrations
-- they run change whatever they match, cluster-wide: pointed at a cluster
-- someone cares about they would do that there. So the harness runs only
-- against a cluster that says it is disposable, by the ConfigMap
-- kube-system/cozy-migrate-disposable labelled cozy-migrate.spec/disposable
-- ("true"). kube-system because a right in one namespace cannot forge it
-- there. Who writes it:
--   - tools/testenv, when it starts (this repository's local apiserver);
--   - the harness itself on a kind cluster, recognised by its nodes (every
--     node's providerID is kind://..., which only kind sets);
--   - the harness on `cozy-migrate spec --i-own-this-cluster`, once: the
--     operator's own word for any other cluster.
-- Deleting the ConfigMap takes the word back. Anything else is refused with
-- one line naming the context and server and these three ways.
local h = require('support.helpers')
local json = require('json')

local M = {}

M.NAMESPACE = 'kube-system'
M.NAME = 'cozy-migrate-disposable'
M.LABEL = 'cozy-migrate.spec/disposable'

local function first_line(s)
  return (tostring(s or ''):match('[^\n]+') or ''):gsub('%s+$', '')
end

-- The verdicts of this run, by kubeconfig path: kept on the run's table so
-- every spec file (each insulated by busted) shares them.
local function verdicts()
  local run = h.this_run()
  run.verdicts = run.verdicts or {}
  return run.verdicts
end

-- where(kubeconfig) -> context, server (as kubectl would use them) | nil, err
function M.where(kubeconfig)
  local r = h.kc_raw('config view --minify -o json', kubeconfig)
  if r.code ~= 0 then return nil, first_line(r.err) end
  local ok, v = pcall(json.decode, r.out)
  if not ok or type(v) ~= 'table' then return nil, 'kubectl config view printed no JSON' end
  local c = type(v.clusters) == 'table' and v.clusters[1] or {}
  return tostring(v['current-context'] or '?'), tostring((c.cluster or {}).server or '?')
end

-- marker(kubeconfig) -> true, reason | false | nil, err (unreachable)
local function marker(kubeconfig)
  local r = h.kc_raw(string.format('get configmap %s -n %s --ignore-not-found -o json', M.NAME, M.NAMESPACE),
    kubeconfig)
  if r.code ~= 0 then return nil, first_line(r.err) end
  if r.out:match('^%s*$') then return false end
  local cm = json.decode(r.out)
  local meta = cm.metadata or {}
  if (meta.labels or {})[M.LABEL] ~= 'true' or meta.deletionTimestamp then return false end
  return true, (cm.data or {}).reason or 'marked disposable'
end

-- kind_nodes(kubeconfig) -> the nodes' providerIDs when every node is
-- kind's (and there is one), else nil
local function kind_nodes(kubeconfig)
  local r = h.kc_raw('get nodes -o json', kubeconfig)
  if r.code ~= 0 then return nil end
  local items = (json.decode(r.out) or {}).items or {}
  if #items == 0 then return nil end
  local ids = {}
  for _, n in ipairs(items) do
    local id = type(n.spec) == 'table' and n.spec.providerID
    if type(id) ~= 'string' or id:sub(1, 7) ~= 'kind://' then return nil end
    ids[#ids + 1] = id
  end
  return ids
end

-- mark(kubeconfig, reason) creates the marker: true | nil, err
function M.mark(kubeconfig, reason)
  local f = h.write(os.tmpname() .. '.json', json.encode({
    apiVersion = 'v1', kind = 'ConfigMap',
    metadata = { name = M.NAME, namespace = M.NAMESPACE, labels = { [M.LABEL] = 'true' } },
    data = { reason = reason, at = os.date('!%Y-%m-%dT%H:%M:%SZ') },
  }))
  local r = h.kc_raw('create -f ' .. h.q(f), kubeconfig)
  os.remove(f)
  if r.code ~= 0 and not r.err:find('AlreadyExists', 1, true) then return nil, first_line(r.err) end
  return true
end

-- judge(kubeconfig) -> true, why | false, why: asks the cluster (no cache).
function M.judge(kubeconfig)
  local ctx, server = M.where(kubeconfig)
  if not ctx then return false, 'cannot read the kubeconfig: ' .. tostring(server) end
  local is, reason = marker(kubeconfig)
  if is == nil then
    return false, string.format('cannot reach context %q (%s) to see whether it is disposable: %s', ctx,
      server, reason)
  end
  if is then return true, reason end
  local because
  if h.this_run().own_cluster then
    because = string.format('declared by cozy-migrate spec --i-own-this-cluster (context %s, %s)', ctx, server)
  else
    local ids = kind_nodes(kubeconfig)
    if ids then because = 'recognised as a kind cluster: nodes ' .. table.concat(ids, ', ') end
  end
  if because then
    local ok, err = M.mark(kubeconfig, because)
    if not ok then
      return false, string.format('context %q (%s) is %s, but marking it disposable failed: %s', ctx, server,
        because, err)
    end
    return true, because
  end
  return false, string.format('context %q (%s) does not say it is disposable, so no spec runs against ' ..
    'it: the harness runs only against a testenv (tools/testenv marks itself), a kind cluster (recognised ' ..
    'by its nodes, providerID kind://) or a cluster marked once with `cozy-migrate spec ' ..
    '--i-own-this-cluster` (it writes ConfigMap %s/%s; specs create and delete namespaces, CRDs and ' ..
    'objects there)', ctx, server, M.NAMESPACE, M.NAME)
end

-- verdict([kubeconfig]) -> ok, why, judged once per kubeconfig and run.
function M.verdict(kubeconfig)
  kubeconfig = kubeconfig or os.getenv('KUBECONFIG') or ''
  local v = verdicts()[kubeconfig]
  if not v then
    local ok, why = M.judge(kubeconfig ~= '' and kubeconfig or nil)
    v = { ok = ok, why = why }
    verdicts()[kubeconfig] = v
  end
  return v.ok, v.why
end

-- preflight() -> ok, why: what `cozy-migrate spec` asks before any file.
function M.preflight()
  local ok, res, why = pcall(M.verdict)
  if not ok then return false, tostring(res) end
  return res, why
end

-- derived(path) -> path: a kubeconfig the harness wrote for the cluster in
-- $KUBECONFIG (another identity, cluster.kubeconfig{}; a proxy in front of
-- it): it shares that cluster's verdict, since it may hold no right to read
-- the mark, or fail on purpose.
function M.derived(path)
  local run = h.this_run()
  run.derived = run.derived or {}
  run.derived[path] = true
  return path
end

-- assert([kubeconfig]) raises the refusal (one line) unless the cluster is
-- disposable. A kubeconfig derived() from $KUBECONFIG, or for the same
-- server, shares its verdict.
function M.assert(kubeconfig)
  local main = os.getenv('KUBECONFIG') or ''
  if kubeconfig and (h.this_run().derived or {})[kubeconfig] then kubeconfig = nil end
  if kubeconfig and kubeconfig ~= main and main ~= '' then
    local _, server = M.where(kubeconfig)
    local _, main_server = M.where(main)
    if server and server == main_server then kubeconfig = nil end
  end
  local ok, why = M.verdict(kubeconfig)
  if not ok then error(why, 0) end
  return why
end

return M
