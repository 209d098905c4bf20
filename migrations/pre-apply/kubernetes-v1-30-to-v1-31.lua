-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=5m
--
-- Tenant Kubernetes clusters still on v1.30 move to v1.31: the next minor,
-- the only step Kubernetes supports. The patch tests the version it replaces, so
-- a cluster someone moved elsewhere in the meantime is never downgraded; it
-- fails instead, and the next run sees its new version and leaves it be.
local kube = require('kube')
local fleet = require('fleet')
local log = require('log')

local RESOURCE = 'kuberneteses.apps.cozystack.io'
local FROM, TO = 'v1.30', 'v1.31'

if not kube.has_resource(RESOURCE) then
  log.info('%s is not served: nothing to do', RESOURCE)
  return
end

fleet.each(RESOURCE, {}, function(k)
  if not (type(k.spec) == 'table' and k.spec.version == FROM) then return false end
  kube.patch(RESOURCE, k.metadata.name, {
    { op = 'test', path = '/spec/version', value = FROM },
    { op = 'replace', path = '/spec/version', value = TO },
  }, { namespace = k.metadata.namespace, type = 'json' })
  log.info('%s/%s: %s -> %s', k.metadata.namespace, k.metadata.name, FROM, TO)
  return true
end)
