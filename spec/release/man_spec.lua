-- The man pages (`make man`, host/cli/man.c): the binary writes one page
-- per row of its command table, made from the table and the command's
-- --help, and a main page naming every command. Each option a command's
-- table holds must be named on its page: an option added without a line
-- of help fails here. `make install` puts them in share/man/man1
-- (install_spec).
local h = require('support.helpers')

-- The table as the binary holds it: { {name=, options={...}} ... }
local function command_table()
  local res = h.must(h.cozy('man', '--list'), 'man --list')
  local rows = {}
  for line in res.out:gmatch('[^\n]+') do
    local row = { options = {} }
    for word in line:gmatch('%S+') do
      if row.name then table.insert(row.options, word) else row.name = word end
    end
    table.insert(rows, row)
  end
  return rows
end

-- man(7) source as a reader searches it: roff's minus signs as dashes.
local function page(dir, name)
  local text = h.slurp(dir .. '/' .. name .. '.1')
  assert.is_truthy(text, name .. '.1 was written')
  return (text:gsub('\\%-', '-'))
end

describe('the man pages', function()
  local dir, rows

  setup(function()
    dir = h.tmpdir()
    h.must(h.cozy('man', '--out', dir), 'man --out')
    rows = command_table()
  end)

  teardown(function() h.run('rm -rf ' .. h.q(dir)) end)

  it('come from the same table the main help is printed from', function()
    local help = h.must(h.cozy('--help')).out
    local listed = {}
    for name in help:gmatch('\n  ([a-z][a-z-]*)') do listed[#listed + 1] = name end
    local names = {}
    for _, row in ipairs(rows) do names[#names + 1] = row.name end
    assert.are.same(listed, names)
    assert.is_true(#names >= 17, 'every command: ' .. table.concat(names, ' '))
  end)

  it('are one page per command, each named on the main page', function()
    local main = page(dir, 'cozy-migrate')
    h.contains(main, '.TH COZY-MIGRATE 1', 'the main page is a section-1 page')
    for _, row in ipairs(rows) do
      local p = page(dir, 'cozy-migrate-' .. row.name)
      h.contains(p, '.TH COZY-MIGRATE-' .. row.name:upper() .. ' 1', row.name .. "'s title")
      h.contains(p, '.SH NAME\ncozy-migrate-' .. row.name .. ' - ', row.name .. "'s NAME line")
      h.contains(main, 'cozy-migrate-' .. row.name, 'the main page names ' .. row.name)
    end
  end)

  it("name every option of each command's table on the command's page", function()
    local missing = {}
    for _, row in ipairs(rows) do
      local p = page(dir, 'cozy-migrate-' .. row.name)
      for _, opt in ipairs(row.options) do
        -- as a word: --only is not named by --only-this
        if not p:find(opt:gsub('%-', '%%-') .. '%f[^%w-]') then
          missing[#missing + 1] = row.name .. ' ' .. opt
        end
      end
    end
    assert.are.same({}, missing)
  end)

  it('are man(7) source that groff reads without a warning', function()
    if h.run('command -v groff').code ~= 0 then
      pending('groff is not installed')
      return
    end
    local res = h.run('groff -man -ww -z ' .. h.q(dir) .. '/*.1')
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('', res.err)
  end)

  it('keep each option line of the help a tagged paragraph, its text after it', function()
    local p = page(dir, 'cozy-migrate-run')
    h.contains(p, '.TP\n.B --lease-duration DUR\nhow long the lock lives', 'a tag as long as the gap')
    h.contains(p, '.TP\n.B --tier TIER\npre-apply (default) or background', 'a plain option line')
    h.contains(p, '.SH CLUSTER OPTIONS', 'the cluster options after the command\'s own')
    h.lacks(p, '{LEASE}', 'the defaults filled in')
  end)

  it('need --out DIR and take no operand (exit 2, one line)', function()
    local res = h.cozy('man')
    assert.are.equal(2, res.code)
    h.contains(res.err, '--out DIR is required')
    h.one_line(res.err)
    res = h.cozy('man', '--out', dir, 'extra')
    assert.are.equal(2, res.code)
    h.contains(res.err, "unexpected argument 'extra'")
  end)

  it('fail naming the file when DIR cannot be written (exit 1)', function()
    local res = h.cozy('man', '--out', dir .. '/missing')
    assert.are.equal(1, res.code)
    h.contains(res.err, dir .. '/missing/cozy-migrate.1')
    h.one_line(res.err)
  end)
end)
