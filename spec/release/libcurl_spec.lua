-- libcurl stays behind kube/'s one connection: no file outside kube/ names
-- it, and http.h, the interface the rest of kube/ sends a request through,
-- carries no libcurl type (the multi-handle part is http_xfer.h's alone).
local h = require('support.helpers')

local function grep(pattern, where)
  local res = h.run('grep -rnE ' .. h.q(pattern) .. ' ' .. where)
  return res.out
end

describe('libcurl in host/', function()
  it('is named by no file outside kube/', function()
    local dirs = {}
    for _, d in ipairs { 'base', 'formats', 'lua', 'run', 'cli', 'release' } do
      dirs[#dirs + 1] = h.q(h.root .. '/host/' .. d)
    end
    assert.are.equal('', grep('curl/curl\\.h|curl_[a-z_]+\\(|CURL[A-Z]*\\b', table.concat(dirs, ' ')))
  end)

  it('appears in no type of kube/http.h', function()
    assert.are.equal('', grep('curl/curl\\.h|CURL[A-Z]*\\b|curl_', h.q(h.root .. '/host/kube/http.h')))
  end)

  it('is included in kube/ only where a libcurl handle is driven', function()
    local out = grep('#include <curl/curl\\.h>', h.q(h.root .. '/host/kube'))
    local files = {}
    for f in out:gmatch('host/kube/([%w_]+%.[ch]):') do files[#files + 1] = f end
    table.sort(files)
    assert.are.same({ 'gatestream.c', 'http.c', 'http_xfer.h', 'kubeconfig.c', 'kubeconfig_fields.c',
      'restpool.c', 'watch.c' }, files)
  end)
end)
