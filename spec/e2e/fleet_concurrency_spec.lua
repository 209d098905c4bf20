-- fleet.each with its writes in flight together (the host's request pool),
-- end to end: `cozy-migrate lua` against the real apiserver, through
-- tools/cluster/faultproxy where the case is about surviving faults (it
-- counts, per object, what it received and what it forwarded), over
-- HTTP/2 streams as the apiserver offers them and over HTTP/1.1 keep-alive
-- connections.
local h = require('support.helpers')
local proxy = require('support.proxy')
local cmset = require('support.cmset')
local json = require('json')

local NS = string.format('fc-%d-%d', os.time(), math.random(1000, 9999))
local must = h.must

-- n ConfigMaps labelled set=SET and watch=SET, data.v = 'old'; returns
-- their names
local function configmaps(set, n) return cmset.make(NS, set, n, { watch = set }) end

-- runs body with kube, json, fleet, core and NS, SET in scope; the last line
-- printed is decoded into res.json
local function sweep(set, body, ...) return cmset.sweep(NS, set, body, ...) end

-- fn for the sweeps below: data.v = 'new' unless it already is, and a log
-- of when each object's fn started and ended, to tell how many overlapped
local BUMP = [[
local events, open, most = {}, 0, 0
local function bump(obj)
  if obj.data.v == 'new' then return false end
  open = open + 1
  if open > most then most = open end
  kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = obj.metadata.namespace })
  open = open - 1
  return true
end
]]

-- A watch on the objects labelled watch=SET: how many times the apiserver
-- changed each (a repeated write that changes nothing is no event). It is
-- known to be established once a sentinel's change has shown in it.
local function watch(set)
  local w = { dir = h.tmpdir() }
  local kubeconfig = assert(os.getenv('KUBECONFIG'), 'KUBECONFIG is unset')
  local bin = h.root .. '/build/testenv/bin/kubectl'
  local f = io.open(bin, 'rb')
  if f then f:close() else bin = 'kubectl' end
  h.kcreate({ apiVersion = 'v1', kind = 'ConfigMap',
    metadata = { name = set .. '-sentinel', namespace = NS, labels = { watch = set } } }, 'configmaps')
  assert(os.execute(string.format(
    "%s --kubeconfig %s get configmaps -n %s -l watch=%s --watch-only --output-watch-events " ..
    "-o jsonpath='{.type} {.object.metadata.name}{\"\\n\"}' >%s 2>&1 & echo $! >%s",
    h.q(bin), h.q(kubeconfig), NS, set, h.q(w.dir .. '/events'), h.q(w.dir .. '/pid'))))
  w.pid = assert(h.slurp(w.dir .. '/pid'):match('%d+'))
  local n = 0
  local function pokes() return select(2, h.slurp(w.dir .. '/events'):gsub('MODIFIED ' .. set .. '%-sentinel', '')) end
  h.eventually(20, function()
    n = n + 1
    must(h.kubectl(string.format('label configmap %s-sentinel -n %s --overwrite poke=%d', set, NS, n)))
    return pokes() > 0
  end)
  -- Stops once a last poke came through: a watch sends events in the order
  -- of their resourceVersions, so every change made before it is in.
  function w.stop()
    local seen = pokes()
    n = n + 1
    must(h.kubectl(string.format('label configmap %s-sentinel -n %s --overwrite poke=%d', set, NS, n)))
    assert(h.eventually(30, function() return pokes() > seen end), 'the watch never saw the last poke')
    os.execute('kill ' .. w.pid)
    local changes = {}
    for kind, name in h.slurp(w.dir .. '/events'):gmatch('(%u+) (%S+)') do
      if kind == 'MODIFIED' and name ~= set .. '-sentinel' then changes[name] = (changes[name] or 0) + 1 end
    end
    return changes
  end
  return w
end

local function values(set) return cmset.values(NS, set) end

describe('#e2e fleet.each with concurrent writes', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
  end)
  teardown(function()
    h.kubectl('delete configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  it('keeps as many objects in flight as --concurrency says, never more, and one at a time with 1', function()
    local set = 'conc'
    configmaps(set, 40)
    local res = must(sweep(set, BUMP .. [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET } }, bump)
      print(json.encode({ changed = r.changed, most = most }))
    ]], '--concurrency', '6'))
    assert.are.same({ changed = 40, most = 6 }, res.json)
    res = must(sweep(set, [[
      local open, most = 0, 0
      local opts = { namespace = NS, label_selector = { set = SET }, concurrency = 1 }
      local r = fleet.each('configmaps', opts, function(obj)
        open = open + 1
        if open > most then most = open end
        kube.get('configmaps', obj.metadata.name, { namespace = NS })
        open = open - 1
        return false
      end)
      print(json.encode({ seen = r.seen, most = most }))
    ]]))
    assert.are.same({ seen = 40, most = 1 }, res.json)
  end)

  it('takes the default from cozy-migrate run --concurrency into each migration', function()
    local runner, fixture = require('support.runner'), require('support.fixture')
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    configmaps('run', 12)
    local dir = fixture.tree { batches = { { '00001-v1', { 'sweep' } } }, scripts = { sweep = { body = string.format([[
local kube, fleet = require('kube'), require('fleet')
local open, most = 0, 0
local r = fleet.each('configmaps', { namespace = %q, label_selector = { set = 'run' } }, function(obj)
  open = open + 1
  if open > most then most = open end
  kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = obj.metadata.namespace })
  open = open - 1
  return true
end)
print(string.format('swept %%d, at most %%d at once', r.changed, most))
]], NS) } } }
    local res = must(runner.run(dir, ns, '--concurrency', '3'))
    assert.matches('swept 12, at most 3 at once', res.out .. res.err, 1, true)
    runner.delete_namespaces()
  end)

  it('refuses a --concurrency that is not a number from 1 to 64 with exit 2, running nothing', function()
    for _, v in ipairs({ '0', '65', 'many', '' }) do
      local res = sweep('none', 'print("ran")', '--concurrency', v)
      assert.are.equal(2, res.code, v .. ': ' .. res.err)
      assert.matches("--concurrency: '" .. v .. "' is not a number from 1 to 64", res.err, 1, true)
      assert.is_nil(res.out:find('ran', 1, true))
    end
  end)

  for _, mode in ipairs({ { name = 'HTTP/2', args = '' }, { name = 'HTTP/1.1', args = '-http1' } }) do
    describe('through injected faults over ' .. mode.name, function()
      local p
      setup(function() p = proxy.start(mode.args .. ' -seed 11') end)
      teardown(function() proxy.stop(p) end)

      it('writes every object exactly once and the journal counts each change once', function()
        local set = 'f' .. (mode.args == '' and 'h2' or 'h1')
        local names = configmaps(set, 60)
        local base = '/api/v1/namespaces/' .. NS .. '/configmaps/'
        proxy.faults(p, {
          'method=PATCH,path=' .. base .. ',action=503,retry-after=0,every=4',
          'method=PATCH,path=' .. base .. ',action=429,retry-after=0,every=5',
          'method=PATCH,path=' .. base .. ',action=reset,every=7',
        })
        local w = watch(set)
        local res = must(sweep(set, BUMP .. [[
          local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET } }, bump)
          local j = core.journal()
          local names = {}
          for _, e in ipairs(j.entries) do names[#names + 1] = e.name end
          print(json.encode({ seen = r.seen, changed = r.changed, most = most, writes = j.writes,
            jchanged = j.changed, entries = #j.entries + (j.more or 0), names = names }))
        ]], '--kubeconfig', p.kubeconfig, '--concurrency', '8'))
        local out = res.json
        assert.are.same({ seen = 60, changed = 60, writes = 60, jchanged = 60, entries = 60, most = 8 },
          { seen = out.seen, changed = out.changed, writes = out.writes, jchanged = out.jchanged,
            entries = out.entries, most = out.most })
        -- the entries the journal keeps name distinct objects of the set
        local distinct = {}
        for _, n in ipairs(out.names) do
          assert.matches('^' .. set .. '%-%d+$', n)
          assert.is_nil(distinct[n], n .. ' has two entries')
          distinct[n] = true
        end
        local c = proxy.counts(p)
        local changes = w.stop()
        local faulted = 0
        for _, n in ipairs(names) do
          local key = 'PATCH ' .. base .. n
          assert.are.equal(1, changes[n], n .. ' was changed ' .. tostring(changes[n]) .. ' times')
          if mode.args ~= '' then
            -- over HTTP/1.1 a connection carries one request: the proxy's
            -- resets never drop one it forwarded, so each PATCH arrived once
            assert.are.equal(1, c.forwarded[key],
              key .. ' reached the apiserver ' .. tostring(c.forwarded[key]) .. ' times')
          else
            -- over HTTP/2 a reset drops every stream of the connection, some
            -- already forwarded: those are repeated (merge patches are
            -- idempotent), and the repeat changes nothing (the watch above)
            assert.is_true(c.forwarded[key] >= 1, key .. ' never reached the apiserver')
          end
          faulted = faulted + (c.faulted[key] or 0)
        end
        assert.is_true(faulted >= 20, 'too few faults to prove anything: ' .. faulted)
        for _, v in pairs(values(set)) do assert.are.equal('new', v) end
        -- each retry told, as for a request sent alone
        assert.matches('retrying PATCH ' .. base, res.err, 1, true)
      end)
    end)
  end

  it('reports a failing object of a concurrent sweep exactly as a sequential sweep does', function()
    local set = 'fail'
    configmaps(set, 30)
    local body = [[
      local opts = { namespace = NS, label_selector = { set = SET }, concurrency = CONC }
      local ok, err = pcall(fleet.each, 'configmaps', opts,
        function(obj)
          local i = tonumber(obj.metadata.name:match('(%d+)$'))
          if i % 7 == 0 then error('cannot migrate ' .. obj.metadata.name, 0) end
          if i % 11 == 0 then
            -- refused by the apiserver: an invalid label value
            kube.patch('configmaps', obj.metadata.name, { metadata = { labels = { bad = 'not valid!' } } },
              { namespace = NS })
          end
          if i % 13 == 0 then
            -- refused by the host: the ledger is the runner's
            kube.patch('configmaps', core.ledger_name, { data = { x = '1' } }, { namespace = core.ledger_namespace })
          end
          return false
        end)
      local failed = {}
      for _, f in ipairs(err.failed) do
        failed[#failed + 1] = { namespace = f.namespace, name = f.name, message = f.message, code = f.code,
          reason = f.reason }
      end
      print(json.encode({ ok = ok, reason = err.reason, message = err.message, failed = failed, seen = err.seen }))
    ]]
    local seq = must(sweep(set, (body:gsub('CONC', '1')), '--concurrency', '8')).json
    local conc = must(sweep(set, (body:gsub('CONC', '8')))).json
    -- each sweep is its own script file, which an apiserver refusal names
    for _, r in ipairs({ seq, conc }) do
      r.message = r.message:gsub('/[^ ]-%.lua:(%d+): ', 'SCRIPT:%1: ')
      for _, f in ipairs(r.failed) do f.message = f.message:gsub('^/[^ ]-%.lua:(%d+): ', 'SCRIPT:%1: ') end
    end
    assert.is_false(conc.ok)
    assert.are.equal('FleetFailed', conc.reason)
    assert.are.equal(30, conc.seen)
    -- 7, 14, 21, 28 raise; 11, 22 are refused by the apiserver; 13, 26 by the guard
    assert.are.equal(8, #conc.failed)
    assert.are.same(seq, conc)
    local by = {}
    for _, f in ipairs(conc.failed) do by[f.name] = f end
    assert.are.same({ 422, 'Invalid' }, { by['fail-011'].code, by['fail-011'].reason })
    assert.are.equal('LedgerProtected', by['fail-013'].reason)
    assert.are.equal('cannot migrate fail-007', by['fail-007'].message)
    assert.matches(NS .. '/fail-022: ', conc.message, 1, true)
  end)

  it('sends a dry run of every write and changes nothing, its report and journal whole', function()
    local set = 'dry'
    configmaps(set, 20)
    local res = must(sweep(set, BUMP .. [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET } }, bump)
      local j = core.journal()
      print(json.encode({ changed = r.changed, writes = j.writes, jchanged = j.changed, most = most }))
    ]], '--dry-run'))
    assert.are.same({ changed = 20, writes = 20, jchanged = 20, most = 8 }, res.json)
    for _, v in pairs(values(set)) do assert.are.equal('old', v) end
    local reports = 0
    for _ in res.out:gmatch('dry%-run: would patch') do reports = reports + 1 end
    assert.are.equal(20, reports, res.out)
  end)

  it('keeps a request\'s answer for its own thread, however a script resumes or closes it meanwhile', function()
    configmaps('own', 1)
    local res = must(sweep('own', [[
      local function get() return kube.get('configmaps', SET .. '-001', { namespace = NS }) end
      local co = coroutine.create(get)
      core.adopt(co)
      local _, first = coroutine.resume(co)
      local _, early = coroutine.resume(co) -- before its answer: it goes on waiting
      local back = core.await()
      local ok, obj = coroutine.resume(co)
      -- one closed while waiting: its answer lands in memory still held
      local gone = coroutine.create(get)
      core.adopt(gone)
      coroutine.resume(gone)
      coroutine.close(gone)
      for i = 1, 300000 do local _ = { i } end -- garbage enough for full collections
      local late = core.await()
      print(json.encode({ first = first == core.PENDING, early = early == core.PENDING, same = back == co,
        ok = ok, name = obj.metadata.name, late = late == gone, dead = coroutine.status(late),
        none = core.await() == nil }))
    ]]))
    assert.are.same({ first = true, early = true, same = true, ok = true, name = 'own-001', late = true,
      dead = 'dead', none = true }, res.json)
  end)

  describe('when the migration\'s deadline fires with writes in flight', function()
    local p
    setup(function() p = proxy.start('-seed 13') end)
    teardown(function() proxy.stop(p) end)

    it('counts every write the apiserver may have applied in the record: answered ones as they came, the others unknown', function()
      local runner, fixture = require('support.runner'), require('support.fixture')
      local set = 'late'
      configmaps(set, 40)
      local base = '/api/v1/namespaces/' .. NS .. '/configmaps/'
      -- the first 16 PATCHes are answered at once; each later one lands on
      -- the apiserver, and its answer comes 10 s later, past the deadline
      -- (4 s: time enough for the first 16 on a loaded machine)
      proxy.faults(p, { 'method=PATCH,path=' .. base .. set .. '-,action=slow-after,delay=10,skip=16' })
      local ns = runner.new_ns()
      runner.make_ledger(ns, {})
      local dir = fixture.tree { batches = { { '00001-v1', { 'sweep' } } }, scripts = { sweep = {
        on_error = 'warn', timeout = '4s', body = string.format([[
local kube, fleet = require('kube'), require('fleet')
-- a fixed pace: the adaptive one would send fewer once the answers slow
fleet.each('configmaps', { namespace = %q, label_selector = { set = %q }, adapt = false }, function(obj)
  kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = obj.metadata.namespace })
  return true
end)
]], NS, set) } } }
      local res = runner.run(dir, ns, '--kubeconfig', p.kubeconfig, '--concurrency', '8')
      assert.are.equal(0, res.code, res.out .. res.err)
      local rec = runner.records(ns).sweep
      assert.are.equal('failed', rec.state)
      assert.are.equal('Timeout', rec.reason)
      local j = type(rec.journal) == 'string' and json.decode(rec.journal) or rec.journal
      local applied = 0
      for _, v in pairs(values(set)) do if v == 'new' then applied = applied + 1 end end
      -- on a failure: how often the proxy saw each object's PATCH, what it
      -- printed, the run's output and its journal
      local seen = {}
      for k, v in pairs(proxy.counts(p).received or {}) do
        if k:find('^PATCH ') then seen[#seen + 1] = k:match('[^/]+$') .. '=' .. tostring(v) end
      end
      table.sort(seen)
      local why = table.concat({ table.concat(seen, ' '), proxy.log(p, 40), res.out .. res.err, json.encode(j) }, '\n')
      assert.are.equal(16 + 8, applied, 'the apiserver applied the 16 answered and the 8 in flight\n' .. why)
      -- every write the apiserver may have applied is counted ...
      assert.are.equal(applied, j.writes, why)
      -- ... those without an answer as unknown, never as unchanged
      assert.are.equal(16, j.changed, why)
      assert.are.equal(8, j.unknown, why)
      runner.delete_namespaces()
    end)
  end)

  it('tells a coroutine it never started from its own, and counts that coroutine\'s write', function()
    -- (only under `lua --stdlib-internals`: a migration cannot reach kube.core)
    configmaps('foreign', 3)
    local res = sweep('foreign', [[
      local co = coroutine.create(function()
        kube.patch('configmaps', SET .. '-001', { data = { v = 'new' } }, { namespace = NS })
      end)
      core.adopt(co)
      coroutine.resume(co)
      local ok, err = pcall(fleet.each, 'configmaps', { namespace = NS, label_selector = { set = SET } },
        function(obj) kube.get('configmaps', obj.metadata.name, { namespace = NS }); return false end)
      local j = core.journal()
      print(json.encode({ ok = ok, err = tostring(err), writes = j.writes, changed = j.changed,
        unknown = j.unknown or 0 }))
    ]])
    must(res)
    local out = res.json
    -- the foreign answer came back during the sweep (refused, one line,
    -- never a crash) or after it (still in the pool: a write in flight)
    if out.ok then
      assert.are.same({ writes = 1, changed = 0, unknown = 1 }, { writes = out.writes, changed = out.changed, unknown = out.unknown })
    else
      assert.matches('fleet.each: an answer came back for a coroutine this sweep did not start', out.err, 1, true)
      assert.are.same({ writes = 1, changed = 1 }, { writes = out.writes, changed = out.changed })
    end
    assert.are.equal('new', values('foreign')['foreign-001'])
  end)

  it('lets an error of the list itself through once what is in flight is done', function()
    local res = sweep('none', [[
      local ok, err = pcall(fleet.each, 'nosuchthings.example.com', {}, function() return false end)
      print(json.encode({ ok = ok, reason = err.reason }))
    ]])
    must(res)
    assert.are.same({ ok = false, reason = 'UnknownResource' }, res.json)
  end)
end)
