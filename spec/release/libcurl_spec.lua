-- libcurl stays in the client (host/client/): no file outside it names it,
-- and http.h, the interface the rest of the client sends a request through,
-- carries no libcurl type (the multi-handle part is http_xfer.h's alone).
-- Every handle is set up in http.c, so every connection (the client's own,
-- the pool's, a watch's, a relay's) carries the same TLS and credentials.
local h = require('support.helpers')

local function grep(pattern, where)
  local res = h.run('grep -rnE ' .. h.q(pattern) .. ' ' .. where)
  return res.out
end

describe('libcurl in host/', function()
  it('is named by no file outside client/', function()
    local ls = h.must(h.run('ls ' .. h.q(h.root .. '/host')), 'list host/')
    local dirs = {}
    for d in ls.out:gmatch('[^\n]+') do
      if d ~= 'client' then dirs[#dirs + 1] = h.q(h.root .. '/host/' .. d) end
    end
    assert.is_true(#dirs >= 9, 'the other layers are listed')
    assert.are.equal('', grep('curl/curl\\.h|curl_[a-z_]+\\(|CURL[A-Z]*\\b', table.concat(dirs, ' ')))
  end)

  it('appears in no type of client/http.h', function()
    assert.are.equal('', grep('curl/curl\\.h|CURL[A-Z]*\\b|curl_', h.q(h.root .. '/host/client/http.h')))
  end)

  it('is included in client/ only where a libcurl handle is driven', function()
    local out = grep('#include <curl/curl\\.h>', h.q(h.root .. '/host/client'))
    local files = {}
    for f in out:gmatch('host/client/([%w_]+%.[ch]):') do files[#files + 1] = f end
    table.sort(files)
    assert.are.same({ 'http.c', 'http_xfer.h', 'kubeconfig.c', 'kubeconfig_fields.c', 'relay.c',
      'restpool.c', 'watch.c' }, files)
  end)

  it('has its handles made, and their TLS, credentials and proxy set, in http.c alone', function()
    local out = grep('curl_easy_(init|duphandle)\\(|CURLOPT_(SSL[A-Z_]*|CAINFO|CAPATH|CAINFO_BLOB|'
      .. 'XOAUTH2_BEARER|HTTPAUTH|USERPWD|PROXY[A-Z_]*|KEYPASSWD)\\b', h.q(h.root .. '/host'))
    local files = {}
    for f in out:gmatch('(host/[%w_/]+%.[ch]):') do files[f] = true end
    assert.are.same({ ['host/client/http.c'] = true }, files)
  end)
end)
