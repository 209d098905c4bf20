-- The sweep's pace (host/client/pace.h) on answers alone: migrate.pace replays
-- a list of answers through the controller fleet.each's pool asks, so each
-- rule of pace.h is pinned here with its times; spec/e2e/fleet_pace_spec.lua
-- runs it against the apiserver.
local migrate = require('migrate')

-- A clock of answers: each call answers a request sent `rtt` ms before `t`
-- ms, and the clock moves on by `gap` ms (default: the round trip).
local function answers()
  local list, t = {}, 0
  local self = {}
  function self.ok(rtt, more)
    t = t + rtt
    local a = { sent = (t - rtt) / 1000, at = t / 1000, status = 200 }
    for k, v in pairs(more or {}) do a[k] = v end
    list[#list + 1] = a
    return self
  end
  function self.many(n, rtt, more)
    for _ = 1, n do self.ok(rtt, more) end
    return self
  end
  -- an answer to a request sent `ago` ms before now, answered now
  function self.old(ago, more)
    local a = { sent = (t - ago) / 1000, at = t / 1000, status = 200 }
    for k, v in pairs(more or {}) do a[k] = v end
    list[#list + 1] = a
    return self
  end
  function self.wait(ms) t = t + ms; return self end
  function self.list() return list end
  return self
end

local function replay(ceiling, a, opts)
  opts = opts or {}
  local adapt = opts.adapt ~= false
  return migrate.pace(ceiling, adapt, opts.exempt or {}, a.list())
end

local function windows(steps, from, to)
  local out = {}
  for i = from or 1, to or #steps do out[#out + 1] = steps[i].allowed end
  return out
end

describe('the sweep\'s pace', function()
  it('starts at 2 and grows by one a answer while no answer shows a queue (slow start)', function()
    local steps, sum = replay(64, answers().many(6, 2))
    assert.are.same({ 3, 4, 5, 6, 7, 8 }, windows(steps))
    assert.are.same({ 2, 8, 0, 0, 6 }, { sum.low, sum.high, sum.cuts, sum.throttled, sum.answers })
  end)

  it('ends slow start at the first answer whose own round trip shows more than one request waited, then grows one a round trip', function()
    -- base 2 ms; at a window of 6 an answer of 3 ms says 6 * (1 - 2/3) = 2
    -- requests waited: slow start ends there, though 3 ms is far from
    -- twice the fastest round trip
    local steps = replay(64, answers().many(4, 2).ok(3).many(6, 2))
    assert.are.same({ 3, 4, 5, 6 }, windows(steps, 1, 4))
    assert.is_true(steps[5].window > 6 and steps[5].window < 6.2, tostring(steps[5].window))
    assert.are.same({ 6, 6, 6, 6, 6 }, windows(steps, 5, 9))
    assert.are.equal(7, steps[11].allowed)
    for i = 6, 11 do
      local w = steps[i - 1].window
      assert.is_true(math.abs(steps[i].window - (w + 1 / w)) < 1e-9, i .. ': ' .. steps[i].window)
    end
  end)

  it('holds still while the round trips show between 3 and 5 requests waiting, and gives back above 5', function()
    -- slow start to 8, then round trips of 4 ms against a base of 2 ms:
    -- 8 * (1 - 2/4) = 4 waiting, once the moving average has caught up
    local a = answers().many(6, 2).many(40, 4)
    local steps = replay(64, a)
    local held = steps[#steps].window
    assert.are.same(windows(steps, #steps - 19, #steps), (function()
      local t = {}
      for i = 1, 20 do t[i] = math.floor(held) end
      return t
    end)())
    assert.is_true(held >= 8 and held < 9, tostring(held))
    -- round trips of 8 ms: 6 waiting, the window gives back 1/window a answer
    a.many(20, 8)
    steps = replay(64, a)
    assert.is_true(steps[#steps].window < held - 1, tostring(steps[#steps].window))
  end)

  it('cuts the window to half on a throttle, once a round trip: answers sent before the cut tell of the window it replaced', function()
    local a = answers().many(6, 2)        -- window 8
    a.ok(2, { status = 503 })             -- sent after nothing was cut: 8 -> 4
    a.old(3, { status = 503 })            -- sent before that cut: counted, not cut again
    a.wait(1).ok(2, { status = 503 })     -- sent after it: 4 -> 2
    local steps, sum = replay(64, a)
    assert.are.same({ 4, 4, 2 }, windows(steps, 7, 9))
    assert.are.same({ true, true, true }, { steps[7].throttle, steps[8].throttle, steps[9].throttle })
    assert.are.same({ 2, 3 }, { sum.cuts, sum.throttled })
  end)

  it('holds the window for as long as Retry-After says, then grows again', function()
    local a = answers().many(6, 2)
    a.ok(2, { status = 429, status_body = false, retry_after = 1 }) -- 8 -> 4, held for 1 s
    a.many(10, 2)                                                    -- inside the second
    a.wait(1000).many(4, 2)                                          -- after it
    local steps = replay(64, a)
    assert.are.same({ 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4 }, windows(steps, 7, 17))
    assert.is_true(steps[#steps].window > 4.5, tostring(steps[#steps].window))
  end)

  it('takes a 429 Status without Retry-After (what a PodDisruptionBudget forbids) as an answer, and one in plain text as a throttle', function()
    local steps, sum = replay(64, answers().many(6, 2).ok(2, { status = 429 }))
    assert.is_false(steps[7].throttle)
    assert.are.same({ 9, 0, 0 }, { steps[7].allowed, sum.cuts, sum.throttled })
    steps, sum = replay(64, answers().many(6, 2).ok(2, { status = 429, status_body = false }))
    assert.is_true(steps[7].throttle)
    assert.are.same({ 4, 1, 1 }, { steps[7].allowed, sum.cuts, sum.throttled })
  end)

  it('grows a flow of an Exempt priority level to its ceiling whatever its round trips, and the same answers from another level stop short', function()
    local function rising()
      local a = answers()
      for i = 1, 40 do a.ok(2 + i, { level = 'lvl-a' }) end
      return a
    end
    local steps = replay(16, rising(), { exempt = { 'lvl-a' } })
    assert.are.equal(16, steps[#steps].allowed)
    for _, s in ipairs(steps) do assert.is_true(s.window <= 16) end
    steps = replay(16, rising(), { exempt = { 'lvl-b' } })
    assert.is_true(steps[#steps].allowed < 8, tostring(steps[#steps].allowed))
  end)

  it('never passes its ceiling, and starts there when the ceiling is below 2', function()
    local steps, sum = replay(5, answers().many(20, 2))
    assert.are.equal(5, steps[#steps].allowed)
    assert.are.equal(5, sum.high)
    steps = replay(1, answers().many(3, 2))
    assert.are.same({ 1, 1, 1 }, windows(steps))
  end)

  it('keeps exactly its ceiling with adapt off, whatever the answers, and still counts the throttles', function()
    local a = answers().many(3, 2).ok(2, { status = 503 }).ok(2, { status = 429, status_body = false, retry_after = 1 })
    local steps, sum = replay(6, a, { adapt = false })
    assert.are.same({ 6, 6, 6, 6, 6 }, windows(steps))
    assert.are.same({ 6, 6, 0, 2 }, { sum.low, sum.high, sum.cuts, sum.throttled })
  end)
end)
