-- Builds migration trees on disk for specs: scripts with headers, the
-- order.d/ manifest, revoked and legacy-map. A fixture is data; the runner
-- reads it with the same loaders it uses on an image.
local h = require('support.helpers')

local M = {}

local function mkdir(p)
  assert(os.execute('mkdir -p ' .. h.q(p)))
end

-- tree{
--   batches = { { '00001-v1.0', { 'a', 'b retired' } }, ... },   -- order.d, in order
--   scripts = { a = { tier = 'pre-apply', on_error = 'abort', body = '...', header = '...' },
--               old = { shell = true, body = '...' } },
--   revoked = { 'x' } (default {}; false: no file), legacy = { { 1, 'old' } }, raw = { ['path'] = 'content' },
-- } -> dir
-- Shell scripts are legacy: numbered in legacy-map and listed in
-- 00000-legacy in that order (the runner refuses anything else). A spec
-- that gives neither `legacy` nor a raw legacy-map gets them from its
-- batches: the shell slugs in manifest order, moved to 00000-legacy.
local function legacy_from_batches(spec)
  local shell = {}
  for slug, s in pairs(spec.scripts or {}) do
    if s.shell then shell[slug] = true end
  end
  if not spec.batches or not next(shell) or spec.legacy ~= nil or
    (spec.raw and spec.raw['legacy-sh/legacy-map']) then
    return spec
  end
  local moved, batches = {}, {}
  for _, b in ipairs(spec.batches) do
    local kept = {}
    for _, line in ipairs(b[2]) do
      if shell[line:match('^(%S+)')] then moved[#moved + 1] = line else kept[#kept + 1] = line end
    end
    if b[1] == '00000-legacy' or #kept > 0 then batches[#batches + 1] = { b[1], kept } end
  end
  if #moved == 0 then return spec end
  if batches[1] and batches[1][1] == '00000-legacy' then
    for i = #moved, 1, -1 do table.insert(batches[1][2], 1, moved[i]) end
  else
    table.insert(batches, 1, { '00000-legacy', moved })
  end
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  out.batches, out.legacy = batches, {}
  for i, line in ipairs(moved) do out.legacy[i] = { i, line:match('^(%S+)') } end
  return out
end

function M.tree(spec)
  spec = legacy_from_batches(spec)
  local dir = h.tmpdir()
  mkdir(dir .. '/migrations/pre-apply')
  mkdir(dir .. '/migrations/background')
  mkdir(dir .. '/legacy-sh/lib')
  mkdir(dir .. '/stdlib')
  if spec.batches then
    mkdir(dir .. '/migrations/order.d')
    for _, b in ipairs(spec.batches) do
      h.write(dir .. '/migrations/order.d/' .. b[1], table.concat(b[2], '\n') .. '\n')
    end
  end
  for slug, s in pairs(spec.scripts or {}) do
    local path, prefix
    if s.shell then
      path, prefix = dir .. '/legacy-sh/' .. slug .. '.sh', '#'
    else
      path, prefix = dir .. '/migrations/' .. (s.tier or 'pre-apply') .. '/' .. slug .. '.lua', '--'
    end
    local header = s.header or (prefix .. ' cozystack-migration: on-error=' .. (s.on_error or 'abort') ..
      (s.timeout and ('\n' .. prefix .. ' cozystack-migration: timeout=' .. s.timeout) or ''))
    h.write(path, header .. '\n' .. (s.body or '') .. '\n')
  end
  -- A packaged tree always has one (empty: nothing revoked); revoked = false leaves it out.
  if spec.revoked ~= false then
    h.write(dir .. '/migrations/revoked', table.concat(spec.revoked or {}, '\n') .. '\n')
  end
  if spec.legacy then
    local lines = {}
    for _, e in ipairs(spec.legacy) do lines[#lines + 1] = e[1] .. ' ' .. e[2] end
    h.write(dir .. '/legacy-sh/legacy-map', table.concat(lines, '\n') .. '\n')
  end
  M.files(spec.raw or {}, dir)
  return dir
end

-- files({path = content} [, dir]): writes each file under dir (a fresh
-- scratch directory when nil), making its folders; returns dir.
function M.files(files, dir)
  dir = dir or h.tmpdir()
  for path, content in pairs(files) do
    local full = dir .. '/' .. path
    mkdir(full:match('^(.*)/[^/]*$'))
    h.write(full, content)
  end
  return dir
end

-- runs(plan): the slugs a plan (migrate.plan's) runs, in order.
function M.runs(plan)
  local out = {}
  for _, s in ipairs(plan.steps) do
    if s.kind == 'run' then out[#out + 1] = s.slug end
  end
  return out
end

-- A ledger data map from {slug = {state=..., ...}} (records as tables).
function M.ledger(records, version)
  local json = require('json')
  local data = {}
  for slug, r in pairs(records or {}) do
    data['m.' .. slug] = type(r) == 'string' and r or json.encode(r)
  end
  if version then data.version = tostring(version) end
  return data
end

return M
