-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=5m
--
-- The redis operator this release installs acts on the RedisFailovers of its
-- operator group, named by a label: every RedisFailover gets the label, or
-- no operator would manage it after the upgrade. An empty redis or sentinel
-- image is left to the operator's default, which may change with the
-- operator; it is pinned to redis:6.2.6-alpine so that the operator change
-- alone does not roll Redis to another version. An image someone chose is
-- theirs and is never touched.
local kube = require('kube')
local fleet = require('fleet')
local json = require('json')
local log = require('log')

local RESOURCE = 'redisfailovers.databases.spotahome.com'
local LABEL = 'redis-failover.freshworks.com/operator-group'
local GROUP = 'cozystack'
local IMAGE = 'redis:6.2.6-alpine'

if not kube.has_resource(RESOURCE) then
  log.info('%s is not served: nothing to do', RESOURCE)
  return
end

local function empty(v)
  return v == nil or v == json.null or v == ''
end

fleet.each(RESOURCE, {}, function(rf)
  local patch = {}
  if (rf.metadata.labels or {})[LABEL] ~= GROUP then
    patch.metadata = { labels = { [LABEL] = GROUP } }
  end
  local spec = type(rf.spec) == 'table' and rf.spec or {}
  for _, part in ipairs({ 'redis', 'sentinel' }) do
    local s = spec[part]
    if type(s) ~= 'table' or empty(s.image) then
      patch.spec = patch.spec or {}
      patch.spec[part] = { image = IMAGE }
    end
  end
  if next(patch) == nil then return false end
  kube.patch(RESOURCE, rf.metadata.name, patch, { namespace = rf.metadata.namespace })
  return true
end)
