-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=10m
--
-- The port of legacy migration 4 (4 -> 5), same effect: a tenant Kubernetes
-- cluster's volumes are PersistentVolumeClaims in its namespace of the
-- management cluster, named as the PersistentVolumes the tenant cluster
-- sees. Each such claim gets the label cluster.x-k8s.io/cluster-name with
-- its cluster's name (the Kamaji admin kubeconfig Secret's label
-- kamaji.clastix.io/name), so Cluster API's tooling finds it. A
-- PersistentVolume without a claim of its name here is not the platform's:
-- left alone. A tenant cluster that does not answer is skipped and said
-- so, as the original went on past it. The clusters are worked on
-- together (fleet.clusters, up to --concurrency at once); one whose work
-- fails does not stop the others, and the migration then fails naming it.
local kube = require('kube')
local fleet = require('fleet')
local log = require('log')

local SELECTOR = 'kamaji.clastix.io/project=kamaji,kamaji.clastix.io/component=admin-kubeconfig'
local NAME_LABEL = 'kamaji.clastix.io/name'
local LABEL = 'cluster.x-k8s.io/cluster-name'

local function label(ns, name, cluster)
  local pvc = kube.get('persistentvolumeclaims', name, { namespace = ns })
  if pvc == nil then return false end
  if (pvc.metadata.labels or {})[LABEL] == cluster then return false end
  kube.patch('persistentvolumeclaims', name, { metadata = { labels = { [LABEL] = cluster } } },
    { namespace = ns })
  log.info('persistentvolumeclaim %s/%s labelled %s=%s', ns, name, LABEL, cluster)
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
    changed = label(ref.namespace, pv.metadata.name, cluster) or changed
  end
  return changed
end)
if #skipped > 0 then
  table.sort(skipped)
  log.warn('tenant clusters skipped (they did not answer): %s', table.concat(skipped, ', '))
end
