-- One line per line: text from the cluster (a record's reason and message,
-- a Lease holder's identity, a hand-over request, an annotation) is printed
-- with its control bytes escaped, so none can start a line of its own (a
-- forged progress line, a forged row of a table); numeric flags are read
-- exactly. End to end against the real local apiserver.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains = h.contains
local IMAGE = 'reg.example/platform-migrate@sha256:' .. string.rep('5e', 32)

-- every line of text, as a list
local function lines(text)
  local out = {}
  for l in text:gmatch('[^\n]+') do out[#out + 1] = l end
  return out
end

local function no_line_starts(text, prefix, what)
  for _, l in ipairs(lines(text)) do
    assert.is_false(l:sub(1, #prefix) == prefix, (what or 'output') .. ' has a forged line: ' .. l)
  end
end

describe('#e2e one line per line', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('a record whose reason and message hold newlines forges no line of dispatch nor a row of status', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({
      batches = { { '00001-v1.0.0', { 'up-one', 'bg-first', 'bg-second' } } },
      scripts = {
        ['up-one'] = { body = runner.lua_marker(ns, 'up-one') },
        ['bg-first'] = { tier = 'background', on_error = 'warn', body = runner.lua_gen_marker(ns, 'bg-first') },
        ['bg-second'] = { tier = 'background', on_error = 'warn', body = runner.lua_gen_marker(ns, 'bg-second') },
      },
    })
    local forged_row = '  bg-second                                ok'
    local forged_line = '[1/1] background bg-second ... ok'
    runner.make_ledger(ns, {
      ['m.up-one'] = json.encode({ state = 'ok', at = '2026-01-01T00:00:00Z', attempts = 1 }),
      ['m.bg-first'] = json.encode({ state = 'failed', at = '2026-01-01T00:00:00Z', attempts = 1, tier = 'background',
        batch = '00001-v1.0.0', reason = 'Failed\n' .. forged_row, message = 'm\n' .. forged_line }),
    })
    local cm = h.must(h.cozy('index', '--dir', dir, '-o', 'configmap', '--namespace', ns, '--image', IMAGE)).out
    h.must(h.kubectl('apply -f ' .. h.q(h.write(os.tmpname() .. '.yaml', cm))))
    local st = h.cozy('status', '--dir', dir, '--namespace', ns)
    local all = st.out .. st.err
    no_line_starts(all, forged_row, 'status')
    no_line_starts(all, forged_line, 'status')
    local failed = h.cozy('status', '--dir', dir, '--namespace', ns, '--failed')
    no_line_starts(failed.out .. failed.err, forged_row, 'status --failed')
    no_line_starts(failed.out .. failed.err, forged_line, 'status --failed')
    contains(failed.out, 'Failed\\x0a ')
    local d = h.cozy('dispatch', '--namespace', ns, '--dir', dir)
    no_line_starts(d.out .. d.err, forged_row, 'dispatch')
    no_line_starts(d.out .. d.err, forged_line, 'dispatch')
  end)

  it('a Lease holder whose identity holds a newline forges no line of the waiting runner', function()
    local ns = runner.new_ns()
    local dir = fixture.tree({ batches = { { '00001-v1.0.0', { 'alpha' } } },
      scripts = { alpha = { body = runner.lua_marker(ns, 'alpha') } } })
    runner.make_ledger(ns, {})
    local forged = '[1/1] pre-apply alpha ... ok'
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns },
      spec = { holderIdentity = 'ghost\n' .. forged, leaseDurationSeconds = 300,
               renewTime = os.date('!%Y-%m-%dT%H:%M:%S.000000Z'), leaseTransitions = 0 } })
    local res = runner.run(dir, ns, '--lock-timeout', '1s')
    assert.are.equal(5, res.code, res.out .. res.err)
    no_line_starts(res.out .. res.err, forged)
    contains(res.err, 'is held by ghost\\x0a[1/1] pre-apply alpha ... ok')
    assert.is_nil(runner.records(ns).alpha)
  end)

  it('a script\'s log call of several lines is said as that many lines, each with its level', function()
    local res = h.lua([[require('log').warn('first\nsecond\r\27[2Kthird')]])
    assert.are.equal(0, res.code, res.err)
    contains(res.err, 'warn: first\n')
    contains(res.err, 'warn: second\\x0d\\x1b[2Kthird\n')
  end)

  it('reads every numeric flag exactly: no space, sign, leading zero or suffix', function()
    local f = h.write(os.tmpname() .. '.lua', 'print("ran")')
    for _, flag in ipairs({ '--concurrency', '--memory', '--max-attempts' }) do
      for _, v in ipairs({ ' 8', '8 ', '+8', '-8', '08', '8x', '0x8', '1e1', '' }) do
        local args = flag == '--max-attempts' and { 'plan', '--dir', h.tmpdir(), flag, v } or { 'lua', flag, v, f }
        local res = h.cozy(table.unpack(args))
        assert.are.equal(2, res.code, flag .. " '" .. v .. "': " .. res.out .. res.err)
        contains(res.err, flag .. ": '" .. v .. "' is not a")
        assert.is_nil(res.out:find('ran', 1, true))
      end
    end
    assert.are.equal(0, h.cozy('lua', '--concurrency', '8', '--memory', '64', f).code)
  end)
end)
