-- fleet: apply one function to every object of a kind.
--
-- A migration that stops at the first broken tenant leaves the rest
-- unmigrated, and one that swallows the error records "ok" over work it did
-- not do. fleet.each does neither: it calls fn for every object, keeps going
-- past the ones that fail, and then raises one error naming each of them.

local kube = require('kube')
local core = require('kube.core')
local log = require('log')

local M = {}

-- Lines of failures spelled out in the error message; `failed` keeps all.
local MESSAGE_LINES = 50

local function where(obj)
  local m = obj.metadata or {}
  if m.namespace and m.namespace ~= '' then return m.namespace .. '/' .. tostring(m.name) end
  return tostring(m.name)
end

-- The parts of an error a caller may branch on, whatever was raised.
local function describe(err)
  local f = { message = tostring(err) }
  if type(err) == 'table' then
    f.code, f.reason = err.code, err.reason
    f.error = err
  end
  return f
end

-- each(resource, opts, fn) -> {seen=, changed=, failed=, failures=}
-- opts: kube.list's options (namespace, label_selector, field_selector,
--   limit); without opts.namespace the whole cluster is walked, since a
--   fleet limited to the runner's own namespace would skip silently.
-- opts.best_effort: log the failures as an error instead of raising.
-- fn(obj) returns true when it changed the object, false or nil when the
-- object was already as wanted; anything else counts as a failure, so a
-- forgotten return cannot pass for "unchanged".
-- Raises (unless best_effort) an error value with code 0, reason
-- 'FleetFailed', a message listing each failed object, and `failed`: a list
-- of {namespace=, name=, message=, code=, reason=, error=}. An error from the
-- list itself is raised as it came (the fleet could not be seen whole).
function M.each(resource, opts, fn)
  if type(fn) ~= 'function' then error('fleet.each: fn must be a function', 2) end
  local list_opts = {}
  for k, v in pairs(opts or {}) do
    if k ~= 'best_effort' then list_opts[k] = v end
  end
  if list_opts.namespace == nil then list_opts.all_namespaces = true end

  local res = { seen = 0, changed = 0, failed = 0, failures = {} }
  for obj in kube.list(resource, list_opts) do
    res.seen = res.seen + 1
    local ok, ret = pcall(fn, obj)
    if ok and ret ~= true and ret ~= false and ret ~= nil then
      ok, ret = false, string.format('fleet.each: fn returned a %s; return true (changed) or false (unchanged)',
        type(ret))
    end
    if ok then
      if ret then res.changed = res.changed + 1 end
    else
      local f = describe(ret)
      f.namespace, f.name = obj.metadata and obj.metadata.namespace, obj.metadata and obj.metadata.name
      res.failures[#res.failures + 1] = f
      res.failed = res.failed + 1
      log.warn('%s %s: %s', resource, where(obj), f.message)
    end
  end

  log.info('%s: %d seen, %d changed, %d failed', resource, res.seen, res.changed, res.failed)
  if res.failed == 0 then return res end

  local lines = { string.format('%s: %d of %d objects failed (%d changed):', resource, res.failed,
    res.seen, res.changed) }
  for i, f in ipairs(res.failures) do
    if i > MESSAGE_LINES then
      lines[#lines + 1] = string.format('  ... and %d more (logged above)', res.failed - MESSAGE_LINES)
      break
    end
    lines[#lines + 1] = string.format('  %s: %s', where({ metadata = f }), f.message)
  end
  local message = table.concat(lines, '\n')
  if opts and opts.best_effort then
    log.error('%s', message)
    return res
  end
  error(core.make_error {
    code = 0, reason = 'FleetFailed', message = message, failed = res.failures,
    seen = res.seen, changed = res.changed,
  }, 0)
end

return M
