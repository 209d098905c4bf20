-- The docs cannot drift from the binary or the tree: every command and
-- option the binary's help lists is in docs/operating.md's synopsis (and
-- the synopsis names no option the help does not), and every file of this
-- repository README.md or docs/ names, and every link between them, leads
-- somewhere. Each check is also run on text with a fault planted in it.
local h = require('support.helpers')

local DOCS = { 'README.md', 'docs/writing-migrations.md', 'docs/shipping.md', 'docs/operating.md',
  'docs/internals.md', 'docs/testing.md', 'docs/reliability.md', 'docs/performance.md' }
local SYNOPSIS_DOC = 'docs/operating.md'

-- Where a path the docs name may be: the tree's root, or the fixtures
-- directory (the harness's cluster.apply reads 'migrations/x.yaml' there).
local BASES = { '', 'spec/fixtures/' }

-- A path names this repository's tree when it starts with one of these.
local ROOT_DIRS = { 'host', 'stdlib', 'migrations', 'legacy-sh', 'spec', 'tools', 'deploy', 'docs', '.ci' }
local ROOT_FILES = { Makefile = true, Dockerfile = true, ['README.md'] = true, ['.dockerignore'] = true }

-- Paths the docs name that are made, not committed, with who makes them.
local MADE = {
  ['migrations/order.d'] = 'cozy-migrate order writes it; git ignores it',
  ['legacy-sh/legacy-sha256sums'] = 'import-legacy writes it; this repository has no legacy set',
  ['migrations/pre-apply/x.lua'] = 'the file of an example message',
  ['migrations/pre-apply/label-tenant-namespaces.lua'] = 'the tour scaffolds it with new',
  ['spec/migrations/label-tenant-namespaces_spec.lua'] = 'the tour scaffolds it with new',
}

local function options_in(text)
  local set = {}
  for o in text:gmatch('%-%-[%l][%l%d%-]*') do
    if o ~= '--help' then set[o] = true end
  end
  return set
end

-- declared(text) -> the options on the lines that declare them: an option
-- line ("  --dir DIR  ...", "  -o, --output FMT") or a usage line
local function declared(text)
  local set = {}
  for line in (text .. '\n'):gmatch('(.-)\n') do
    if line:match('^%s+%-') or line:match('^Usage:') or line:match('^%s+cozy%-migrate ') then
      for o in pairs(options_in(line)) do set[o] = true end
    end
  end
  return set
end

-- help() -> { [command] = { own=, mentioned=, cluster= } } read from the binary: the
-- options it declares, every option its help mentions, the cluster options
local function help()
  local top = h.must(h.cozy('help'), 'cozy-migrate help').out
  local cmds = {}
  local listing = assert(top:match('\nCommands:\n(.-)\n\n'), top)
  for line in (listing .. '\n'):gmatch('(.-)\n') do
    local name = line:match('^  (%l[%l%-]*)')
    if name then
      local res = h.must(h.cozy(name, '--help'), name .. ' --help')
      local text = res.out .. res.err
      local own, cluster = text:match('^(.-)\nCluster options:\n(.*)$')
      own = own or text
      cmds[name] = { own = declared(own), mentioned = options_in(own), cluster = declared(cluster or '') }
    end
  end
  return cmds
end

-- synopsis(doc) -> { [command] = { text of its entries } }, the cluster options line
local function synopsis(doc)
  local block = doc:match('\n## The commands\n.-\n```\n(.-)\n```\n')
  if not block then return nil end
  local entries, cluster, cur = {}, '', nil
  for line in (block .. '\n'):gmatch('(.-)\n') do
    local cmd = line:match('^cozy%-migrate (%l[%l%-]*)')
    if cmd then
      entries[cmd] = entries[cmd] or {}
      table.insert(entries[cmd], line)
      cur = { cmd = cmd, n = #entries[cmd] }
    elseif line:match('^cluster options:') then
      cluster, cur = line, { cluster = true }
    elseif line:match('^%s') and cur then
      if cur.cluster then
        cluster = cluster .. ' ' .. line
      else
        entries[cur.cmd][cur.n] = entries[cur.cmd][cur.n] .. ' ' .. line
      end
    end
  end
  return entries, cluster
end

local sorted = h.keys

-- check_options(cmds, doc) -> the problems, one line each
local function check_options(cmds, doc)
  local problems = {}
  local function say(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  local entries, cluster_line = synopsis(doc)
  if not entries then
    say('%s: no code block under "## The commands"', SYNOPSIS_DOC)
    return problems
  end
  local cluster_doc = options_in(cluster_line)
  for _, name in ipairs(sorted(cmds)) do
    local c = cmds[name]
    local text = entries[name] and table.concat(entries[name], ' ')
    if not text then
      say('%s: no synopsis of `cozy-migrate %s`', SYNOPSIS_DOC, name)
    else
      local documented = options_in(text)
      local allowed = {}
      for o in pairs(c.mentioned) do allowed[o] = true end
      for o in pairs(c.cluster) do allowed[o] = true end
      if text:find('[every option of run]', 1, true) and cmds.run then
        for o in pairs(cmds.run.own) do documented[o], allowed[o] = true, true end
      end
      for _, o in ipairs(sorted(c.own)) do
        if not documented[o] then
          say('%s: `cozy-migrate %s --help` lists %s, its synopsis does not', SYNOPSIS_DOC, name, o)
        end
      end
      if next(c.cluster) and not text:find('[cluster options]', 1, true) then
        say('%s: `cozy-migrate %s` takes the cluster options, its synopsis does not say so', SYNOPSIS_DOC, name)
      end
      for _, o in ipairs(sorted(documented)) do
        if not allowed[o] then
          say('%s: the synopsis of `cozy-migrate %s` names %s, which its --help does not list',
            SYNOPSIS_DOC, name, o)
        end
      end
    end
    for _, o in ipairs(sorted(c.cluster)) do
      if not cluster_doc[o] then
        say('%s: `cozy-migrate %s --help` lists the cluster option %s, the "cluster options:" line does not',
          SYNOPSIS_DOC, name, o)
      end
    end
  end
  for _, name in ipairs(sorted(entries)) do
    if not cmds[name] then say('%s: a synopsis of `cozy-migrate %s`, which is no command', SYNOPSIS_DOC, name) end
  end
  return problems
end

local function is_tree_path(p)
  if ROOT_FILES[p] then return true end
  for _, d in ipairs(ROOT_DIRS) do
    if p:sub(1, #d + 1) == d .. '/' then return true end
  end
  return false
end

-- GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-'
local function anchor(heading)
  return (heading:lower():gsub('[^%w%-_ ]', ''):gsub(' ', '-'))
end

local function anchors(doc)
  local set, fence = {}, false
  for line in (doc .. '\n'):gmatch('(.-)\n') do
    if line:match('^```') then fence = not fence end
    local title = not fence and line:match('^#+ (.+)$')
    if title then set[anchor(title)] = true end
  end
  return set
end

-- references(name, doc) -> { {line=, path=} } paths of the tree, { {line=, file=, anchor=} } links
local function references(name, doc)
  local paths, links, n = {}, {}, 0
  local dir = name:match('^(.*)/') or ''
  for line in (doc .. '\n'):gmatch('(.-)\n') do
    n = n + 1
    for tok in line:gmatch('[%w%._/%-]+') do
      tok = tok:gsub('[%.,:]+$', '')
      if is_tree_path(tok) then paths[#paths + 1] = { line = n, path = tok } end
    end
    for target in line:gmatch('%]%(([^)%s]+)%)') do
      if not target:match('^%a+:') then
        local file, frag = target:match('^([^#]*)#?(.*)$')
        file = file == '' and name or ((dir ~= '' and dir .. '/' or '') .. file)
        links[#links + 1] = { line = n, file = file, anchor = frag ~= '' and frag or nil }
      end
    end
  end
  return paths, links
end

-- check_paths(docs, exists) -> the problems; docs: { [name] = text }, exists(path) -> bool
local function check_paths(docs, exists)
  local problems = {}
  for _, name in ipairs(sorted(docs)) do
    local paths, links = references(name, docs[name])
    for _, p in ipairs(paths) do
      if not MADE[(p.path:gsub('/$', ''))] and not exists(p.path) then
        problems[#problems + 1] = string.format('%s:%d: names %s, which is not in the tree', name, p.line, p.path)
      end
    end
    for _, l in ipairs(links) do
      local target = docs[l.file]
      if not target and not exists(l.file) then
        problems[#problems + 1] = string.format('%s:%d: links to %s, which is not in the tree', name, l.line, l.file)
      elseif l.anchor and not (target and anchors(target)[l.anchor]) then
        problems[#problems + 1] = string.format('%s:%d: links to %s#%s, which has no such heading',
          name, l.line, l.file, l.anchor)
      end
    end
  end
  return problems
end

local function read_docs()
  local docs = {}
  for _, name in ipairs(DOCS) do docs[name] = h.slurp(h.root .. '/' .. name) end
  return docs
end

-- one shell for every path, not one per path
local function tree_exists(docs)
  local all = {}
  for name, text in pairs(docs) do
    local paths, links = references(name, text)
    for _, p in ipairs(paths) do all[p.path] = true end
    for _, l in ipairs(links) do all[l.file] = true end
  end
  local args = {}
  for _, p in ipairs(sorted(all)) do
    for _, base in ipairs(BASES) do args[#args + 1] = h.q(base .. p) end
  end
  local res = h.must(h.run('(cd ' .. h.q(h.root) .. ' && for p in ' .. table.concat(args, ' ') ..
    '; do [ -e "$p" ] && printf "%s\\n" "$p"; done; true)'))
  local found = {}
  for line in res.out:gmatch('[^\n]+') do found[line] = true end
  return function(p)
    for _, base in ipairs(BASES) do
      if found[base .. p] then return true end
    end
    return false
  end
end

-- with(docs, name, text) -> a copy of docs with text appended to one of them
local function with(docs, name, text)
  local copy = {}
  for k, v in pairs(docs) do copy[k] = v end
  copy[name] = copy[name] .. text
  return copy
end

local function none(problems)
  assert.are.same({}, problems, table.concat(problems, '\n'))
end

local function one(problems, needle)
  assert.are.equal(1, #problems, table.concat(problems, '\n'))
  h.contains(problems[1], needle)
end

describe('the docs', function()
  local cmds, docs, exists
  setup(function()
    cmds = help()
    docs = read_docs()
    exists = tree_exists(docs)
  end)

  it('read every command and option from the binary (no empty list passes)', function()
    assert.is_true(h.count(cmds) >= 16, 'commands: ' .. table.concat(sorted(cmds), ' '))
    assert.is_true(cmds.run.own['--only'] and cmds.run.cluster['--kubeconfig'] and cmds.exec.own['--quiet'])
  end)

  it('name every command and option of the CLI in the synopsis, and no other', function()
    none(check_options(cmds, docs[SYNOPSIS_DOC]))
  end)

  it('say the README is at most about 250 lines and points to every doc', function()
    local n = select(2, docs['README.md']:gsub('\n', '\n'))
    assert.is_true(n <= 250, 'README.md has ' .. n .. ' lines')
    for _, name in ipairs(DOCS) do
      if name ~= 'README.md' then h.contains(docs['README.md'], '](' .. name .. ')', 'README links ' .. name) end
    end
  end)

  it('name only files that are in the tree, and link only to headings that exist', function()
    none(check_paths(docs, exists))
  end)

  describe('with a fault planted', function()
    it('report an option the help lists and the synopsis lost', function()
      local doc = docs[SYNOPSIS_DOC]:gsub(' %[%-%-quiet%]', '', 1)
      one(check_options(cmds, doc), '`cozy-migrate exec --help` lists --quiet, its synopsis does not')
    end)

    it('report an option the binary gained and the docs never heard of', function()
      local copy = {}
      for k, v in pairs(cmds) do copy[k] = v end
      copy.stubs = { own = { ['--planted-option'] = true }, mentioned = cmds.stubs.mentioned,
        cluster = cmds.stubs.cluster }
      for o in pairs(cmds.stubs.own) do copy.stubs.own[o] = true end
      one(check_options(copy, docs[SYNOPSIS_DOC]), 'lists --planted-option, its synopsis does not')
    end)

    it('report an option the synopsis names and the binary does not take', function()
      local doc = docs[SYNOPSIS_DOC]:gsub('cozy%-migrate lint    %[%-%-dir DIR%]', 'cozy-migrate lint    [--dir DIR] [--no-such-flag]', 1)
      one(check_options(cmds, doc), 'the synopsis of `cozy-migrate lint` names --no-such-flag')
    end)

    it('report a command with no synopsis', function()
      local doc = docs[SYNOPSIS_DOC]:gsub('\ncozy%-migrate stubs [^\n]*\n[^\n]*', '', 1)
      one(check_options(cmds, doc), 'no synopsis of `cozy-migrate stubs`')
    end)

    it('report a file that is not in the tree, with the doc and line', function()
      local planted = with(docs, 'docs/internals.md', '\nSee `host/run/no_such_file.c`.\n')
      local problems = check_paths(planted, exists)
      one(problems, 'names host/run/no_such_file.c, which is not in the tree')
      h.contains(problems[1], 'docs/internals.md:')
    end)

    it('report a link to a heading that does not exist', function()
      local planted = with(docs, 'docs/operating.md', '\nsee [internals](internals.md#no-such-section)\n')
      one(check_paths(planted, exists), 'links to docs/internals.md#no-such-section, which has no such heading')
    end)
  end)
end)
