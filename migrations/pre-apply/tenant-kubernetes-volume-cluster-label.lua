-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=10m
-- cozystack-migration: requires=tenant-kubernetes-pvc-cluster-label
--
-- The port of legacy migration 5 (5 -> 6), same effect: what the port of 4
-- (tenant-kubernetes-pvc-cluster-label) does for a tenant Kubernetes
-- cluster's PersistentVolumeClaims, again (a claim made since has no label
-- yet), and the same for the DataVolume of each volume (CDI's, named as
-- its claim): the label cluster.x-k8s.io/cluster-name with the tenant
-- cluster's name (the Kamaji admin kubeconfig Secret's label
-- kamaji.clastix.io/name). A volume without a claim or a DataVolume of its
-- name here is left alone; where CDI is not installed there are no
-- DataVolumes to label. A tenant cluster that does not answer is skipped
-- and said so, as the original went on past it. The clusters are worked
-- on together (fleet.clusters, up to --concurrency at once); one whose
-- work fails does not stop the others, and the migration then fails
-- naming it.
local kube = require('kube')
local fleet = require('fleet')
local log = require('log')

local SELECTOR = 'kamaji.clastix.io/project=kamaji,kamaji.clastix.io/component=admin-kubeconfig'
local NAME_LABEL = 'kamaji.clastix.io/name'
local LABEL = 'cluster.x-k8s.io/cluster-name'
local DATAVOLUMES = 'datavolumes.cdi.kubevirt.io'

local resources = { 'persistentvolumeclaims' }
if kube.has_resource(DATAVOLUMES) then
  resources[#resources + 1] = DATAVOLUMES
else
  log.info('%s is not served: only claims are labelled', DATAVOLUMES)
end

local function label(resource, ns, name, cluster)
  local obj = kube.get(resource, name, { namespace = ns })
  if obj == nil then return false end
  if (obj.metadata.labels or {})[LABEL] == cluster then return false end
  kube.patch(resource, name, { metadata = { labels = { [LABEL] = cluster } } }, { namespace = ns })
  log.info('%s %s/%s labelled %s=%s', resource, ns, name, LABEL, cluster)
  return true
end

local skipped = {}
fleet.clusters({ selector = SELECTOR }, function(ref, tenant, err)
  local cluster = ref.labels[NAME_LABEL]
  if cluster == nil or cluster == '' then
    log.warn('%s: no label %s, skipped', ref.cluster, NAME_LABEL)
    return false
  end
  if not tenant then
    skipped[#skipped + 1] = ref.cluster
    log.warn('%s: skipped: %s', ref.cluster, tostring(err))
    return false
  end
  local changed = false
  for pv in tenant.list('persistentvolumes') do
    for _, resource in ipairs(resources) do
      changed = label(resource, ref.namespace, pv.metadata.name, cluster) or changed
    end
  end
  return changed
end)
if #skipped > 0 then
  table.sort(skipped)
  log.warn('tenant clusters skipped (they did not answer): %s', table.concat(skipped, ', '))
end
