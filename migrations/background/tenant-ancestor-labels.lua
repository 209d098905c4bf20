-- cozystack-migration: on-error=warn
-- cozystack-migration: timeout=10m
--
-- One label selects a tenant and everything below it: the namespace
-- "tenant-a-b" carries tenant.cozystack.io/tenant-root,
-- tenant.cozystack.io/tenant-a and tenant.cozystack.io/tenant-a-b (empty
-- values), so the selector "tenant.cozystack.io/tenant-a" matches tenant-a
-- and each of its descendants. This stamps the tenant namespaces that exist.
-- tenant-root is the root itself and is left as it is. A namespace that
-- starts with "tenant-" but is no tenant's (an empty segment, as in
-- "tenant-a--b": tenant names are alphanumeric) has no ancestors to name;
-- it is left alone with a warning in the log, since failing on it would
-- fail this migration on every run for a namespace no tenant will ever own.
local kube = require('kube')
local fleet = require('fleet')
local log = require('log')

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
  if not want then
    log.warn('%s; left alone', why)
    return false
  end
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
