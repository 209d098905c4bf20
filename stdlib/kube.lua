-- kube: the Kubernetes client migrations use.
--
-- The verbs are thin: they build a path from the resolved resource, say
-- whether repeating the request is safe (a create never is, a replace only
-- with a resourceVersion, a JSON patch not when it edits array positions),
-- and call the host's request function (luakube_request.c), which with the
-- door every request passes (door.c: the ledger guard, dry run, what is
-- safe to repeat) and the client under it (rest.c: retries) owns the rest,
-- and makes the error values.
-- That function is handed to this file alone when the host loads it: a
-- migration reaches the API through these verbs, never a raw request.
-- Errors are tables with code, reason, message, details, verb and path;
-- tostring() reads like kubectl. `get` returns nil only for NotFound; every
-- other error is raised.

local core = require('kube.core')
local json = require('json')
local log = require('log')

local _, private = ...
local request = type(private) == 'table' and private.request
local cluster_open = type(private) == 'table' and private.cluster
local cluster_refs = type(private) == 'table' and private.cluster_refs
if not request then
  error('kube: this module is loaded by the host (require "kube"), not from a file', 2)
end

local M = {}

M.null = json.null
M.dry_run = core.dry_run
M.FIELD_MANAGER = 'cozy-migrate'

local PATCH_TYPES = {
  merge = 'application/merge-patch+json',
  json = 'application/json-patch+json',
  strategic = 'application/strategic-merge-patch+json',
  apply = 'application/apply-patch+yaml',
}

-- ---- errors -------------------------------------------------------------

local function pred(field, value)
  return function(err)
    return type(err) == 'table' and err[field] == value
  end
end

M.is_error = core.is_error
M.is_not_found = pred('code', 404)
M.is_conflict = function(err) return type(err) == 'table' and err.code == 409 and err.reason == 'Conflict' end
M.is_already_exists = pred('reason', 'AlreadyExists')
M.is_forbidden = pred('code', 403)
M.is_unauthorized = pred('code', 401)
M.is_invalid = pred('code', 422)
M.is_gone = pred('code', 410)
M.is_expired = M.is_gone
M.is_too_many_requests = pred('code', 429)
M.is_unsupported_media_type = pred('code', 415)
M.is_timeout = pred('reason', 'Timeout')
M.is_connection_error = pred('reason', 'ConnectionError')
M.is_ledger_protected = pred('reason', 'LedgerProtected')
-- A cluster that did not answer (kube.cluster's error for a tenant cluster
-- that is down): no HTTP status, a connection error or a timeout.
M.is_unreachable = function(err)
  return type(err) == 'table' and err.code == 0
    and (err.reason == 'ConnectionError' or err.reason == 'Timeout')
end

local function raise(err)
  error(err, 0)
end

local function new_error(reason, message, extra)
  local e = { code = 0, reason = reason, message = message }
  for k, v in pairs(extra or {}) do e[k] = v end
  return core.make_error(e)
end

-- The verbs of one cluster, put into M: request is that cluster's request
-- function, cc its cluster-bound services (resolve, default_namespace,
-- config, requests, connects). The management cluster's go into the module
-- itself; kube.cluster() makes a tenant cluster's client with the same.
local function verbs(M, request, cc)
  -- ---- paths ----------------------------------------------------------------

  local function escape(s)
    return (tostring(s):gsub('[^%w%-%._~]', function(c)
      return string.format('%%%02X', string.byte(c))
    end))
  end

  -- A resource is a name ("configmaps", "cm", "ConfigMap",
  -- "deployments.v1.apps") or a table kube.resource() returned; a table is
  -- resolved again from its resource, version and group, like a name, so no
  -- field a script edits can steer a request elsewhere.
  local function resolve(resource)
    if type(resource) == 'table' then
      local res, ver, grp = resource.resource, resource.version, resource.group
      if type(res) ~= 'string' or type(ver) ~= 'string' or type(grp) ~= 'string' then
        error('kube: a resource table must be one kube.resource() returned', 3)
      end
      resource = res .. '.' .. ver .. '.' .. grp
    end
    if type(resource) ~= 'string' or resource == '' then
      error('kube: the resource must be a name like "configmaps", "cm" or "ConfigMap"', 3)
    end
    local r, err = cc.resolve(resource)
    if not r then raise(err) end
    return r
  end

  local function namespace_for(r, opts, obj)
    if not r.namespaced then return nil end
    if opts.all_namespaces then return nil end
    local meta = obj and obj.metadata
    return opts.namespace or (meta and meta.namespace) or cc.default_namespace()
  end

  local function path_for(r, ns, name, sub)
    local p = r.prefix
    if ns then p = p .. '/namespaces/' .. escape(ns) end
    p = p .. '/' .. r.resource
    if name then p = p .. '/' .. escape(name) end
    if sub then p = p .. '/' .. sub end
    return p
  end

  local function selector(sel)
    if sel == nil or type(sel) == 'string' then return sel end
    local keys = {}
    for k in pairs(sel) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do
      local v = sel[k]
      if v == true then parts[#parts + 1] = k else parts[#parts + 1] = k .. '=' .. tostring(v) end
    end
    return table.concat(parts, ',')
  end

  local function check_name(verb, name)
    if type(name) ~= 'string' or name == '' then
      error(string.format('kube.%s: a non-empty object name is required', verb), 3)
    end
  end

  -- ---- verbs ----------------------------------------------------------------

  -- get(resource, name [, {namespace=, subresource=}]) -> object | nil (NotFound)
  function M.get(resource, name, opts)
    opts = opts or {}
    check_name('get', name)
    local r = resolve(resource)
    local resp, err = request {
      verb = 'get', method = 'GET',
      path = path_for(r, namespace_for(r, opts), name, opts.subresource),
    }
    if resp then return resp.body end
    if err.code == 404 then return nil end
    raise(err)
  end

  -- has_resource(name) -> true | false; raises on anything but "not served".
  function M.has_resource(name)
    local r, err = cc.resolve(name)
    if r then return true end
    if err.reason == 'UnknownResource' then return false end
    raise(err)
  end

  -- resource(name) -> {group, version, resource, kind, namespaced, api_version, ...}
  function M.resource(name)
    return resolve(name)
  end

  local function item_key(obj)
    local m = obj.metadata or {}
    return (m.namespace or '') .. '/' .. (m.name or '')
  end

  -- list(resource [, opts]) -> iterator over objects, fetched a page at a time.
  -- opts: namespace, all_namespaces, label_selector (string or {k=v}),
  -- field_selector, limit (page size, default 500).
  --
  -- When a continue token expires (HTTP 410: etcd was compacted past the
  -- list's revision) the iterator logs it and carries on without yielding an
  -- object twice: with the token the apiserver offers in the 410 (it resumes
  -- after the last key at the current revision), else by listing again from
  -- the start and skipping up to the last key yielded (lists are in storage-key
  -- order, namespace/name). Either way objects changed meanwhile may or may not
  -- appear; none appears twice. Only one page is held at a time.
  function M.list(resource, opts)
    opts = opts or {}
    local r = resolve(resource)
    local base = path_for(r, namespace_for(r, opts), nil, nil)
    local query = {
      labelSelector = selector(opts.label_selector),
      fieldSelector = selector(opts.field_selector),
      limit = opts.limit or 500,
    }
    local items, i, continue, done = nil, 0, nil, false
    local last_key, skip_until = nil, nil
    local function fetch()
      query.continue = continue
      local resp, err = request { verb = 'list', method = 'GET', path = base, query = query }
      if not resp and err.code == 410 and continue then
        if err.continue then
          log.warn('kube.list %s: continue token expired (%s); resuming after the last object at the current revision',
            base, err.message)
          query.continue = err.continue
        else
          log.warn('kube.list %s: continue token expired (%s); listing again from the start, skipping what was already returned',
            base, err.message)
          query.continue = nil
          skip_until = last_key
        end
        resp, err = request { verb = 'list', method = 'GET', path = base, query = query }
      end
      if not resp then raise(err) end
      local body = resp.body
      if type(body) ~= 'table' then
        raise(new_error('InvalidResponse', 'GET ' .. base .. ': the response is not a JSON list',
          { verb = 'list', path = base }))
      end
      items, i = body.items or {}, 0
      local meta = body.metadata or {}
      continue = meta.continue
      if continue == '' or continue == json.null then continue = nil end
      if not continue then done = true end
    end
    return function()
      while true do
        if items == nil then fetch() end
        i = i + 1
        local obj = items[i]
        if obj ~= nil then
          items[i] = false -- the page need not keep what was handed out
          local key = item_key(obj)
          if skip_until == nil or key > skip_until then
            skip_until = nil
            last_key = key
            obj.apiVersion = obj.apiVersion or r.api_version
            obj.kind = obj.kind or r.kind
            return obj
          end
        elseif done then
          items = {}
          return nil
        else
          items = nil
        end
      end
    end
  end

  -- list_all(resource [, opts]) -> array of objects (convenience for small sets).
  function M.list_all(resource, opts)
    local out = json.array()
    for obj in M.list(resource, opts) do out[#out + 1] = obj end
    return out
  end

  -- create(resource, obj [, {namespace=}]) -> created object
  function M.create(resource, obj, opts)
    opts = opts or {}
    local r = resolve(resource)
    obj.apiVersion = obj.apiVersion or r.api_version
    obj.kind = obj.kind or r.kind
    local ns = namespace_for(r, opts, obj)
    local resp, err = request {
      verb = 'create', method = 'POST', path = path_for(r, ns, nil, opts.subresource), body = obj,
    }
    if resp then return resp.body end
    if err.after_retry and err.reason == 'AlreadyExists' and obj.metadata and obj.metadata.name then
      -- Our first attempt landed before the connection broke.
      local got = M.get(r, obj.metadata.name, { namespace = ns })
      if got then
        log.info('kube.create %s/%s: created by an earlier attempt', r.resource, obj.metadata.name)
        return got
      end
    end
    raise(err)
  end

  -- replace(resource, obj [, opts]) -> object. Retried on transient errors only
  -- when obj carries a resourceVersion (then a repeat cannot clobber).
  function M.replace(resource, obj, opts)
    opts = opts or {}
    local r = resolve(resource)
    local meta = obj.metadata or {}
    check_name('replace', meta.name)
    obj.apiVersion = obj.apiVersion or r.api_version
    obj.kind = obj.kind or r.kind
    local resp, err = request {
      verb = 'replace', method = 'PUT',
      path = path_for(r, namespace_for(r, opts, obj), meta.name, opts.subresource),
      body = obj, idempotent = meta.resourceVersion ~= nil,
    }
    if resp then return resp.body end
    raise(err)
  end

  -- patch(resource, name, patch [, opts]) -> object
  -- opts.type: 'merge' (default), 'json', 'strategic', 'apply'; opts.force and
  -- opts.field_manager for apply; opts.subresource; opts.namespace.
  function M.patch(resource, name, patch, opts)
    opts = opts or {}
    check_name('patch', name)
    local ptype = opts.type or 'merge'
    local ctype = PATCH_TYPES[ptype]
    if not ctype then
      error(string.format('kube.patch: unknown patch type %q (merge, json, strategic, apply)', ptype), 2)
    end
    if type(patch) ~= 'table' then
      error('kube.patch: the patch must be a table (patches are never built from strings)', 2)
    end
    local r = resolve(resource)
    local query
    if ptype == 'apply' then
      patch.apiVersion = patch.apiVersion or r.api_version
      patch.kind = patch.kind or r.kind
      patch.metadata = patch.metadata or {}
      patch.metadata.name = patch.metadata.name or name
      query = { fieldManager = opts.field_manager or M.FIELD_MANAGER, force = opts.force and true or nil }
    elseif ptype == 'json' then
      patch = json.array(patch)
    end
    -- A JSON patch that adds, removes, moves or copies at an array position
    -- does something else when applied twice: never repeat it on its own.
    local idempotent = true
    if ptype == 'json' then
      for _, op in ipairs(patch) do
        local p = type(op) == 'table' and op.path or ''
        if op.op ~= 'test' and op.op ~= 'replace' and (p:match('/%-$') or p:match('/%d+$')) then
          idempotent = false
        end
      end
    end
    if opts.field_manager and ptype ~= 'apply' then
      query = { fieldManager = opts.field_manager }
    end
    local resp, err = request {
      verb = 'patch', method = 'PATCH',
      -- an applied object names its namespace like a created one does
      path = path_for(r, namespace_for(r, opts, ptype == 'apply' and patch or nil), name, opts.subresource),
      query = query, body = patch, content_type = ctype, idempotent = idempotent,
    }
    if resp then return resp.body end
    if err.code == 415 and ptype == 'strategic' then
      err.message = err.message .. ' (strategic merge patch is not supported for '
        .. r.resource .. (r.group ~= '' and ('.' .. r.group) or '')
        .. '; custom resources accept merge, json and apply patches)'
    end
    raise(err)
  end

  -- apply(resource, obj [, {force=, field_manager=}]) -> object (server-side apply)
  function M.apply(resource, obj, opts)
    opts = opts or {}
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.type = 'apply'
    local meta = obj.metadata or {}
    return M.patch(resource, meta.name, obj, o)
  end

  -- delete(resource, name [, opts]) -> true when deleted, false when it was
  -- already gone and opts.ignore_not_found is set.
  -- opts: propagation ('Background', 'Foreground', 'Orphan'), ignore_not_found,
  -- wait (block until the object is gone), timeout (seconds, default 60).
  function M.delete(resource, name, opts)
    opts = opts or {}
    check_name('delete', name)
    local r = resolve(resource)
    local ns = namespace_for(r, opts)
    local body
    if opts.propagation then
      body = { apiVersion = 'v1', kind = 'DeleteOptions', propagationPolicy = opts.propagation }
    end
    local resp, err = request {
      verb = 'delete', method = 'DELETE', path = path_for(r, ns, name, nil), body = body,
    }
    if not resp then
      -- A 404 after a repeat whose first attempt may have landed: ours.
      if err.code == 404 and err.after_retry then
        log.info('kube.delete %s/%s: deleted by an earlier attempt', r.resource, name)
      elseif err.code == 404 and opts.ignore_not_found then
        return false
      else
        raise(err)
      end
    end
    if opts.wait and not core.dry_run then
      M.wait(r, name, function(obj) return obj == nil end, opts.timeout or 60, { namespace = ns })
    end
    return true
  end

  -- update(resource, name, fn [, opts]) -> object, changed
  -- Reads the object, calls fn(obj) (which edits obj in place or returns a new
  -- one; returning false means "no change"), writes it with its
  -- resourceVersion, and starts over on a Conflict (opts.attempts, default 5).
  -- Exactly once where the server can tell: when a write whose first attempt
  -- may have landed (its connection broke, or a 5xx answered) is refused with
  -- a Conflict on its repeat, the object is read again, and if it already
  -- holds what was sent the update is done: fn is not called a second time.

  -- What a write sent, compared with what the server holds: everything but
  -- the fields the server moves on every write.
  local SERVER_FIELDS = { resourceVersion = true, managedFields = true, generation = true }

  local function same(a, b, depth)
    if type(a) ~= 'table' or type(b) ~= 'table' then return a == b end
    for k, v in pairs(a) do
      if not (depth == 1 and SERVER_FIELDS[k]) and not same(v, b[k], k == 'metadata' and 1 or 2) then
        return false
      end
    end
    for k in pairs(b) do
      if a[k] == nil and not (depth == 1 and SERVER_FIELDS[k]) then return false end
    end
    return true
  end

  local function holds(current, sent)
    if type(current) ~= 'table' then return false end
    for k, v in pairs(sent) do
      if k ~= 'status' and not same(v, current[k], k == 'metadata' and 1 or 2) then return false end
    end
    return true
  end

  function M.update(resource, name, fn, opts)
    opts = opts or {}
    local r = resolve(resource)
    local attempts = opts.attempts or 5
    for attempt = 1, attempts do
      local obj = M.get(r, name, opts)
      if obj == nil then
        raise(new_error('NotFound', string.format('%s "%s" not found', r.resource, name),
          { code = 404, verb = 'update' }))
      end
      local res = fn(obj)
      if res == false then return obj, false end
      if type(res) == 'table' then obj = res end
      local sent = json.decode(json.encode(obj))
      local resp, err = request {
        verb = 'update', method = 'PUT',
        path = path_for(r, namespace_for(r, opts, obj), name, opts.subresource),
        body = obj, idempotent = true,
      }
      if resp then return resp.body, true end
      if err.code == 409 and err.after_retry then
        local now = M.get(r, name, opts)
        if holds(now, sent) then
          log.info('kube.update %s/%s: applied by an earlier attempt (its answer was lost)',
            r.resource, name)
          return now, true
        end
      end
      if not (err.code == 409 and attempt < attempts) then raise(err) end
      log.info('kube.update %s/%s: conflict, retrying (%d/%d)', r.resource, name, attempt + 1, attempts)
    end
  end

  -- wait(resource, name, predicate, timeout [, opts]) -> object
  -- Polls until predicate(obj) is true (obj is nil while absent).
  function M.wait(resource, name, predicate, timeout, opts)
    opts = opts or {}
    local r = resolve(resource)
    timeout = timeout or 60
    local deadline = core.now() + timeout
    local interval = opts.interval or 0.2
    while true do
      local obj = M.get(r, name, opts)
      if predicate(obj) then return obj end
      if core.now() >= deadline then
        raise(new_error('Timeout', string.format('timed out after %gs waiting for %s "%s"',
          timeout, r.resource, name), { verb = 'wait' }))
      end
      core.sleep(math.min(interval, math.max(deadline - core.now(), 0.01)))
      interval = math.min(interval * 1.5, 2)
    end
  end

  -- sleep(seconds): waits, never past the migration's deadline.
  M.sleep = core.sleep
  -- now() -> seconds on the monotonic clock (one clock for every process on
  -- the machine): for a migration's own timing.
  M.now = core.now
  -- The number of TCP/TLS connections this migration opened (1 with keep-alive;
  -- the pool fleet.each's concurrent requests share opens its own).
  M.connections = cc.connects
  -- The number of HTTP requests sent so far, every retry counted.
  M.requests = cc.requests
  M.config = cc.config
  M.default_namespace = cc.default_namespace
end

verbs(M, request, core)

-- ---- tenant clusters ------------------------------------------------------
--
-- A cluster the platform hosts, reached through its kubeconfig Secret in
-- this (the management) cluster. The host reads the Secret and parses the
-- kubeconfig in memory; no credential becomes a Lua value. The client has
-- the same verbs as kube (errors, retries, paging, deadline, memory cap,
-- dry run), its writes journaled with the cluster's name (NS/NAME of the
-- Secret). The ledger guard judges its requests as it judges the
-- management cluster's.

-- Kamaji's admin kubeconfig Secrets, and the key that holds the kubeconfig.
M.ADMIN_KUBECONFIG_SELECTOR = 'kamaji.clastix.io/component=admin-kubeconfig'
M.ADMIN_KUBECONFIG_KEY = 'super-admin.conf'

local CLIENT_MT = {
  __tostring = function(c) return 'kube.cluster ' .. c.name end,
  __metatable = 'kube.cluster',
}

-- cluster{secret = {namespace=, name= [, key=]} [, probe_timeout=]}
--   -> client | nil, err
-- err is a kube error naming the Secret (err.cluster "NS/NAME", err.secret):
-- the apiserver's when the Secret cannot be read (NotFound, Forbidden),
-- BadKubeconfig when what it holds cannot be used, and the first request's
-- (ConnectionError, Timeout, Unauthorized...) when the cluster does not
-- answer; kube.is_unreachable(err) tells a cluster that is down.
function M.cluster(o)
  if type(o) ~= 'table' or type(o.secret) ~= 'table' or type(o.secret.namespace) ~= 'string'
      or type(o.secret.name) ~= 'string' then
    error('kube.cluster: expected {secret = {namespace=, name= [, key=]}}', 2)
  end
  local s = o.secret
  local key = s.key or M.ADMIN_KUBECONFIG_KEY
  if type(key) ~= 'string' then error('kube.cluster: secret.key must be a string', 2) end
  local bound, err = cluster_open(s.namespace, s.name, key, o.probe_timeout)
  if not bound then return nil, err end
  local c = {
    name = s.namespace .. '/' .. s.name,
    secret = { namespace = s.namespace, name = s.name, key = key },
    null = json.null, dry_run = core.dry_run, FIELD_MANAGER = M.FIELD_MANAGER,
  }
  verbs(c, bound.request, bound)
  for k, v in pairs(M) do
    if type(k) == 'string' and k:match('^is_') then c[k] = v end
  end
  return setmetatable(c, CLIENT_MT)
end

-- clusters{[selector=] [, key=] [, namespace=] [, probe_timeout=]}
--   -> iterator of ref, client, err
-- One step per Secret the label selector picks (default: Kamaji's admin
-- kubeconfigs, key super-admin.conf), in the apiserver's order (namespace,
-- name): ref is {namespace=, name=, key=, cluster="NS/NAME", labels=} (the
-- Secret's labels: its data never becomes a Lua value); client is
-- kube.cluster's for it, or nil with err (a cluster that is down is a
-- step, not the end of the loop). Listing the Secrets raises on failure.
function M.clusters(o)
  o = o or {}
  if type(o) ~= 'table' then error('kube.clusters: expected a table of options', 2) end
  local refs, err = cluster_refs(o.selector or M.ADMIN_KUBECONFIG_SELECTOR, o.namespace)
  if not refs then raise(err) end
  local i = 0
  return function()
    i = i + 1
    local r = refs[i]
    if not r then return nil end
    local ref = { namespace = r.namespace, name = r.name, key = o.key or M.ADMIN_KUBECONFIG_KEY,
      cluster = r.namespace .. '/' .. r.name, labels = r.labels }
    local c, cerr = M.cluster { secret = ref, probe_timeout = o.probe_timeout }
    return ref, c, cerr
  end
end

return M
