-- Sets of ConfigMaps the fleet specs sweep (fleet_concurrency_spec,
-- fleet_pace_spec): each set is named, its objects SET-001... labelled
-- set=SET in the spec's own namespace with data.v = 'old'; a sweep is a
-- script with fleet, kube, json, core and NS, SET in scope; values() reads
-- back what each object's data.v became.
local h = require('support.helpers')

local M = {}

-- make(ns, set, n [, labels]) -> the names, in order; labels: more labels
-- for every object
function M.make(ns, set, n, labels)
  local items, names = {}, {}
  for i = 1, n do
    names[i] = string.format('%s-%03d', set, i)
    local l = { set = set }
    for k, v in pairs(labels or {}) do l[k] = v end
    items[i] = { apiVersion = 'v1', kind = 'ConfigMap',
      metadata = { name = names[i], namespace = ns, labels = l }, data = { v = 'old' } }
  end
  h.kcreate({ apiVersion = 'v1', kind = 'List', items = items }, 'configmaps')
  return names
end

-- sweep(ns, set, body, ...) -> h.kube_script's result; the last line body
-- prints is decoded into res.json
function M.sweep(ns, set, body, ...)
  return h.kube_script({ NS = ns, SET = set }, "local fleet = require('fleet')\n" .. body, ...)
end

-- values(ns, set) -> { [name] = data.v }
function M.values(ns, set)
  local got = {}
  for _, cm in ipairs(h.kubectl_json('get configmaps -n ' .. ns .. ' -l set=' .. set).items) do
    got[cm.metadata.name] = cm.data.v
  end
  return got
end

return M
