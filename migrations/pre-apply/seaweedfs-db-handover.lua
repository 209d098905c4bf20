-- cozystack-migration: on-error=abort
-- cozystack-migration: timeout=5m
--
-- The port of legacy migration 43 (adopt-seaweedfs-db-cluster) and of the
-- helper it shares with 53 (cozystack/cozystack,
-- packages/core/platform/images/migrations/migrations/lib/seaweedfs-db-adopt.sh
-- at 3c780acd417f086f8f18d040d0d7020ff55d3ba3), case by case.
--
-- SeaweedFS's filer metadata lives in the CNPG Cluster named seaweedfs-db
-- (that name whatever the SeaweedFS instance is called). The db split moved
-- it out of the "<instance>-system" Helm release into a release of its own,
-- "<instance>-db". Two things must hold before <instance>-system renders
-- again: release-name says <instance>-db, so that release adopts the
-- Cluster instead of failing Helm's ownership check; and
-- helm.sh/resource-policy=keep, so <instance>-system, whose chart no longer
-- renders it, does not delete it (CNPG would take the PVC, and the tenant's
-- S3 with it: data loss). Ownership is no proof of safety: a Cluster
-- already owned by <instance>-db may still need keep, so every Cluster
-- owned by either side of the split gets it.
--
-- For each Cluster named seaweedfs-db, in every namespace, read afresh:
--   no release-name            left alone, with a warning (nobody owns it)
--   <instance>-system          release-name <instance>-db and keep; the
--                              instance is what precedes -system, so foo-system
--                              hands over to foo-db; release-namespace and
--                              labels stay as they are (both releases live in
--                              the tenant namespace)
--   exactly "-system"          left alone, with a warning: no instance name
--   <anything>-db              keep, unless it is already keep
--   any other release          left alone, with a warning (not ours)
-- Not served (no CNPG): nothing to do. A Cluster gone between the scan and
-- the read: skipped. Every other error fails the migration (fails closed:
-- nothing is recorded, so it runs again). The original stops at its first
-- error; here the other Clusters are still protected first, then the
-- migration fails naming each one that was not.
local kube = require('kube')
local fleet = require('fleet')
local helm = require('helm')
local log = require('log')

local RESOURCE = 'clusters.postgresql.cnpg.io'
local NAME = 'seaweedfs-db'

if not kube.has_resource(RESOURCE) then
  log.info('%s is not served: nothing to do', RESOURCE)
  return
end

-- The instance of the split an owner belongs to ("foo" for foo-system and
-- foo-db), or nil (and why, to be logged) when the Cluster is left alone.
local function instance_of(ns, owner)
  if not owner then
    return nil, string.format('Cluster/%s in %s carries no %s: not Helm-managed, left alone; if this ' ..
      'tenant runs SeaweedFS, check by hand that its database is not about to be pruned', NAME, ns, helm.RELEASE_NAME)
  end
  local instance = owner:match('^(.*)%-system$')
  if instance == '' then
    return nil, string.format("Cluster/%s in %s is owned by a release named '%s', with no instance name: left alone",
      NAME, ns, owner)
  end
  instance = instance or owner:match('^(.*)%-db$')
  if instance then return instance end
  return nil, string.format("Cluster/%s in %s is owned by the unrelated release '%s': left alone", NAME, ns, owner)
end

fleet.each(RESOURCE, { field_selector = 'metadata.name=' .. NAME }, function(listed)
  local ns = listed.metadata.namespace
  local c = kube.get(RESOURCE, NAME, { namespace = ns })
  if c == nil then
    log.info('Cluster/%s in %s disappeared between the scan and the read: skipped', NAME, ns)
    return false
  end
  local owner = helm.owner(c)
  local instance, why = instance_of(ns, owner)
  if not instance then
    log.warn('%s', why)
    return false
  end
  -- <instance>-system hands over to <instance>-db; one <instance>-db owns
  -- already only gets keep. Release-namespace and labels stay as they are.
  -- <instance>-system lives on: its next upgrade, whose chart no longer
  -- renders the Cluster, honours the live keep (from_release = 'stays').
  local _, changed = helm.handover(RESOURCE, c, { from = instance .. '-system', to = instance .. '-db', keep = true,
    from_release = 'stays' })
  if not changed then
    log.info('Cluster/%s in %s is already handed over to %s and kept: nothing to do', NAME, ns, owner)
  elseif owner == instance .. '-system' then
    log.info('Cluster/%s in %s: handed over from %s to %s, kept', NAME, ns, owner, instance .. '-db')
  else
    log.info('Cluster/%s in %s: owned by %s, now kept (%s=keep)', NAME, ns, owner, helm.RESOURCE_POLICY)
  end
  return changed
end)
