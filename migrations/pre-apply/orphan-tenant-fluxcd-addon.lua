-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=5m
--
-- The HelmReleases of the tenant Kubernetes clusters' Flux addon (the two
-- charts below) leave the platform, but what they installed must stay in
-- the tenant clusters. Deleting the HelmReleases outright would let
-- helm-controller uninstall it, so each one is orphaned instead (suspended,
-- finalizers removed, deleted): the release object goes, its workloads stay.
local kube = require('kube')
local fleet = require('fleet')
local flux = require('flux')
local log = require('log')

local CHARTS = {
  ['cozystack-kubernetes-application-kubevirt-kubernetes-fluxcd'] = true,
  ['cozystack-kubernetes-application-kubevirt-kubernetes-fluxcd-operator'] = true,
}

if not kube.has_resource(flux.RESOURCE) then
  log.info('%s is not served: nothing to do', flux.RESOURCE)
  return
end

fleet.each(flux.RESOURCE, {}, function(hr)
  local ref = type(hr.spec) == 'table' and hr.spec.chartRef
  if type(ref) ~= 'table' or not CHARTS[ref.name] then return false end
  return flux.orphan(hr.metadata.name, hr.metadata.namespace)
end)
