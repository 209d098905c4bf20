-- host/ keeps one include direction (docs/internals.md "Layers"): tools/layers, which
-- `make lint` runs, passes on the tree as it is and fails, naming the file
-- and line, on a copy with each kind of violation planted in it.
local h = require('support.helpers')

local function layers(root)
  return h.run(h.q(h.root .. '/tools/layers') .. ' ' .. h.q(root))
end

-- copy_host() -> a scratch root holding a copy of host/
local function copy_host()
  local d = h.tmpdir()
  h.must(h.run('cp -r ' .. h.q(h.root .. '/host') .. ' ' .. h.q(d .. '/host')), 'copy host/')
  return d
end

local function append(path, text)
  local f = assert(io.open(path, 'ab'))
  f:write(text)
  f:close()
end

local function plant(file, text, needle)
  local d = copy_host()
  append(d .. '/host/' .. file, text)
  local res = layers(d)
  h.run('rm -rf ' .. h.q(d))
  assert.are.equal(1, res.code, res.out .. res.err)
  h.contains(res.out, 'host/' .. file .. ':', 'the problem names the file')
  h.contains(res.out, needle, 'the problem says what is wrong')
  return res
end

describe('the layers of host/', function()
  it('keep base <- formats <- client <- door <- preview <- gateway <- lua <- proc <- run <- cli as the tree is', function()
    local res = layers(h.root)
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('', res.out)
  end)

  it('are broken by a lower layer including a higher one', function()
    plant('client/rest.c', '\n#include "run/runner.h"\n', 'client/ may not include run/runner.h')
  end)

  -- The rooms that were kube/: each uses only the ones below it.
  it('are broken by the client including the door above it', function()
    plant('client/rest.c', '\n#include "door/door.h"\n', 'client/ may not include door/door.h')
  end)

  it('are broken by the door including the preview above it', function()
    plant('door/door.c', '\n#include "preview/rules.h"\n', 'door/ may not include preview/rules.h')
  end)

  it('are broken by the preview including the gateway above it', function()
    plant('preview/rules.c', '\n#include "gateway/gateway.h"\n', 'preview/ may not include gateway/gateway.h')
  end)

  it('are broken by the gateway including the Lua module above it', function()
    plant('gateway/server.c', '\n#include "lua/luakube.h"\n', 'gateway/ may not include lua/luakube.h')
  end)

  it('are broken by a file left in kube/, no layer any more', function()
    local d = copy_host()
    h.must(h.run('mkdir -p ' .. h.q(d .. '/host/kube')), 'mkdir kube/')
    h.write(d .. '/host/kube/stray.c', '/* stray */\n')
    local res = layers(d)
    h.run('rm -rf ' .. h.q(d))
    assert.are.equal(1, res.code, res.out .. res.err)
    h.contains(res.out, 'host/kube/stray.c:1: not in one of the layer folders', 'the file in kube/ is named')
  end)

  it('are broken by the planner including the CLI above it', function()
    plant('run/plan.c', '\n#include "cli/cli.h"\n', 'run/ may not include cli/cli.h')
  end)

  it('are broken by release/ reaching the cluster layer', function()
    plant('release/lint.c', '\n#include "client/rest.h"\n', 'release/ may not include client/rest.h')
  end)

  it('are broken by the sandbox reaching up to the supervisor above it', function()
    plant('lua/sandbox.c', '\n#include "proc/child.h"\n', 'lua/ may not include proc/child.h')
  end)

  it('are broken by the supervisor reaching up to the runner above it', function()
    plant('proc/child.c', '\n#include "run/runner.h"\n', 'proc/ may not include run/runner.h')
  end)

  it('are broken by run/ including release/, which only cli/ may', function()
    plant('run/runner.c', '\n#include "release/order.h"\n', 'run/ may not include release/order.h')
  end)

  -- cli/ holds no migration logic: a migration's child, and the cluster,
  -- are run/'s to reach (run/launch.h), so cli/ includes no kube/ or proc/
  -- header even though both lie below it.
  it('are broken by the command line reaching the cluster layer itself', function()
    plant('cli/script.c', '\n#include "gateway/gateway.h"\n', 'cli/ may not include gateway/gateway.h')
  end)

  it('are broken by the command line launching a child itself', function()
    plant('cli/run.c', '\n#include "proc/child.h"\n', 'cli/ may not include proc/child.h')
  end)

  it('are broken by a pure layer including a Lua header', function()
    plant('formats/record.c', '\n#include <lua.h>\n', 'formats/ links without Lua')
  end)

  it('are broken by the gateway including a Lua header', function()
    plant('gateway/server.c', '\n#include <lauxlib.h>\n', 'gateway/ links without Lua')
  end)

  it('are broken by an include that names no layer folder', function()
    plant('lua/sandbox.c', '\n#include "util.h"\n', 'names no layer folder')
  end)

  it('are broken by a layer below run/ printing', function()
    plant('door/guard.c', '\nstatic void noisy(void) { printf("x\\n"); }\n', 'door/ prints nothing')
  end)

  it('are broken by the gateway printing', function()
    plant('gateway/server.c', '\nstatic void noisy(void) { puts("x"); }\n', 'gateway/ prints nothing')
  end)

  it('are broken by a file directly in host/', function()
    local d = copy_host()
    h.write(d .. '/host/stray.c', '/* stray */\n')
    local res = layers(d)
    h.run('rm -rf ' .. h.q(d))
    assert.are.equal(1, res.code, res.out .. res.err)
    h.contains(res.out, "host/stray.c:1: a file directly in host/", 'the stray file is named')
  end)

  it('report the line of the planted include', function()
    local d = copy_host()
    local file = d .. '/host/base/util.c'
    local _, lines = h.slurp(file):gsub('\n', '')
    append(file, '#include "formats/record.h"\n')
    local res = layers(d)
    h.run('rm -rf ' .. h.q(d))
    assert.are.equal(1, res.code, res.out .. res.err)
    h.contains(res.out, 'host/base/util.c:' .. (lines + 1) .. ': base/ may not include formats/record.h',
      'the line number is the include\'s')
  end)
end)
