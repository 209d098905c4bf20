-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=5m
--
-- SeaweedFS's PostgreSQL cluster (CNPG Cluster "<instance>-db") moves out of
-- the "...-system" release that created it into a release of its own,
-- "<instance>-db". Helm installs the new release over the existing object
-- only if the object already names it as owner, and the old release, no
-- longer rendering the object, would delete it (and the database with it)
-- unless the object says keep. So each such Cluster is handed over to its
-- new release with helm.sh/resource-policy=keep; one already handed over
-- without keep gets keep. A Cluster that any other release owns, or none,
-- is someone else's and is left alone.
local kube = require('kube')
local fleet = require('fleet')
local helm = require('helm')
local log = require('log')

local RESOURCE = 'clusters.postgresql.cnpg.io'

if not kube.has_resource(RESOURCE) then
  log.info('%s is not served: nothing to do', RESOURCE)
  return
end

fleet.each(RESOURCE, {}, function(c)
  local name = c.metadata.name
  if not name:match('^.+%-db$') then return false end
  local release = helm.owner(c)
  if release ~= name and not (release and release:match('%-system$')) then return false end
  local _, changed = helm.adopt(RESOURCE, c, { release = name, keep = true })
  if changed then log.info('%s/%s: now owned by release %s (was %s)', c.metadata.namespace, name, name, release) end
  return changed
end)
