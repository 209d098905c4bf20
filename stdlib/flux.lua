-- flux: drive Flux HelmReleases (helmreleases.helm.toolkit.fluxcd.io) from a
-- migration: suspend, resume, ask for a reconcile, and orphan a release
-- (make the HelmRelease object go away while everything it installed stays).
--
-- Each call reads the release first and writes only what differs, so a
-- migration calling them runs twice without moving a resourceVersion;
-- reconcile is the exception: asking again is its whole point.

local kube = require('kube')
local core = require('kube.core')
local log = require('log')

local M = {}

M.RESOURCE = 'helmreleases.helm.toolkit.fluxcd.io'
M.REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt'

local function fail(reason, message, code)
  error(core.make_error { code = code or 0, reason = reason, message = message }, 0)
end

local function check(verb, name, ns, level)
  if type(name) ~= 'string' or name == '' or type(ns) ~= 'string' or ns == '' then
    error(string.format('flux.%s: a HelmRelease name and namespace are required', verb), level)
  end
end

local function must_get(verb, name, ns)
  check(verb, name, ns, 4)
  local hr = kube.get(M.RESOURCE, name, { namespace = ns })
  if hr == nil then
    fail('NotFound', string.format('flux.%s: HelmRelease %s/%s not found', verb, ns, name), 404)
  end
  return hr
end

local function set_suspend(hr, value)
  local name, ns = hr.metadata.name, hr.metadata.namespace
  if (hr.spec and hr.spec.suspend == true) == value then return hr, false end
  return kube.patch(M.RESOURCE, name, { spec = { suspend = value } }, { namespace = ns }), true
end

-- suspend(name, ns) -> object, changed
function M.suspend(name, ns)
  return set_suspend(must_get('suspend', name, ns), true)
end

-- resume(name, ns) -> object, changed
function M.resume(name, ns)
  return set_suspend(must_get('resume', name, ns), false)
end

-- A value the release has not seen: helm-controller reconciles when the
-- annotation differs from status.lastHandledReconcileAt. UTC seconds like
-- the flux CLI writes, with a sub-second part that separates two requests
-- in the same second.
local function fresh(previous)
  local v
  repeat
    v = string.format('%s.%09dZ', os.date('!%Y-%m-%dT%H:%M:%S'), math.floor((core.now() % 1) * 1e9))
  until v ~= previous
  return v
end

-- reconcile(name, ns) -> the requestedAt value written
function M.reconcile(name, ns)
  local hr = must_get('reconcile', name, ns)
  local ann = hr.metadata.annotations or {}
  local v = fresh(ann[M.REQUESTED_AT])
  kube.patch(M.RESOURCE, name, { metadata = { annotations = { [M.REQUESTED_AT] = v } } },
    { namespace = ns })
  return v
end

-- orphan(name, ns) -> true when it deleted the release, false when it was gone
-- Suspends the release (so helm-controller stops acting on it), removes its
-- finalizers (so deleting it does not uninstall what it installed), checks
-- that none came back, and deletes it without waiting. Raises
-- FinalizersRemain when the apiserver still reports finalizers after the
-- patch (a controller or webhook keeps putting them back: deleting then
-- would uninstall).
function M.orphan(name, ns)
  check('orphan', name, ns, 3)
  local hr = kube.get(M.RESOURCE, name, { namespace = ns })
  if hr == nil then return false end
  hr = set_suspend(hr, true)
  local fins = hr.metadata.finalizers
  if type(fins) == 'table' and #fins > 0 then
    hr = kube.patch(M.RESOURCE, name, { metadata = { finalizers = kube.null } }, { namespace = ns })
    fins = hr.metadata.finalizers
    if type(fins) == 'table' and #fins > 0 then
      fail('FinalizersRemain', string.format(
        'flux.orphan: HelmRelease %s/%s still has finalizers %s after removing them; not deleting it',
        ns, name, table.concat(fins, ', ')))
    end
  end
  kube.delete(M.RESOURCE, name, { namespace = ns, ignore_not_found = true })
  log.info('orphaned HelmRelease %s/%s', ns, name)
  return true
end

return M
