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
-- so, as the original went on past it.
local kube = require('kube')
local log = require('log')

local SELECTOR = 'kamaji.clastix.io/project=kamaji,kamaji.clastix.io/component=admin-kubeconfig'
local NAME_LABEL = 'kamaji.clastix.io/name'
local LABEL = 'cluster.x-k8s.io/cluster-name'

local function label(ns, name, cluster)
  local pvc = kube.get('persistentvolumeclaims', name, { namespace = ns })
  if pvc == nil then return end
  if (pvc.metadata.labels or {})[LABEL] == cluster then return end
  kube.patch('persistentvolumeclaims', name, { metadata = { labels = { [LABEL] = cluster } } },
    { namespace = ns })
  log.info('persistentvolumeclaim %s/%s labelled %s=%s', ns, name, LABEL, cluster)
end

local skipped = {}
for ref, tenant, err in kube.clusters { selector = SELECTOR } do
  local cluster = ref.labels[NAME_LABEL]
  if cluster == nil or cluster == '' then
    log.warn('%s: no label %s, skipped', ref.cluster, NAME_LABEL)
  elseif not tenant then
    skipped[#skipped + 1] = ref.cluster
    log.warn('%s: skipped: %s', ref.cluster, tostring(err))
  else
    for pv in tenant.list('persistentvolumes') do
      label(ref.namespace, pv.metadata.name, cluster)
    end
  end
end
if #skipped > 0 then
  log.warn('tenant clusters skipped (they did not answer): %s', table.concat(skipped, ', '))
end
