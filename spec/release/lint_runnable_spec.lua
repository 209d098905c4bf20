-- lint's rule `runnable` (lint --image-inventory FILE): a shell migration
-- calls only commands and reads only literal paths the image it ships in
-- holds, as the image build recorded them (tools/image-inventory's file),
-- and a path relative to its working directory (legacy-sh/) is there. The
-- scripts are synthetic shapes of the platform's frozen ones (a tool from
-- outside Debian, yq, a data directory, chart paths of the repository).
local h = require('support.helpers')

local HEADER = '#!/bin/bash\n# cozystack-migration: on-error=abort\nset -euo pipefail\n'

-- tree({path = content}): the files in a scratch directory
local tree = require('support.fixture').files

local function inventory(cmds, paths)
  local lines = { '# cozy-migrate image-inventory 1' }
  for _, c in ipairs(cmds) do lines[#lines + 1] = 'cmd ' .. c end
  for _, p in ipairs(paths) do lines[#lines + 1] = 'path ' .. p end
  return h.write(os.tmpname(), table.concat(lines, '\n') .. '\n')
end

-- the runnable findings, "rel:line: what" (the tree's directory cut off)
local function runnable(res, dir)
  local out = {}
  for line in res.out:gmatch('[^\n]+') do
    local rel, rest = line:match('^' .. dir:gsub('%p', '%%%0') .. '/(.-): runnable: (.*)$')
    if rel then out[#out + 1] = rel .. ': ' .. rest end
  end
  return out
end

local SCRIPT = HEADER .. [[
source lib/common.sh
# yq in a comment is no call
cleanup() { kubectl delete ns scratch --ignore-not-found; }
trap cleanup EXIT
say "start"
v=$(kubectl get cm x -o yaml | yq -r '.data.v')
echo "$v" 'yq is a word here' >/tmp/out
cat <<EOF
yq inside a here-document is text
EOF
CRDS="${CRDS:-/etcd-crds}"
kubectl apply -f /etc/os-release --dry-run=client
kubectl apply -f /etcd-crds/cluster.yaml
for f in /etcd-crds/*.yaml; do echo "$f"; done
timeout 5 cozyhr apply kamaji
if [ -d charts/app/templates ]; then echo yes; fi
kubectl apply -f lib/data/extra.yaml
cozyhr -C packages/system/api apply api
"$SOMETHING" --dynamic
yq -r . /dev/null
]]

describe('lint: runnable (--image-inventory)', function()
  local dir

  setup(function()
    dir = tree({
      ['legacy-sh/legacy-map'] = '1 uses-tools\n',
      ['legacy-sh/uses-tools.sh'] = SCRIPT,
      ['legacy-sh/lib/common.sh'] = 'say() { printf "%s\\n" "$*"; }\n',
      ['legacy-sh/lib/data/extra.yaml'] = 'kind: List\n',
      ['migrations/revoked'] = '',
    })
  end)

  it('names each command the image lacks, each absolute path it lacks, each relative path legacy-sh/ lacks, at its first line', function()
    local inv = inventory({ 'bash', 'kubectl', 'cat', 'timeout', 'printf' }, { '/etc', '/etc/os-release' })
    local res = h.cozy('lint', '--dir', dir, '--image-inventory', inv)
    assert.are.equal(3, res.code, res.out .. res.err)
    local hint = ' is not in the image (add it with tools/image build --packages or --files; docs/shipping.md, Building the image)'
    local rel = ' is read relative to the working directory, legacy-sh/ (where the runner starts shell migrations), ' ..
      'and is not there: ship it under legacy-sh/ or give the image\'s absolute path'
    assert.are.same({
      "legacy-sh/uses-tools.sh:9: 'yq'" .. hint,
      "legacy-sh/uses-tools.sh:14: '/etcd-crds'" .. hint,
      "legacy-sh/uses-tools.sh:16: '/etcd-crds/cluster.yaml'" .. hint,
      "legacy-sh/uses-tools.sh:18: 'cozyhr'" .. hint,
      "legacy-sh/uses-tools.sh:19: 'charts/app/templates'" .. rel,
      "legacy-sh/uses-tools.sh:21: 'packages/system/api'" .. rel,
    }, runnable(res, dir))
  end)

  it('passes once the image holds them, and a relative path legacy-sh/ holds', function()
    local inv = inventory({ 'bash', 'kubectl', 'cat', 'timeout', 'printf', 'yq', 'cozyhr' },
      { '/etc', '/etc/os-release', '/etcd-crds', '/etcd-crds/cluster.yaml' })
    os.execute('mkdir -p ' .. h.q(dir .. '/legacy-sh/charts/app/templates') .. ' ' .. h.q(dir .. '/legacy-sh/packages/system/api'))
    local res = h.cozy('lint', '--dir', dir, '--image-inventory', inv)
    assert.are.same({}, runnable(res, dir))
    os.execute('rm -rf ' .. h.q(dir .. '/legacy-sh/charts') .. ' ' .. h.q(dir .. '/legacy-sh/packages'))
  end)

  it('judges nothing without an inventory', function()
    local res = h.cozy('lint', '--dir', dir)
    assert.are.same({}, runnable(res, dir))
    h.lacks(res.out, 'runnable')
  end)

  it('refuses a file that is not an inventory in one line, exit 2', function()
    local bad = h.write(os.tmpname(), 'kubectl\n')
    local res = h.cozy('lint', '--dir', dir, '--image-inventory', bad)
    assert.are.equal(2, res.code, res.out .. res.err)
    h.contains(res.err, bad .. ':1: not an image inventory')
    bad = h.write(os.tmpname(), '# cozy-migrate image-inventory 1\ncmd yq\nfile /x\n')
    res = h.cozy('lint', '--dir', dir, '--image-inventory', bad)
    assert.are.equal(2, res.code, res.out .. res.err)
    h.contains(res.err, bad .. ":3: expected 'cmd NAME' or 'path /ABSOLUTE'")
    res = h.cozy('lint', '--dir', dir, '--image-inventory', '/nonexistent/inventory')
    assert.are.equal(2, res.code)
    h.contains(res.err, '/nonexistent/inventory: No such file or directory')
  end)

  it('reads the inventory tools/image-inventory writes of an image filesystem', function()
    local root = h.tmpdir()
    for _, d in ipairs({ '/usr/bin', '/etcd-crds', '/proc/1', '/etc' }) do os.execute('mkdir -p ' .. h.q(root .. d)) end
    for _, f in ipairs({ '/usr/bin/yq', '/usr/bin/cozyhr', '/usr/bin/kubectl', '/usr/bin/bash', '/usr/bin/cat',
      '/usr/bin/timeout', '/etcd-crds/cluster.yaml', '/proc/1/status', '/etc/os-release' }) do h.write(root .. f, '#!/bin/sh\n') end
    os.execute('chmod 755 ' .. h.q(root) .. '/usr/bin/*')
    h.write(root .. '/usr/bin/not-a-command', 'data\n')
    local res = h.must(h.run(string.format('PATH=/usr/bin bash %s/tools/image-inventory %s', h.q(h.root), h.q(root))))
    local text = res.out
    assert.are.equal('# cozy-migrate image-inventory 1\n', text:sub(1, 33))
    for _, want in ipairs({ 'cmd yq', 'cmd cozyhr', 'path /etcd-crds', 'path /etcd-crds/cluster.yaml', 'path /usr/bin/yq' }) do
      h.contains(text, '\n' .. want .. '\n')
    end
    h.lacks(text, 'cmd not-a-command')
    h.lacks(text, 'path /proc')
    local inv = h.write(os.tmpname(), text)
    res = h.cozy('lint', '--dir', dir, '--image-inventory', inv)
    assert.are.same({
      "legacy-sh/uses-tools.sh:19: 'charts/app/templates' is read relative to the working directory, legacy-sh/ " ..
        "(where the runner starts shell migrations), and is not there: ship it under legacy-sh/ or give the image's absolute path",
      "legacy-sh/uses-tools.sh:21: 'packages/system/api' is read relative to the working directory, legacy-sh/ " ..
        "(where the runner starts shell migrations), and is not there: ship it under legacy-sh/ or give the image's absolute path",
    }, runnable(res, dir))
  end)
end)
