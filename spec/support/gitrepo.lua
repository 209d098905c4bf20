-- Scratch git repositories for the release specs: a migrations tree built
-- commit by commit, with tags and branches, in a temporary directory.
-- Every git call must succeed (the spec's subject is our binary, not git).
local h = require('support.helpers')

local M = {}
local Repo = {}
Repo.__index = Repo

local function must(res, what)
  assert(res.code == 0, (what or 'command') .. ' failed:\n' .. res.out .. res.err)
  return res
end

-- new(dir, opts): opts.tree puts the migrations tree in that subdirectory
-- of the repository (a monorepo: r.root is the repository, r.dir the tree);
-- opts.engine == false starts without the engine's tree (a platform's
-- history from before it: add migrations/revoked when the engine arrives).
function M.new(dir, opts)
  opts = opts or {}
  local root = dir or h.tmpdir()
  local self = setmetatable({ root = root, dir = opts.tree and (root .. '/' .. opts.tree) or root }, Repo)
  assert(os.execute('mkdir -p ' .. h.q(self.dir)))
  self:git('init -q -b main')
  self:git('config user.email spec@example.invalid')
  self:git('config user.name spec')
  self:git('config commit.gpgsign false')
  self:git('config tag.gpgsign false')
  -- A packaged tree always has the revoked list; lint and the runner refuse one without.
  if opts.engine ~= false then self:write('migrations/revoked', '# nothing revoked\n') end
  return self
end

-- The repository's own file at rel (outside the tree in a monorepo).
function Repo:write_root(rel, content)
  local p = self.root .. '/' .. rel
  assert(os.execute('mkdir -p ' .. h.q(p:match('^(.*)/[^/]*$'))))
  h.write(p, content)
  return self
end

function Repo:git(args)
  return must(h.run('git -C ' .. h.q(self.dir) .. ' ' .. args), 'git ' .. args).out
end

function Repo:path(rel) return self.dir .. '/' .. rel end

function Repo:write(rel, content)
  local p = self:path(rel)
  assert(os.execute('mkdir -p ' .. h.q(p:match('^(.*)/[^/]*$'))))
  h.write(p, content)
  return self
end

function Repo:rm(rel)
  self:git('rm -q ' .. h.q(rel))
  return self
end

-- lua(slug, {tier=, on_error=, requires=, body=}) writes a Lua migration.
function Repo:lua(slug, o)
  o = o or {}
  local lines = { '-- cozystack-migration: on-error=' .. (o.on_error or 'abort') }
  if o.requires then lines[#lines + 1] = '-- cozystack-migration: requires=' .. o.requires end
  lines[#lines + 1] = o.body or ('-- ' .. slug)
  return self:write('migrations/' .. (o.tier or 'pre-apply') .. '/' .. slug .. '.lua',
    table.concat(lines, '\n') .. '\n')
end

-- sh(slug, body) writes a legacy shell migration.
function Repo:sh(slug, body)
  return self:write('legacy-sh/' .. slug .. '.sh', '#!/bin/bash\n# cozystack-migration: on-error=abort\n' ..
    (body or 'true') .. '\n')
end

function Repo:commit(msg)
  self:git('add -A :/')
  self:git('commit -q --allow-empty -m ' .. h.q(msg or 'change'))
  return self
end

function Repo:tag(name, annotated)
  if annotated then
    self:git('tag -a ' .. h.q(name) .. ' -m ' .. h.q(name))
  else
    self:git('tag ' .. h.q(name))
  end
  return self
end

function Repo:checkout(ref)
  self:git('checkout -q ' .. h.q(ref))
  return self
end

-- order(args...) runs `cozy-migrate order --repo DIR ARGS...`.
function Repo:order(...)
  return h.cozy('order', '--repo', self.dir, ...)
end

-- The generated manifest: { {name, text}, ... } in file-name order.
function Repo:manifest(dir)
  dir = dir or self:path('migrations/order.d')
  local names = {}
  local p = io.popen('ls -1 ' .. h.q(dir))
  for l in p:lines() do names[#names + 1] = l end
  p:close()
  local out = {}
  for i, n in ipairs(names) do out[i] = { n, h.slurp(dir .. '/' .. n) } end
  return out
end

return M
