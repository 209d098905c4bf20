-- The spec harness for migrations: runs one migration exactly as the runner
-- does (`cozy-migrate exec SLUG FILE`: a supervised child, the sandbox, the
-- header's timeout, the memory cap) against the cluster in KUBECONFIG, and
-- proves a migration idempotent by running it twice: the host's write
-- journal of the second run must show no changed object, and the
-- resourceVersion of every watched object must not move.
local h = require('support.helpers')
local cluster = require('support.cluster')
local json = require('json')
local migrate = require('migrate')

local M = {}

local function exists(p)
  local f = io.open(p, 'rb')
  if f then f:close() end
  return f ~= nil
end

-- A slug for a file's name (exec refuses anything else): lower case, each
-- run of other characters one dash ("lua_krLR8d" -> "lua-krlr8d").
local function slug_of(name)
  local s = name:lower():gsub('[^a-z0-9]+', '-'):gsub('^%-+', ''):gsub('%-+$', '')
  return s ~= '' and s:sub(1, 60):gsub('%-+$', '') or 'script'
end

-- locate(slug_or_path) -> path, slug. A slug is looked up in both tiers of
-- this checkout; anything with a slash or a .lua ending is a file (its slug
-- made from its name).
function M.locate(x)
  if x:find('/', 1, true) or x:match('%.lua$') then
    local path = x:sub(1, 1) == '/' and x or (h.root .. '/' .. x)
    return path, slug_of(path:match('([^/]+)%.lua$') or path:match('([^/]+)$'))
  end
  for _, tier in ipairs({ 'pre-apply', 'background' }) do
    local p = string.format('%s/migrations/%s/%s.lua', h.root, tier, x)
    if exists(p) then return p, x end
  end
  error('no migration ' .. x .. ' in migrations/pre-apply or migrations/background', 3)
end

-- beside(source, tier, slug) -> the script of the spec whose source (as
-- debug.getinfo gives it) is <root>/spec/migrations/<slug>_spec.lua: the
-- same tree's migrations/<tier>/<slug>.lua, wherever that tree is.
function M.beside(source, tier, slug)
  local spec = source:gsub('^@', '')
  local root = spec:match('^(.*)/spec/migrations/[^/]+$') or h.root
  return root .. '/migrations/' .. tier .. '/' .. slug .. '.lua'
end

-- header(slug_or_path) -> {on_error=, requires=, timeout=}, read by the
-- runner's own parser.
function M.header(x)
  local path = M.locate(x)
  local hd, err = migrate.header(h.slurp(path), path:match('[^/]+$'))
  if not hd then error(err, 2) end
  return hd
end

-- run(slug_or_path [, {kubeconfig=, env=, dry_run=}]) -> res, once the
-- cluster has said it is disposable (support.disposable); dry_run: exec
-- --dry-run (every write sent with dryRun=All)
-- res holds exec's JSON line (outcome, reason, message, exit_code, tail,
-- duration_ms, and journal once the host reports one) plus code (exec's
-- exit status), out and output (everything the migration printed or
-- logged, streamed by exec on stderr as "[slug] line").
function M.run(x, opts)
  opts = opts or {}
  local path, slug = M.locate(x)
  local hd = M.header(path)
  local env = {}
  for k, v in pairs(opts.env or {}) do env[k] = v end
  if opts.kubeconfig then env.KUBECONFIG = opts.kubeconfig end
  -- never the cluster of ~/.kube/config by default: exec would take it
  assert(h.has_cluster() or opts.kubeconfig, 'KUBECONFIG is not set: the specs run against a disposable ' ..
    'cluster in KUBECONFIG (a kind cluster, or tools/testenv)')
  require('support.disposable').assert(opts.kubeconfig)
  -- exec reads the header itself, so a timeout names the header's line
  local res
  if opts.dry_run then
    res = h.cozy('exec', '--dry-run', slug, path, { env = env })
  else
    res = h.cozy('exec', slug, path, { env = env })
  end
  local line = res.out:match('([^\n]+)\n?$')
  local ok, d = pcall(json.decode, line or '')
  if not (ok and type(d) == 'table' and d.outcome) then
    error(string.format('exec printed no result line (exit %d)\nstdout: %s\nstderr: %s', res.code, res.out,
      res.err), 2)
  end
  for k, v in pairs(d) do res[k] = v end
  res.output = res.err
  res.header = hd
  return res
end

local function explain(res)
  return string.format('outcome %s (%s): %s\n--- output ---\n%s', tostring(res.outcome), tostring(res.reason),
    tostring(res.message), res.output or res.tail or '')
end
M.explain = explain

-- run_refused(slug_or_path, rule [, opts]) -> res: run() while the
-- apiserver refuses what rule says (cluster.deny's table: group, resource,
-- operations, selector, message, probe), the policy removed again however
-- the run ended: how a spec makes one object of a fleet fail.
function M.run_refused(x, rule, opts)
  local p = cluster.deny(rule)
  local ok, res = pcall(M.run, x, opts)
  cluster.allow(p)
  if not ok then error(res, 0) end
  return res
end

-- assert_ok(res) / assert_failed(res [, pattern]): the outcome ('failed' is
-- a script that raised or exited non-zero; a timeout, a kill or the memory
-- cap have outcomes of their own), and on a mismatch the migration's whole
-- output in the message.
function M.assert_ok(res)
  assert(res.outcome == 'ok', 'the migration failed; ' .. explain(res))
  return res
end

function M.assert_failed(res, pattern)
  assert(res.outcome == 'failed', 'the migration did not fail; ' .. explain(res))
  if pattern then
    assert(tostring(res.message):find(pattern),
      string.format('the failure message does not match %q; %s', pattern, explain(res)))
  end
  return res
end

-- assert_fleet_failed(res, namespace, names [, why]): the migration failed
-- with one FleetFailed error that names exactly len(names) failed objects,
-- each of these (namespace/name, or name when namespace is nil), followed
-- by `why` (a plain string) when given.
function M.assert_fleet_failed(res, namespace, names, why)
  M.assert_failed(res, 'FleetFailed')
  local n = tonumber(tostring(res.message):match('(%d+) of %d+ objects failed'))
  assert(n == #names, string.format('expected %d failed objects; %s', #names, explain(res)))
  for _, name in ipairs(names) do
    local who = (namespace and (namespace .. '/') or '') .. name .. ': '
    local at = tostring(res.message):find(who, 1, true)
    assert(at, string.format('the failure does not name %s; %s', who, explain(res)))
    if why then
      -- the failures are listed one a line, indented; exec's one-line
      -- message keeps the indent, so an entry ends where two spaces begin
      local rest = res.message:sub(at + #who)
      local entry = rest:sub(1, (rest:find('\n', 1, true) or rest:find('  ', 1, true) or #rest + 1) - 1)
      assert(entry:find(why, 1, true), string.format('%s failed, but not with %q; %s', who, why, explain(res)))
    end
  end
  return res
end

-- ---- idempotency ---------------------------------------------------------------

-- watched: a list whose entries are a resource name (namespaced: every
-- object of it in the namespaces this spec created, support.cluster), or
-- {resource, namespaces = {...}}, or {resource, names = {...}} (cluster-scoped
-- objects, by name).
local function entries(watched)
  local out = {}
  for _, w in ipairs(watched) do
    if type(w) == 'string' then w = { w } end
    out[#out + 1] = { resource = w[1] or w.resource, namespaces = w.namespaces, names = w.names }
    if not out[#out].names and not out[#out].namespaces then out[#out].namespaces = cluster.namespaces() end
  end
  return out
end

-- snapshot(watched) -> {["resource ns/name"] = resourceVersion}, read with
-- kubectl, not with the module under test.
function M.snapshot(watched)
  local snap = {}
  for _, w in ipairs(entries(watched)) do
    local lists = {}
    if w.names then
      if #w.names > 0 then
        local names = {}
        for i, n in ipairs(w.names) do names[i] = h.q(n) end
        local r = h.must(h.kc(string.format('get %s %s --ignore-not-found -o json', w.resource,
          table.concat(names, ' '))))
        if not r.out:match('^%s*$') then
          local d = json.decode(r.out)
          lists[#lists + 1] = d.items or { d }
        end
      end
    else
      for _, ns in ipairs(w.namespaces) do
        lists[#lists + 1] = h.kc_json(string.format('get %s -n %s', w.resource, h.q(ns))).items
      end
    end
    for _, items in ipairs(lists) do
      for _, o in ipairs(items) do
        local m = o.metadata
        snap[string.format('%s %s%s', w.resource, m.namespace and (m.namespace .. '/') or '', m.name)] =
          m.resourceVersion
      end
    end
  end
  return snap
end

-- diff(before, after) -> sorted lines naming each object that changed,
-- appeared or disappeared.
function M.diff(before, after)
  local lines = {}
  for k, v in pairs(before) do
    if after[k] == nil then
      lines[#lines + 1] = k .. ': deleted'
    elseif after[k] ~= v then
      lines[#lines + 1] = string.format('%s: resourceVersion %s -> %s', k, v, after[k])
    end
  end
  for k in pairs(after) do
    if before[k] == nil then lines[#lines + 1] = k .. ': created' end
  end
  table.sort(lines)
  return lines
end

-- assert_journal_unchanged(res): when exec reports a write journal
-- (journal = {writes=, changed=, entries={{verb,resource,namespace,name,
-- status,changed}}}), the run must have changed nothing, and a failure
-- names each write that did. Without a journal there is nothing to check.
function M.assert_journal_unchanged(res)
  local j = res.journal
  if type(j) ~= 'table' then return false end
  local wrote = {}
  for _, e in ipairs(j.entries or {}) do
    if e.changed == true then
      local ns = (type(e.namespace) == 'string' and e.namespace ~= '') and (e.namespace .. '/') or ''
      wrote[#wrote + 1] = string.format('%s %s %s%s (%s)', tostring(e.verb), tostring(e.resource), ns,
        tostring(e.name), tostring(e.status))
    end
  end
  assert(j.changed == 0, string.format('the run changed %s object(s) (write journal):\n  %s',
    tostring(j.changed), table.concat(wrote, '\n  ')))
  return true
end

-- assert_idempotent(slug_or_path [, watched [, {expect=, kubeconfig=, env=}]])
-- -> first, second
-- Runs the migration twice; both runs must end with opts.expect (default
-- 'ok'), and the first may not hold a fleet.each whose fn changed objects
-- without returning true (its summary would undercount them). The second run's write journal must show no changed object,
-- anywhere, naming each one that did; and when watched resources are named,
-- none of their objects' resourceVersions may move either (a check made
-- with kubectl, not with the module under test).
function M.assert_idempotent(x, watched, opts)
  opts = opts or {}
  local expect = opts.expect or 'ok'
  watched = watched or {}
  local first = M.run(x, opts)
  assert(first.outcome == expect, string.format('first run: expected %s; %s', expect, explain(first)))
  -- a fleet whose fn changed objects without returning true undercounts
  -- what a run did: fleet.each says so, and so does this
  local quiet = (first.output or ''):match('[^\n]*fn returned nothing %(or false%) for [^\n]*')
  assert(not quiet, 'first run: fleet.each counted changes its fn did not report (return true from fn when ' ..
    'it changes an object):\n  ' .. tostring(quiet))
  local before = #watched > 0 and M.snapshot(watched) or nil
  assert(before == nil or next(before) ~= nil,
    'assert_idempotent: the watched resources hold no object; nothing would be compared')
  local second = M.run(x, opts)
  assert(second.outcome == expect, string.format('second run: expected %s; %s', expect, explain(second)))
  if before then
    local changed = M.diff(before, M.snapshot(watched))
    assert(#changed == 0, 'the second run changed what the first had already done:\n  ' ..
      table.concat(changed, '\n  ') .. '\n--- second run output ---\n' .. (second.output or ''))
  end
  assert(M.assert_journal_unchanged(second), 'exec reported no write journal')
  return first, second
end

-- common(slug, {resource=, crd=, what=, purge={...}, on_error=}): what
-- every spec of a migration over one custom resource shares, called first
-- inside its describe: a cluster, the watched objects purged after each case
-- and removed after the file, the header's on-error as a sentence, and
-- "does nothing and says why" on a cluster that does not serve the resource.
-- The environment of the spec file calling at `level` (busted's: inside a
-- test its `pending` marks that test pending), for cases defined here.
local function spec_env(level)
  local info = debug.getinfo(level + 1, 'f')
  for i = 1, 255 do
    local name, v = debug.getupvalue(info and info.func or print, i)
    if not name then break end
    if name == '_ENV' then return v end
  end
  return _G
end

function M.common(slug, o)
  -- busted's functions, as the spec files see them
  local b = require('busted')
  local env = spec_env(2)
  local setup, after_each, teardown, it, describe = b.setup, b.after_each, b.teardown, b.it, b.describe
  local assert = require('luassert')
  setup(function()
    assert(h.has_cluster(), 'KUBECONFIG must point at a disposable cluster (docs/writing-migrations.md: "The spec harness")')
  end)
  after_each(function() cluster.purge(table.unpack(o.purge)) end)
  teardown(function() cluster.cleanup(table.unpack(o.purge)) end)

  local sentence = o.on_error == 'abort' and 'aborts the upgrade when it fails (on-error=abort)'
    or 'is recorded as failed and does not stop the upgrade when it fails (on-error=warn)'
  it(sentence, function()
    assert.are.equal(o.on_error, M.header(slug).on_error)
  end)

  describe('on a cluster without ' .. o.what, function()
    -- Only a CRD this run created is ever deleted to make the API absent;
    -- a cluster that serves it itself leaves this case pending, saying so.
    local absent, why
    setup(function() absent, why = cluster.crd_absent(o.crd) end)

    it('does nothing and says why', function()
      if not absent then env.pending(why) end
      local res = M.assert_ok(M.run(slug))
      assert.matches(o.resource .. ' is not served: nothing to do', res.output, 1, true)
    end)
  end)
end

return M
