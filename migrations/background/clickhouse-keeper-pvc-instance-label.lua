-- cozystack-migration: on-error=warn
-- cozystack-migration: timeout=10m
--
-- The Keeper volumes are to be found by app.kubernetes.io/instance=<release>
-- like the rest of the release, a label the Keeper operator did not put on
-- the PVCs it created. Keeper installation "<release>-keeper" names
-- its PVCs "default-chk-<release>-keeper-<cluster>-<shard>-<replica>"; each
-- such PVC in its namespace gets the label. A PVC whose name also begins
-- with the prefix of a longer-named installation in the same namespace
-- belongs to that one (otherwise two installations would relabel it back and
-- forth on every run).
local kube = require('kube')
local fleet = require('fleet')
local log = require('log')

local RESOURCE = 'clickhousekeeperinstallations.clickhouse-keeper.altinity.com'
local LABEL = 'app.kubernetes.io/instance'

if not kube.has_resource(RESOURCE) then
  log.info('%s is not served: nothing to do', RESOURCE)
  return
end

local function prefix(chk_name) return 'default-chk-' .. chk_name .. '-' end

local function starts(s, p) return s:sub(1, #p) == p end

-- namespace -> names of every Keeper installation in it
local installations = {}
for chk in kube.list(RESOURCE, { all_namespaces = true }) do
  local ns = chk.metadata.namespace
  installations[ns] = installations[ns] or {}
  table.insert(installations[ns], chk.metadata.name)
end

-- owner(ns, pvc_name) -> the installation with the longest prefix of pvc_name
local function owner(ns, pvc_name)
  local best
  for _, name in ipairs(installations[ns] or {}) do
    if starts(pvc_name, prefix(name)) and (best == nil or #name > #best) then best = name end
  end
  return best
end

fleet.each(RESOURCE, {}, function(chk)
  local name, ns = chk.metadata.name, chk.metadata.namespace
  local release = name:match('^(.+)%-keeper$')
  if not release then return false end
  local pvcs = fleet.each('persistentvolumeclaims', { namespace = ns }, function(pvc)
    local pvc_name = pvc.metadata.name
    if not starts(pvc_name, prefix(name)) or owner(ns, pvc_name) ~= name then return false end
    if (pvc.metadata.labels or {})[LABEL] == release then return false end
    kube.patch('persistentvolumeclaims', pvc_name, { metadata = { labels = { [LABEL] = release } } },
      { namespace = ns })
    log.info('%s/%s: labelled %s=%s', ns, pvc_name, LABEL, release)
    return true
  end)
  return pvcs.changed > 0
end)
