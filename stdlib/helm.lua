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

-- handover_patch(obj, opts) -> patch | nil, err
-- What handover would send for obj as it is: the merge patch (without the
-- resourceVersion handover adds), nil when obj is already handed over, or
-- nil and an error value when handover refuses it (see handover).
function M.handover_patch(obj, opts)
  local meta = type(obj) == 'table' and type(obj.metadata) == 'table' and obj.metadata or {}
  local ann, labels = meta.annotations or {}, meta.labels or {}
  local owner, owner_ns = M.owner(obj)
  local want, patch_labels = {}, nil
  local function owned_by(release, ns)
    return owner == release and (ns == nil or owner_ns == ns)
  end
  if owner and owned_by(opts.to, opts.to_namespace) then
    -- already handed over: only keep may be missing
  elseif owner and owned_by(opts.from, opts.from_namespace) then
    want[M.RELEASE_NAME] = opts.to
    want[M.RELEASE_NAMESPACE] = opts.to_namespace
  elseif not owner and opts.unowned then
    -- nobody owns it: adopted into `to` as helm.adopt would
    local ns = opts.to_namespace or meta.namespace
    if not nonempty(ns) then
      error('helm.handover: opts.to_namespace is required to take an unowned object outside a namespace', 3)
    end
    want[M.RELEASE_NAME] = opts.to
    want[M.RELEASE_NAMESPACE] = ns
    if labels[M.MANAGED_BY] ~= 'Helm' then patch_labels = { [M.MANAGED_BY] = 'Helm' } end
  else
    local what = string.format('%s%s', meta.namespace and (meta.namespace .. '/') or '', meta.name or '?')
    local from = opts.from .. (opts.from_namespace and (' (namespace ' .. opts.from_namespace .. ')') or '')
    if not owner then
      return nil, core.make_error { code = 0, reason = 'NotOwned', object = what,
        message = string.format("helm.handover: %s is owned by no release, not by '%s': left as it is " ..
          '(opts.unowned = true takes it into %s)', what, from, opts.to) }
    end
    return nil, core.make_error { code = 0, reason = 'OwnedByAnother', object = what,
      owner = owner, owner_namespace = owner_ns,
      message = string.format("helm.handover: %s is owned by release '%s'%s, neither '%s' nor '%s': " ..
        'left as it is', what, owner, owner_ns and (' (namespace ' .. owner_ns .. ')') or '', from, opts.to) }
  end
  if opts.keep then want[M.RESOURCE_POLICY] = 'keep' end
  local patch_ann
  for k, v in pairs(want) do
    if ann[k] ~= v then
      patch_ann = patch_ann or {}
      patch_ann[k] = v
    end
  end
  if not patch_ann and not patch_labels then return nil end
  return { metadata = { annotations = patch_ann, labels = patch_labels } }
end

-- A patch that took place, as far as the server shows: every value sent is
-- on now (for a repeat whose first attempt landed and whose answer was lost).
local function holds(now, patch)
  local meta = type(now) == 'table' and now.metadata or {}
  for part, values in pairs(patch.metadata) do
    if part ~= 'resourceVersion' then
      for k, v in pairs(values) do
        if (meta[part] or {})[k] ~= v then return false end
      end
    end
  end
  return true
end

-- Release `from`'s storage (Helm's Secrets, one per revision) in ns: how
-- many revisions there are.
local function stored(release, ns)
  local n = 0
  for _ in kube.list('secrets', { namespace = ns, label_selector = { owner = 'helm', name = release } }) do
    n = n + 1
  end
  return n
end

local FROM_RELEASE = { purge = true, stays = true }

-- handover(resource, name_or_object, opts) -> object, changed
-- Moves an object from Helm release opts.from to release opts.to, the
-- platform's commonest legacy step ("release A's annotations to release B's,
-- only if A owns it"):
--   owned by `from`   release-name becomes `to` (release-namespace too when
--                     opts.to_namespace is given; otherwise both releases
--                     live in one namespace and it stays), plus keep
--   owned by `to`     already handed over: only a missing keep is added
--   owned by nobody   with opts.unowned, adopted into `to` as helm.adopt
--                     does (name, namespace, managed-by label); otherwise
--                     refused, reason NotOwned
--   owned by another  refused, reason OwnedByAnother (err.owner names it)
-- A refusal is raised as an error value (code 0, reason, message naming the
-- object and its owner) before any write: a migration that must go on
-- branches on err.reason under pcall. opts.from_namespace: `from` owns the
-- object only when release-namespace is that too. opts.keep: also
-- helm.sh/resource-policy=keep (an existing keep is never removed).
-- opts.namespace: the object's namespace when a name is given.
-- opts.keep and release `from` still stored: `helm uninstall` of `from`
-- (or its HelmRelease deleted) deletes every object its stored manifest
-- lists, this one included, whatever the live object says (Helm reads keep
-- from the manifest it stored, not from the object), so a hand-over with
-- keep first asks what becomes of `from` (its storage looked up in
-- opts.from_namespace, else the object's namespace):
--   opts.from_release = 'purge'  `from` ends here: after the patch its
--                                storage is deleted (helm.purge_release),
--                                so its removal deletes nothing; hand over
--                                everything it owns (the others stay, owned
--                                by no stored release)
--   opts.from_release = 'stays'  `from` lives on and drops the object from
--                                its chart in its next upgrade, where Helm
--                                honours the live keep
--   neither                      refused before any write, reason
--                                ReleaseStillStored, naming both ways
-- One merge patch of only what differs, carrying the resourceVersion that
-- was judged, so the server applies it only to the object as read: if the
-- object changed in between (a Conflict), it is read again and judged again
-- (up to 5 times). Given the object itself, it sends no request at all
-- when the object is already handed over. A missing object raises NotFound
-- (code 404); a refused patch, the apiserver's error.
function M.handover(resource, name, opts)
  opts = opts or {}
  for _, k in ipairs({ 'from', 'to' }) do
    if not nonempty(opts[k]) then
      error('helm.handover: opts.' .. k .. ' (a release name) is required', 2)
    end
  end
  if opts.from == opts.to and opts.from_namespace == opts.to_namespace then
    error('helm.handover: opts.from and opts.to name the same release', 2)
  end
  if opts.from_release ~= nil and not FROM_RELEASE[opts.from_release] then
    error("helm.handover: opts.from_release is 'purge' or 'stays'", 2)
  end
  local obj = name
  if type(name) == 'table' then name = obj.metadata and obj.metadata.name end
  if not nonempty(name) then error('helm.handover: an object name or an object is required', 2) end
  local ns = opts.namespace or (type(obj) == 'table' and obj.metadata.namespace) or nil
  local function read()
    local o = kube.get(resource, name, { namespace = ns })
    if o == nil then
      fail('NotFound', string.format('helm.handover: %s "%s"%s not found', resource, name,
        ns and (' in namespace ' .. ns) or ''), 404)
    end
    return o
  end
  if type(obj) ~= 'table' then obj = read() end
  local from_ns = opts.from_namespace or ns
  local checked
  for attempt = 1, 5 do
    local patch, err = M.handover_patch(obj, opts)
    if err then error(err, 0) end
    if not patch then return obj, false end
    if opts.keep and opts.from_release ~= 'stays' and not checked then
      if not nonempty(from_ns) then
        error('helm.handover: opts.from_namespace is required with keep for an object outside a namespace', 2)
      end
      checked = stored(opts.from, from_ns)
      if checked > 0 and opts.from_release ~= 'purge' then
        local what = string.format('%s%s', ns and (ns .. '/') or '', name)
        fail('ReleaseStillStored', string.format("helm.handover: release '%s' (namespace %s) is still stored " ..
          "(%d revision%s): its removal (helm uninstall, or its HelmRelease deleted) deletes %s with everything " ..
          "its stored manifest lists, whatever keep says on the object: left as it is. End it without deleting " ..
          "(opts.from_release = 'purge': its storage goes after the hand-over), or let it live on and drop " ..
          "the object in its next upgrade, which honours the keep (opts.from_release = 'stays')",
          opts.from, from_ns, checked, checked == 1 and '' or 's', what))
      end
    end
    patch.metadata.resourceVersion = obj.metadata.resourceVersion
    local ok, res = pcall(kube.patch, resource, name, patch, { namespace = ns })
    if ok then
      if opts.from_release == 'purge' and (checked or 0) > 0 then M.purge_release(opts.from, from_ns) end
      return res, true
    end
    if not kube.is_conflict(res) or attempt == 5 then error(res, 0) end
    obj = read()
    -- a repeat refused because its first attempt landed: ours
    if res.after_retry and holds(obj, patch) then
      if opts.from_release == 'purge' and (checked or 0) > 0 then M.purge_release(opts.from, from_ns) end
      return obj, true
    end
  end
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
