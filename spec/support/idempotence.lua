-- Proves a migration safe to run twice, against the cluster in KUBECONFIG:
-- run it through `cozy-migrate exec` (the runner's supervised child), take a
-- snapshot of every listable object's resourceVersion, run it again, and
-- list what moved. Leases and Events are left out: the apiserver renews its
-- own leases on a timer, and a migration never owns either.
local h = require('support.helpers')
local json = require('json')

local M = {}

local SKIP = { events = true, ['events.events.k8s.io'] = true, ['leases.coordination.k8s.io'] = true }

-- The script next to a spec at spec/migrations/<slug>_spec.lua.
function M.script_path(source, tier, slug)
  local spec = source:gsub('^@', '')
  local root = spec:match('^(.*)/spec/migrations/[^/]+$') or '.'
  return root .. '/migrations/' .. tier .. '/' .. slug .. '.lua'
end

-- exec(slug, file) -> the outcome JSON of `cozy-migrate exec`, and the raw result.
function M.exec(slug, file)
  local res = h.cozy('exec', slug, file)
  local last = res.out:match('([^\n]*)\n?$')
  local ok, out = pcall(json.decode, last or '')
  assert(ok and type(out) == 'table', 'cozy-migrate exec printed no outcome:\n' .. res.out .. res.err)
  return out, res
end

function M.snapshot()
  local types = {}
  for name in h.must(h.kubectl('api-resources --verbs=list -o name')).out:gmatch('[^\n]+') do
    if not SKIP[name] then types[#types + 1] = name end
  end
  local list = json.decode(h.must(h.kubectl('get ' .. table.concat(types, ',') .. ' -A -o json')).out)
  local snap = {}
  for _, o in ipairs(list.items or {}) do
    local md = o.metadata or {}
    local key = string.format('%s %s %s/%s', o.apiVersion, o.kind, md.namespace or '', md.name or '')
    snap[key] = md.resourceVersion
  end
  return snap
end

-- changes(before, after) -> sorted list of "created|changed|deleted KEY".
function M.changes(before, after)
  local out = {}
  for k, rv in pairs(after) do
    if before[k] == nil then out[#out + 1] = 'created ' .. k
    elseif before[k] ~= rv then out[#out + 1] = 'changed ' .. k end
  end
  for k in pairs(before) do
    if after[k] == nil then out[#out + 1] = 'deleted ' .. k end
  end
  table.sort(out)
  return out
end

-- second_run_changes(slug, file): runs the migration once more and returns
-- what that run changed (an empty list for an idempotent migration).
function M.second_run_changes(slug, file)
  local before = M.snapshot()
  local out = M.exec(slug, file)
  assert(out.outcome == 'ok', 'the second run failed: ' .. tostring(out.message))
  return M.changes(before, M.snapshot())
end

return M
