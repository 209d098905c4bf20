-- JSON through Lua must come back as it went in: the kube module sends what
-- scripts build, so an empty array turning into {} or 3 into 3.0 would
-- change objects in the cluster.
local json = require('json')

describe('json', function()
  it('keeps an empty array an array and an empty object an object', function()
    local v = json.decode(json.encode(json.decode('{"a":[],"b":{}}')))
    assert.is_true(json.is_array(v.a))
    assert.is_false(json.is_array(v.b))
    assert.are.equal('[]', json.encode(v.a))
    assert.are.equal('{}', json.encode(v.b))
    assert.are.equal('[]', json.encode(json.decode('[]')))
    assert.are.equal('{}', json.encode(json.decode('{}')))
    assert.are.equal('{}', json.encode({}))
    assert.are.equal('[]', json.encode(json.array()))
  end)

  it('keeps integers integers', function()
    local v = json.decode('{"n":3,"f":1.5,"big":9007199254740992}')
    assert.are.equal('integer', math.type(v.n))
    assert.are.equal('float', math.type(v.f))
    assert.are.equal('integer', math.type(v.big))
    assert.are.equal('3', json.encode(3))
    assert.are.equal('9223372036854775807', json.encode(math.maxinteger))
    assert.are.equal('1.5', json.encode(1.5))
  end)

  it('round-trips null through the sentinel', function()
    local v = json.decode('{"a":null,"b":[null,1]}')
    assert.are.equal(json.null, v.a)
    assert.are.equal(json.null, v.b[1])
    assert.are.equal('{"a":null}', json.encode({ a = json.null }))
    assert.are.equal('json.null', tostring(json.null))
  end)

  it('encodes sequences as arrays and string-keyed tables as objects', function()
    assert.are.equal('[1,2,3]', json.encode({ 1, 2, 3 }))
    assert.are.equal('{"k":"v"}', json.encode({ k = 'v' }))
    assert.are.equal('{"a":{"b":[true,false]}}', json.encode({ a = { b = { true, false } } }))
  end)

  it('refuses what it cannot encode faithfully, naming the place', function()
    assert.has_error(function() json.encode({ 1, 2, x = 3 }) end,
      'json.encode: cannot encode a table with both string and integer keys at .')
    assert.has_error(function() json.encode({ a = { [1] = 1, [3] = 3 } }) end,
      'json.encode: cannot encode a sparse array at .a')
    assert.has_error(function() json.encode({ f = print }) end,
      'json.encode: cannot encode a function at .f')
    assert.has_error(function() json.encode(0 / 0) end)
    local t = {}
    t.self = t
    assert.has_error(function() json.encode(t) end)
  end)

  it('reports malformed input as a value, with the byte', function()
    local v, err = json.decode('{"a": [1, 2}')
    assert.is_nil(v)
    assert.matches('invalid JSON at byte %d+', err)
  end)
end)
