-- cozystack-migration: on-error=warn
-- cozystack-migration: timeout=10m
--
-- One label selects a tenant and everything below it: the namespace
-- "tenant-a-b" carries tenant.cozystack.io/tenant-root,
-- tenant.cozystack.io/tenant-a and tenant.cozystack.io/tenant-a-b (empty
-- values), so the selector "tenant.cozystack.io/tenant-a" matches tenant-a
-- and each of its descendants. This stamps the tenant namespaces that exist.
-- tenant-root is the root itself and is left as it is. A namespace that starts with "tenant-" but is not a
-- tenant name (an empty segment, as in "tenant-a--b") cannot be labelled
-- this way and is reported, not skipped.
local kube = require('kube')
local fleet = require('fleet')

local PREFIX = 'tenant.cozystack.io/'

-- labels(name) -> the labels tenant namespace `name` must carry, or nil, why
local function labels(name)
  local rest = name:match('^tenant%-(.*)$')
  local want = { [PREFIX .. 'tenant-root'] = '' }
  local path = 'tenant'
  for segment in (rest .. '-'):gmatch('([^-]*)-') do
    if not segment:match('^[a-z0-9]+$') then
      return nil, string.format('"%s" is not a tenant name (tenant-<name>[-<name>...])', name)
    end
    path = path .. '-' .. segment
    want[PREFIX .. path] = ''
  end
  return want
end

fleet.each('namespaces', {}, function(ns)
  local name = ns.metadata.name
  if name == 'tenant-root' or not name:match('^tenant%-') then return false end
  local want, why = labels(name)
  if not want then error(why, 0) end
  local have, patch = ns.metadata.labels or {}, nil
  for k, v in pairs(want) do
    if have[k] ~= v then
      patch = patch or {}
      patch[k] = v
    end
  end
  if not patch then return false end
  kube.patch('namespaces', name, { metadata = { labels = patch } })
  return true
end)
