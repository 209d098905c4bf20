-- helm: move objects between Helm releases the way `helm install` adopts
-- them, tell which release owns an object, and forget a release's storage.
--
-- Helm adopts an existing object into a release only when it carries the
-- release's name and namespace annotations and the managed-by=Helm label;
-- otherwise the install fails with "invalid ownership metadata". These
-- helpers write exactly that metadata, in one merge patch of only what
-- differs, and send nothing when the object is already so (a migration that
-- runs twice must not move any resourceVersion).

local kube = require('kube')
local core = require('kube.core')

local M = {}

M.RELEASE_NAME = 'meta.helm.sh/release-name'
M.RELEASE_NAMESPACE = 'meta.helm.sh/release-namespace'
M.MANAGED_BY = 'app.kubernetes.io/managed-by'
M.RESOURCE_POLICY = 'helm.sh/resource-policy'

local function fail(reason, message, code)
  error(core.make_error { code = code or 0, reason = reason, message = message }, 0)
end

local function nonempty(v)
  return type(v) == 'string' and v ~= ''
end

-- owner(obj) -> release, release_namespace | nil
-- The release named by the object's annotations; release_namespace may be nil
-- when only the name is set (Helm itself would refuse such an object).
function M.owner(obj)
  local ann = type(obj) == 'table' and obj.metadata and obj.metadata.annotations
  if type(ann) ~= 'table' or not nonempty(ann[M.RELEASE_NAME]) then return nil end
  local ns = ann[M.RELEASE_NAMESPACE]
  return ann[M.RELEASE_NAME], nonempty(ns) and ns or nil
end

-- patch_for(obj, release, release_namespace, keep) -> the merge patch that
-- makes obj owned by the release, holding only what differs; nil when obj
-- is already so.
function M.patch_for(obj, release, release_ns, keep)
  local meta = obj.metadata or {}
  local ann, labels = meta.annotations or {}, meta.labels or {}
  local want = { [M.RELEASE_NAME] = release, [M.RELEASE_NAMESPACE] = release_ns,
    [M.RESOURCE_POLICY] = keep and 'keep' or nil }
  local patch_ann, patch_labels
  for k, v in pairs(want) do
    if ann[k] ~= v then
      patch_ann = patch_ann or {}
      patch_ann[k] = v
    end
  end
  if labels[M.MANAGED_BY] ~= 'Helm' then patch_labels = { [M.MANAGED_BY] = 'Helm' } end
  if not patch_ann and not patch_labels then return nil end
  return { metadata = { annotations = patch_ann, labels = patch_labels } }
end

-- adopt(resource, name_or_object, opts) -> object, changed
-- Given a name, reads the object first; given the object itself (from
-- kube.list or fleet.each), sends no request at all when it is already so.
-- opts.release (required): the release that will own the object.
-- opts.namespace: the object's namespace (default: the object's own).
-- opts.release_namespace: the release's namespace; defaults to the object's
--   namespace, and is required for cluster-scoped objects.
-- opts.keep: also annotate helm.sh/resource-policy=keep, so that Helm leaves
--   the object in place when the release is uninstalled or the object leaves
--   the chart. An existing keep is never removed.
-- Raises a NotFound error value (code 404) when the object does not exist,
-- and the apiserver's error when the patch is refused.
function M.adopt(resource, name, opts)
  opts = opts or {}
  if not nonempty(opts.release) then
    error('helm.adopt: opts.release (the release name) is required', 2)
  end
  local obj = name
  if type(name) == 'table' then
    name = obj.metadata and obj.metadata.name
  end
  if not nonempty(name) then error('helm.adopt: an object name or an object is required', 2) end
  local ns = opts.namespace or (type(obj) == 'table' and obj.metadata.namespace) or nil
  local release_ns = opts.release_namespace or ns
  if not nonempty(release_ns) then
    error('helm.adopt: opts.release_namespace is required for an object outside a namespace', 2)
  end
  if type(obj) ~= 'table' then
    obj = kube.get(resource, name, { namespace = ns })
    if obj == nil then
      fail('NotFound', string.format('helm.adopt: %s "%s"%s not found', resource, name,
        ns and (' in namespace ' .. ns) or ''), 404)
    end
  end
  local patch = M.patch_for(obj, opts.release, release_ns, opts.keep)
  if not patch then return obj, false end
  return kube.patch(resource, name, patch, { namespace = ns }), true
end

-- purge_release(name, namespace) -> number of Secrets deleted
-- Deletes the Helm storage Secrets of release `name` (labels owner=helm,
-- name=<release>; one per revision) so that the next install of that name
-- starts from nothing. A release without storage is not an error.
function M.purge_release(name, namespace)
  if not nonempty(name) or not nonempty(namespace) then
    error('helm.purge_release: a release name and its namespace are required', 2)
  end
  local deleted = 0
  for s in kube.list('secrets', { namespace = namespace,
    label_selector = { owner = 'helm', name = name } }) do
    if kube.delete('secrets', s.metadata.name, { namespace = namespace, ignore_not_found = true }) then
      deleted = deleted + 1
    end
  end
  return deleted
end

return M
