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

-- The parts of an error a caller may branch on, whatever was raised; a
-- kube error's message names the script's line, the verb and the object.
local function describe(err)
  local f = { message = core.error_text(err) }
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
-- forgotten return cannot pass for "unchanged". A fn that returned nothing
-- although one of its writes changed an object is counted as changed all
-- the same (res.from_writes), and the summary says so.
-- Raises (unless best_effort) an error value with code 0, reason
-- 'FleetFailed', a message listing each failed object, and `failed`: a list
-- of {namespace=, name=, message=, code=, reason=, error=}. An error from the
-- list itself is raised as it came (the fleet could not be seen whole).
-- The result of one fn(obj) call into res: counted, or a failure naming
-- the object (at its place in the list, so a concurrent sweep reports the
-- same list a sequential one would).
-- wrote: how many of fn's writes changed an object; a fn that returned
-- nothing (or false) after such a write changed its object all the same,
-- and is counted so, from the writes (and said, at the end).
local function settle(res, resource, obj, index, ok, ret, wrote)
  if ok and ret ~= true and ret ~= false and ret ~= nil then
    ok, ret = false, string.format('fleet.each: fn returned a %s; return true (changed) or false (unchanged)',
      type(ret))
  end
  if ok then
    if ret then
      res.changed = res.changed + 1
    elseif (wrote or 0) > 0 then
      res.changed = res.changed + 1
      res.from_writes = (res.from_writes or 0) + 1
      -- the first five in list order, whatever order they finished in
      res.quiet = res.quiet or {}
      res.quiet[#res.quiet + 1] = { index = index, name = where(obj) }
      table.sort(res.quiet, function(a, b) return a.index < b.index end)
      res.quiet[6] = nil
    end
    return
  end
  local f = describe(ret)
  f.namespace, f.name = obj.metadata and obj.metadata.namespace, obj.metadata and obj.metadata.name
  f.index = index
  res.failures[#res.failures + 1] = f
  res.failed = res.failed + 1
  log.warn('%s %s: %s', resource, where(obj), f.message)
end

local function names_of(quiet)
  local names = {}
  for i, q in ipairs(quiet) do names[i] = q.name end
  return names
end

-- One object at a time: fn's requests go out as it makes them.
local function sequential(resource, list_opts, fn, res)
  for obj in kube.list(resource, list_opts) do
    res.seen = res.seen + 1
    local before = core.changed_by()
    local ok, ret = pcall(fn, obj)
    settle(res, resource, obj, res.seen, ok, ret, core.changed_by() - before)
  end
end

-- Up to n objects at a time. Each fn(obj) runs in a coroutine of its own
-- whose requests go to the host's pool (core.adopt): a request makes it
-- yield core.PENDING, and it is resumed when core.await hands that
-- request's answer back, so fn reads as straight-line code while up to n
-- of them wait on the apiserver together. n is a ceiling: the pool keeps
-- on the wire what its adaptive pace allows (host/client/pace.h: additive
-- increase, multiplicative decrease on 429/503 and Retry-After), the rest
-- wait their turn there. kube.sleep in fn yields its own coroutine
-- (core.SLEEPING with its wake time): the others go on meanwhile.
-- The list is read by a coroutine of its own through the same pool, ahead
-- of the objects started: the next page is asked for while `ahead` objects
-- still wait to be started, so its fetch overlaps their writes. Memory
-- holds n objects in fn, those waiting and a page, whatever the fleet's
-- size. Whatever fn does, it
-- does through the same request function as one sent alone (guard, dry
-- run, retries, one journal entry per write, in the order the answers
-- arrive).
local sweeping = false -- a concurrent sweep is running (fleet.each nests sequentially in it)
local LISTED = {} -- what the list's coroutine yields with each object
local PLC = 'prioritylevelconfigurations.flowcontrol.apiserver.k8s.io'

-- The UIDs of the priority levels API Priority and Fairness never queues
-- (type Exempt: the admin's system:masters), read once per migration: the
-- pace lets a flow answered from one of them grow to its ceiling (pace.h).
-- Empty when they cannot be read (no right to list them, no flowcontrol
-- v1): every level then counts as one that queues.
local exempt_levels
local function exempt()
  if exempt_levels then return exempt_levels end
  local found = {}
  local ok = pcall(function()
    if not kube.has_resource(PLC) then return end
    for plc in kube.list(PLC, {}) do
      if (plc.spec or {}).type == 'Exempt' and plc.metadata and plc.metadata.uid then
        found[#found + 1] = plc.metadata.uid
      end
    end
  end)
  exempt_levels = ok and found or {}
  return exempt_levels
end

local function concurrent(resource, list_opts, fn, res, n, adapt)
  local running, inflight = {}, 0 -- co -> {obj, index}
  local sleepers = {}               -- co -> the monotonic time it wakes at
  local ready, head, tail = {}, 1, 0 -- listed, not started yet
  -- Objects listed ahead are live data the collector walks at every
  -- cycle: a whole page ahead (500) cost a 2,000-object sweep 10-15% more
  -- CPU than the sweep before it. 2n, at least 64, still asks for the next
  -- page while that many wait (at ~1 ms an object here, longer than a page
  -- of 500 takes to arrive).
  local ahead = math.max(2 * n, 64)
  local lister = coroutine.create(function()
    for obj in kube.list(resource, list_opts) do coroutine.yield(LISTED, obj) end
  end)
  local lister_waits, listed, list_err = false, false, nil
  local stopping = false -- something broke: no more pages
  core.adopt(lister)
  core.pace(n, adapt, adapt and exempt() or nil)

  local function settle_one(co, ok, ret)
    local w = running[co]
    running[co], inflight = nil, inflight - 1
    settle(res, resource, w.obj, w.index, ok, ret, core.changed_by(co))
  end

  -- what the list's coroutine did when resumed
  local function on_lister(ok, a, b)
    lister_waits = false
    if not ok then
      listed, list_err = true, a
    elseif coroutine.status(lister) == 'dead' then
      listed = true
    elseif a == core.PENDING then
      lister_waits = true
    elseif a == core.SLEEPING then
      lister_waits, sleepers[lister] = true, b
    elseif a == LISTED then
      tail = tail + 1
      ready[tail] = b
    else
      coroutine.close(lister)
      listed, list_err = true, 'fleet.each: the list yielded outside a kube request'
    end
  end

  -- keeps the next page coming: the list runs on while fewer than
  -- `ahead` objects wait to be started
  local function pump()
    while not listed and not lister_waits and not stopping and tail - head + 1 < ahead do
      on_lister(coroutine.resume(lister))
    end
  end

  local function step(co, ok, ret, wake)
    if co == lister then
      on_lister(ok, ret, wake)
      pump()
      return
    end
    -- the pool answers only the coroutines a sweep adopted (kube.core is
    -- the stdlib's alone), and a nested sweep runs sequentially
    if not running[co] then error('fleet.each: an answer came back for a coroutine this sweep did not start', 0) end
    if ok and coroutine.status(co) == 'suspended' then
      if ret == core.PENDING then return end
      if ret == core.SLEEPING then
        sleepers[co] = wake
        return
      end
      -- fn yielded for a reason of its own: nobody will resume it
      coroutine.close(co)
      ok, ret = false, 'fleet.each: fn yielded outside a kube request; coroutines inside fn must be its own'
    end
    settle_one(co, ok, ret)
  end

  local function first_wake()
    local at
    for _, t in pairs(sleepers) do
      if not at or t < at then at = t end
    end
    return at
  end

  -- Waits for the next answer or the next sleeper's time, and resumes
  -- whoever it was for.
  local function wait_one()
    local at = first_wake()
    local co
    if at then
      co = core.await(math.max(at - core.now(), 0))
      if co == nil then core.sleep(math.max(at - core.now(), 0)) end
    else
      co = core.await()
      if not co then error('fleet.each: a request in flight was lost (nothing to wait for)', 0) end
    end
    if co then
      step(co, coroutine.resume(co))
      return
    end
    local now = core.now()
    for s, t in pairs(sleepers) do
      if t <= now then
        sleepers[s] = nil
        step(s, coroutine.resume(s))
      end
    end
  end

  local ok, err = pcall(function()
    pump()
    while true do
      while inflight < n and head <= tail do
        local obj = ready[head]
        ready[head], head = nil, head + 1
        res.seen = res.seen + 1
        local co = coroutine.create(fn)
        core.adopt(co)
        running[co], inflight = { obj = obj, index = res.seen }, inflight + 1
        step(co, coroutine.resume(co, obj))
        pump()
      end
      if inflight == 0 and head > tail and listed then break end
      wait_one()
    end
  end)
  -- What is in flight finishes (and is counted) even when something broke.
  if not ok then
    stopping = true
    while inflight > 0 or lister_waits do wait_one() end
    error(err, 0)
  end
  if list_err then error(list_err, 0) end
  table.sort(res.failures, function(a, b) return a.index < b.index end)
end

-- each(resource, opts, fn) -> {seen=, changed=, failed=, failures=}
-- opts: kube.list's options (namespace, label_selector, field_selector,
--   limit); without opts.namespace the whole cluster is walked, since a
--   fleet limited to the runner's own namespace would skip silently.
-- opts.best_effort: log the failures as an error instead of raising.
-- opts.concurrency: how many objects' fn run at once, their requests in
--   flight together (default: the run's --concurrency, 8; 1: one at a
--   time, in list order). fn must then not rely on the order objects are
--   finished in, only on its own object. It is a ceiling: how many
--   requests are on the wire adapts to the apiserver's answers (slows down
--   on 429/503, comes back up; host/client/pace.h).
-- opts.adapt: false keeps exactly `concurrency` requests in flight
--   whatever the apiserver answers (a benchmark's fixed point).
-- fn(obj) returns true when it changed the object, false or nil when the
-- object was already as wanted; anything else counts as a failure, so a
-- forgotten return cannot pass for "unchanged".
-- Raises (unless best_effort) an error value with code 0, reason
-- 'FleetFailed', a message listing each failed object, and `failed`: a list
-- of {namespace=, name=, message=, code=, reason=, error=} in list order,
-- whatever the concurrency. An error from the list itself is raised as it
-- came (the fleet could not be seen whole), once the objects in flight are
-- done.
function M.each(resource, opts, fn)
  if type(fn) ~= 'function' then error('fleet.each: fn must be a function', 2) end
  local list_opts = {}
  for k, v in pairs(opts or {}) do
    if k ~= 'best_effort' and k ~= 'concurrency' and k ~= 'adapt' then list_opts[k] = v end
  end
  if list_opts.namespace == nil then list_opts.all_namespaces = true end
  local n = (opts and opts.concurrency) or core.concurrency or 1
  if math.type(n) ~= 'integer' or n < 1 or n > 64 then
    error('fleet.each: opts.concurrency must be a whole number from 1 to 64', 2)
  end
  local adapt = true
  if opts and opts.adapt ~= nil then
    if type(opts.adapt) ~= 'boolean' then error('fleet.each: opts.adapt must be true or false', 2) end
    adapt = opts.adapt
  end

  local res = { seen = 0, changed = 0, failed = 0, failures = {} }
  if n == 1 or sweeping then
    -- a fleet inside a concurrent fleet's fn walks its objects one at a
    -- time (its requests still share the outer sweep's pool)
    sequential(resource, list_opts, fn, res)
  else
    sweeping = true
    local ok, err = pcall(concurrent, resource, list_opts, fn, res, n, adapt)
    sweeping = false
    res.pace = core.pace_seen()
    if not ok then error(err, 0) end
    local p = res.pace
    if p and p.throttled > 0 then
      log.info('%s: the apiserver throttled %d of %d answers%s; in flight between %d and %d of %d%s', resource,
        p.throttled, p.answers, p.level and (' (API Priority and Fairness level ' .. p.level .. ')') or '',
        p.low, p.high, p.ceiling, p.adapt and '' or ' (fixed)')
    elseif p and p.high < p.ceiling and res.seen > p.ceiling then
      -- slower than asked, on purpose (a fleet smaller than the ceiling
      -- never filled it): said where the operator reads the run
      log.info('%s: in flight between %d and %d of %d (the apiserver\'s answers slowed as more were sent)',
        resource, p.low, p.high, p.ceiling)
    end
  end
  for _, f in ipairs(res.failures) do f.index = nil end

  if res.from_writes then
    log.warn('%s: fn returned nothing (or false) for %d object(s) its writes changed (%s%s): counted as ' ..
      'changed from the write journal; return true from fn when it changes an object', resource,
      res.from_writes, table.concat(names_of(res.quiet), ', '), res.from_writes > #res.quiet and ', ...' or '')
    log.info('%s: %d seen, %d changed (%d counted from the writes), %d failed', resource, res.seen, res.changed,
      res.from_writes, res.failed)
  else
    log.info('%s: %d seen, %d changed, %d failed', resource, res.seen, res.changed, res.failed)
  end
  res.quiet = nil
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

-- ---- tenant clusters --------------------------------------------------------

-- clusters(opts, fn) -> {seen=, changed=, failed=, failures=}
-- fn(ref, client, err) for every cluster kube.clusters(opts) yields (ref
-- {namespace=, name=, key=, cluster=, labels=}; client nil with err for a
-- cluster that is down or whose Secret is broken: fn decides, skipping it
-- or raising). Each cluster's work is its own: up to opts.concurrency
-- (default the run's --concurrency) clusters' fn run at once, each in a
-- coroutine whose requests (to its cluster and to the management cluster)
-- go to the host's pools, so several clusters' requests are in flight
-- together; 1 runs them one at a time in order. Clients are opened (one
-- probe each, kube.cluster) before any fn runs. As fleet.each: fn returns
-- true when it changed something, false or nil when not, and anything it
-- raises is a failure of that cluster; the rest go on, then one error
-- (reason FleetFailed) names each cluster that failed, unless
-- opts.best_effort. A fleet.each inside fn walks its objects one at a time.
function M.clusters(opts, fn)
  if type(fn) ~= 'function' then error('fleet.clusters: fn must be a function', 2) end
  opts = opts or {}
  local n = opts.concurrency or core.concurrency or 1
  if math.type(n) ~= 'integer' or n < 1 or n > 64 then
    error('fleet.clusters: opts.concurrency must be a whole number from 1 to 64', 2)
  end
  local items = {}
  for ref, client, err in kube.clusters { selector = opts.selector, key = opts.key, namespace = opts.namespace,
    probe_timeout = opts.probe_timeout } do
    items[#items + 1] = { ref = ref, client = client, err = err }
  end
  local res = { seen = 0, changed = 0, failed = 0, failures = {} }
  local function done(it, ok, ret)
    if ok and ret == true then
      res.changed = res.changed + 1
    elseif not (ok and (ret == nil or ret == false)) then
      local f = ok and { message = 'fn returned ' .. tostring(ret) .. ' (true, false or nil expected)' }
        or describe(ret)
      f.cluster, f.index = it.ref.cluster, it.index
      res.failed = res.failed + 1
      res.failures[#res.failures + 1] = f
      log.warn('%s: %s', it.ref.cluster, f.message)
    end
  end
  if n == 1 or sweeping then
    for i, it in ipairs(items) do
      res.seen, it.index = i, i
      done(it, pcall(fn, it.ref, it.client, it.err))
    end
  else
    sweeping = true
    local ok, err = pcall(function()
      local running, inflight, next_i, sleepers = {}, 0, 1, {}
      local function step(co, rok, ret, wake)
        if rok and coroutine.status(co) == 'suspended' then
          if ret == core.PENDING then return end
          if ret == core.SLEEPING then sleepers[co] = wake return end
          coroutine.close(co)
          rok, ret = false, 'fleet.clusters: fn yielded outside a kube request'
        end
        local it = running[co]
        running[co], inflight = nil, inflight - 1
        done(it, rok, ret)
      end
      while true do
        while inflight < n and next_i <= #items do
          local it = items[next_i]
          it.index, next_i, res.seen = next_i, next_i + 1, next_i
          local co = coroutine.create(fn)
          core.adopt(co)
          running[co], inflight = it, inflight + 1
          step(co, coroutine.resume(co, it.ref, it.client, it.err))
        end
        if inflight == 0 then break end
        local at
        for _, t in pairs(sleepers) do if not at or t < at then at = t end end
        local co
        if at then
          co = core.await(math.max(at - core.now(), 0))
          if co == nil then core.sleep(math.max(at - core.now(), 0)) end
        else
          co = core.await()
          if not co then error('fleet.clusters: a request in flight was lost', 0) end
        end
        if co then
          step(co, coroutine.resume(co))
        else
          local now = core.now()
          for s2, t in pairs(sleepers) do
            if t <= now then
              sleepers[s2] = nil
              step(s2, coroutine.resume(s2))
            end
          end
        end
      end
    end)
    sweeping = false
    if not ok then error(err, 0) end
    table.sort(res.failures, function(a, b) return a.index < b.index end)
  end
  for _, f in ipairs(res.failures) do f.index = nil end
  log.info('clusters: %d seen, %d changed, %d failed', res.seen, res.changed, res.failed)
  if res.failed == 0 then return res end
  local lines = { string.format('clusters: %d of %d failed (%d changed):', res.failed, res.seen, res.changed) }
  for i, f in ipairs(res.failures) do
    if i > MESSAGE_LINES then
      lines[#lines + 1] = string.format('  ... and %d more (logged above)', res.failed - MESSAGE_LINES)
      break
    end
    lines[#lines + 1] = string.format('  %s: %s', f.cluster, f.message)
  end
  local message = table.concat(lines, '\n')
  if opts.best_effort then
    log.error('%s', message)
    return res
  end
  error(core.make_error { code = 0, reason = 'FleetFailed', message = message, failed = res.failures,
    seen = res.seen, changed = res.changed }, 0)
end

return M
