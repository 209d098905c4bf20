-- fleet.each's pace (host/client/pace.h): its concurrency is a ceiling under
-- an adaptive bound that slows down when the apiserver throttles and comes
-- back up when it stops; its list is read a page ahead; kube.sleep in fn
-- holds up its own object only. End to end through `cozy-migrate lua`
-- against the real apiserver, through tools/cluster/faultproxy where the
-- case needs throttling or a slow answer.
local h = require('support.helpers')
local proxy = require('support.proxy')
local cmset = require('support.cmset')

local NS = string.format('fp-%d-%d', os.time(), math.random(1000, 9999))
local must = h.must

local function configmaps(set, n) return cmset.make(NS, set, n) end
local function sweep(set, body, ...) return cmset.sweep(NS, set, body, ...) end
local function values(set) return cmset.values(NS, set) end

describe('#e2e fleet.each\'s adaptive pace', function()
  local p
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    p = proxy.start('-seed 17')
  end)
  teardown(function()
    proxy.stop(p)
    h.kubectl('delete configmaps --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  it('slows down while the apiserver answers 429 with Retry-After, comes back up once it stops, and writes each object exactly once', function()
    local set = 'throttled'
    local names = configmaps(set, 160)
    local base = '/api/v1/namespaces/' .. NS .. '/configmaps/'
    -- the first 12 PATCHes after the first 16 are refused, as API Priority
    -- and Fairness refuses what its queue cannot hold
    proxy.faults(p, { 'method=PATCH,path=' .. base .. ',action=429,retry-after=1,skip=16,count=12' })
    -- The window is held (no increase) for the Retry-After's second after
    -- the last refusal, and the other 132 objects take less than that on a
    -- local apiserver: the last 16 wait 1.5 s in fn first (kube.sleep holds
    -- up its own object only), so their writes are answered after the hold
    -- however fast or loaded the machine is, and the window is seen growing.
    local res = must(sweep(set, [[
      local started = 0
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 16 },
        function(obj)
          started = started + 1
          if started > 144 then kube.sleep(1.5) end
          kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS })
          return true
        end)
      print(json.encode({ changed = r.changed, pace = r.pace }))
    ]], '--kubeconfig', p.kubeconfig))
    local pace = res.json.pace
    assert.are.equal(160, res.json.changed)
    assert.are.equal(16, pace.ceiling)
    assert.are.equal(12, pace.throttled)
    -- slowed: the window was cut, to half or less of the most it reached
    assert.is_true(pace.cuts >= 1, res.out)
    assert.is_true(pace.low * 2 <= pace.high, res.out)
    -- and came back up after the 429s stopped: by at least 2 over the 16
    -- answers after the hold (one per window's worth of answers)
    assert.is_true(pace.window >= pace.low + 2, res.out)
    -- said where an operator reads the run
    assert.matches('configmaps: the apiserver throttled 12 of %d+ answers; in flight between %d+ and %d+ of 16', res.err)
    -- each object written once: a 429 is a refusal the apiserver never
    -- acted on, and the retry is the one write that reached it
    local c = proxy.counts(p)
    local refused = 0
    for _, n in ipairs(names) do
      local key = 'PATCH ' .. base .. n
      assert.are.equal(1, c.forwarded[key], key .. ' reached the apiserver ' .. tostring(c.forwarded[key]) .. ' times')
      refused = refused + (c.faulted[key] or 0)
    end
    assert.are.equal(12, refused)
    for _, v in pairs(values(set)) do assert.are.equal('new', v) end
  end)

  it('grows to its ceiling for a flow API Priority and Fairness never queues (the admin\'s, of an Exempt level)', function()
    local set = 'exempt'
    configmaps(set, 120)
    local res = must(sweep(set, [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 12 },
        function(obj)
          kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS })
          return true
        end)
      print(json.encode({ changed = r.changed, pace = r.pace }))
    ]]))
    local pace = res.json.pace
    assert.are.equal(120, res.json.changed)
    assert.is_true(pace.exempt, res.out)
    assert.are.same({ 12, 12, 0 }, { pace.high, pace.window, pace.throttled })
  end)

  it('stops short of API Priority and Fairness\'s refusals for a flow it gives few seats', function()
    if not h.run(h.q(h.root .. '/tools/testenv') .. ' status').ok then
      pending('needs the local apiserver of tools/testenv (tools/testenv apf)')
      return
    end
    local kc = h.must(h.run(h.q(h.root .. '/tools/testenv') .. ' apf fp-seats 1 4')).out:gsub('%s+$', '')
    local set = 'seats'
    configmaps(set, 300)
    local res = must(sweep(set, [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 64 },
        function(obj)
          kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS })
          return true
        end)
      print(json.encode({ changed = r.changed, pace = r.pace }))
    ]], '--kubeconfig', kc))
    local pace = res.json.pace
    assert.are.equal(300, res.json.changed)
    -- 3 seats and a queue of 4: the window stayed far below its ceiling
    assert.is_false(pace.exempt, res.out)
    assert.is_true(pace.high < 16, res.out)
    assert.is_true(pace.throttled <= pace.answers * 0.05, res.out)
    assert.matches('configmaps: .*in flight between %d+ and %d+ of 64', res.err)
    for _, v in pairs(values(set)) do assert.are.equal('new', v) end
  end)

  it('keeps exactly its concurrency in flight with adapt = false, whatever the answers', function()
    local set = 'fixed'
    configmaps(set, 40)
    local base = '/api/v1/namespaces/' .. NS .. '/configmaps/'
    proxy.faults(p, { 'method=PATCH,path=' .. base .. ',action=429,retry-after=0,every=4' })
    local res = must(sweep(set, [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 6,
        adapt = false }, function(obj)
          kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS })
          return true
        end)
      print(json.encode({ changed = r.changed, pace = r.pace }))
    ]], '--kubeconfig', p.kubeconfig))
    local pace = res.json.pace
    assert.are.equal(40, res.json.changed)
    assert.is_true(pace.throttled >= 10, res.out)
    assert.are.same({ 6, 6, 6, 0, false }, { pace.low, pace.high, pace.window, pace.cuts, pace.adapt })
    assert.matches('in flight between 6 and 6 of 6 %(fixed%)', res.err)
    local bad = sweep(set, [[fleet.each('configmaps', { namespace = NS, adapt = 'no' }, function() return false end)]])
    assert.are_not.equal(0, bad.code)
    assert.matches('fleet.each: opts.adapt must be true or false', bad.err, 1, true)
  end)

  it('asks for the next page of the list while the current page\'s writes are in flight', function()
    local set = 'paged'
    configmaps(set, 20)
    local base = '/api/v1/namespaces/' .. NS .. '/configmaps'
    -- the second page's answer comes 4 s late; the writes are answered at once
    proxy.faults(p, { 'method=GET,path=' .. base .. ',query=continue=,action=slow-after,delay=4' })
    local res = must(sweep(set, [[
      local t0, page1_done, page2_start = core.now(), 0, nil
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 5,
        limit = 10 }, function(obj)
          local i = tonumber(obj.metadata.name:match('(%d+)$'))
          if i > 10 and not page2_start then page2_start = core.now() - t0 end
          kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS })
          if i <= 10 then page1_done = core.now() - t0 end
          return true
        end)
      print(json.encode({ changed = r.changed, page1_done = page1_done, page2_start = page2_start }))
    ]], '--kubeconfig', p.kubeconfig))
    local out = res.json
    assert.are.equal(20, out.changed)
    -- the first page's ten writes (two rounds of five) were all answered
    -- while the second page was still on its way: its request had gone out
    -- before them, not after the first page was used up (which would have
    -- held their answers behind a 4 s wait)
    assert.is_true(out.page1_done + 2 < out.page2_start, res.out)
    assert.is_true(proxy.counts(p).faulted['GET ' .. base] >= 1, 'the second page was not slowed')
  end)

  it('lets kube.sleep in a concurrent fn hold up its own object only', function()
    local set = 'sleepy'
    configmaps(set, 10)
    local res = must(sweep(set, [[
      local events = {}
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 10 },
        function(obj)
          local name = obj.metadata.name
          if name == SET .. '-001' then
            kube.sleep(3)
            events[#events + 1] = 'woke ' .. name
          end
          kube.patch('configmaps', name, { data = { v = 'new' } }, { namespace = NS })
          events[#events + 1] = 'done ' .. name
          return true
        end)
      -- a sleep outside the sweep still sleeps here
      local t = core.now()
      kube.sleep(0.2)
      print(json.encode({ changed = r.changed, events = events, slept = core.now() - t }))
    ]]))
    local out = res.json
    assert.are.equal(10, out.changed)
    assert.are.equal(11, #out.events)
    -- the nine others were written while the first slept
    for i = 1, 9 do assert.matches('^done sleepy%-0', out.events[i]) end
    assert.are.same({ 'woke sleepy-001', 'done sleepy-001' }, { out.events[10], out.events[11] })
    assert.is_true(out.slept >= 0.2)
    for _, v in pairs(values(set)) do assert.are.equal('new', v) end
  end)

  it('sleeps in a script\'s own coroutine inside fn without yielding the sweep\'s', function()
    local set = 'owncoro'
    configmaps(set, 4)
    local res = must(sweep(set, [[
      local r = fleet.each('configmaps', { namespace = NS, label_selector = { set = SET }, concurrency = 4 },
        function(obj)
          local co = coroutine.wrap(function() kube.sleep(0.05); return 'slept' end)
          assert(co() == 'slept')
          return false
        end)
      print(json.encode({ seen = r.seen, failed = r.failed }))
    ]]))
    assert.are.same({ seen = 4, failed = 0 }, res.json)
  end)
end)
