-- Each of host/'s concepts is done in one place: the cluster connection is
-- opened from the options by kube_open alone (runner, dispatcher, gateway
-- and the Lua module all call it), and the growable buffer is base/buf.c's.
local h = require('support.helpers')

-- "file:line: text" of every match below host/, one a line.
local function grep(pattern)
  return h.run('cd ' .. h.q(h.root) .. ' && grep -rnE ' .. h.q(pattern) ..
    ' host --include=*.c --include=*.h').out
end

local function files_of(out)
  local set, list = {}, {}
  for f in out:gmatch('(host/[%w_/]+%.[ch]):%d+:') do
    if not set[f] then set[f] = true; list[#list + 1] = f end
  end
  table.sort(list)
  return list
end

describe('host/', function()
  it('opens the cluster connection from the options in client/options.c alone', function()
    assert.are.same({ 'host/client/options.c', 'host/client/rest.c', 'host/client/rest.h' },
      files_of(grep('\\brest_new\\(')))
  end)

  it('has every user of the connection open it through kube_open', function()
    assert.are.same({ 'host/client/options.c', 'host/client/options.h', 'host/gateway/server.c',
      'host/lua/luakube_core.c', 'host/run/context.c' },
      files_of(grep('\\bkube_open\\(')))
    assert.are.same({ 'host/run/context.c', 'host/run/dispatch.c', 'host/run/runner.h' },
      files_of(grep('\\brunner_connect\\(')))
  end)

  -- read_file (base/util.c) hands plain malloc'd text to two dozen callers
  -- that free() it; arrays grow with mem_grow (base/mem.h), which
  -- tools/conventions' growth rule keeps the one way.
  it('grows a byte buffer by doubling in base/buf.c alone', function()
    assert.are.same({ 'host/base/buf.c', 'host/base/util.c' },
      files_of(grep('(cap|nc|ncap) \\*=? ?2\\b')))
  end)

  -- The child's journal is data from the shared log to the record: made
  -- text once, when the record is; never printed to be parsed back.
  it('hands a migration\'s result on as data: no text of it is parsed back in run/', function()
    assert.are.same({}, files_of(grep('cJSON_Parse\\((res|r|p|res->|res\\.)?\\.?journal')))
    assert.are.same({}, files_of(grep('ledger_entry_bytes')))
  end)

  -- A record is parsed once, from the ledger's text (record_parse), and
  -- its journal kept as the tree it was parsed into; what shows a record
  -- (status, the spec state's record()) reads record_json's tree.
  it('parses a record\'s text in record_parse alone, and prints it only to write it', function()
    local out = h.run('cd ' .. h.q(h.root) .. ' && grep -nE ' .. h.q('cJSON_Parse') ..
      ' host/formats/record.c host/formats/journaldoc.c host/run/report.c host/run/recording.c').out
    local n = select(2, out:gsub('\n', ''))
    assert.are.equal(1, n, out)
    h.contains(out, 'host/formats/record.c:')
    assert.are.same({ 'host/formats/ledgerdoc.c', 'host/formats/record.c', 'host/formats/record.h' },
      files_of(grep('\\brecord_format\\(')))
  end)

  it('sizes a record written by what ledger_write sent, and one not yet written by record_max_bytes', function()
    assert.are.same({ 'host/run/fresh.c', 'host/run/recording.c' },
      files_of(h.run('cd ' .. h.q(h.root) .. ' && grep -rnE ' .. h.q('ledger_write(_stamped)?\\(&') ..
        ' host/run').out))
    assert.are.same({ 'host/formats/record.c', 'host/formats/record.h', 'host/run/recording.c' },
      files_of(grep('record_max_bytes\\(')))
  end)

  -- run, preview, lua and exec alike (run/launch.h): the child's recipe is
  -- filled, and a shell's gateway made, in one place above proc/.
  it('launches every migration through run/launch.c: child_spec filled, child_run called, a gateway made there alone', function()
    local function above_proc(pattern)
      return files_of(h.run('cd ' .. h.q(h.root) .. ' && grep -rnE ' .. h.q(pattern) ..
        ' host/run host/cli host/lua --include=*.c --include=*.h').out)
    end
    assert.are.same({ 'host/run/launch.c' }, above_proc('struct child_spec [a-z_]+ = '))
    assert.are.same({ 'host/run/launch.c' }, above_proc('\\bchild_run\\('))
    assert.are.same({ 'host/run/launch.c' },
      above_proc('\\b(gateway_cred_new|gateway_listen|kubeconfig_private_gateway)\\('))
  end)

  -- "proc" means one thing: host/proc/ forks the runner's processes (a
  -- migration's child, child.c and spawn.c; the Lease watcher, helper.c);
  -- the release commands' git and tools are release/tool.c's.
  it('forks in host/proc/ alone, and in release/tool.c for the release commands\' tools', function()
    assert.are.same({ 'host/proc/child.c', 'host/proc/helper.c', 'host/proc/spawn.c', 'host/release/tool.c' },
      files_of(grep('\\bv?fork\\(')))
  end)

  it('gives the runner\'s shared functions its prefix, and one meaning to each name in run/', function()
    local f = assert(io.open(h.root .. '/host/run/runner_int.h'))
    local text = f:read('a')
    f:close()
    local bare = {}
    for line in text:gmatch('[^\n]+') do
      local name = line:match('^[%a_][%w_ %*]-[ %*]([%a_][%w_]*)%(')
      if name and not name:match('^runner_') then bare[#bare + 1] = name end
    end
    assert.are.same({}, bare)
    assert.are.same({ 'host/run/dispatch.c' }, files_of(grep('\\bstruct ctx\\b')))
  end)
end)
