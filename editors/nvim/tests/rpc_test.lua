-- Neovim's own JSON-RPC client against convo, with no plugin loaded: what any Lua plugin
-- author gets from `vim.lsp.rpc.start` (issue 17). Its first request, `initialize`
-- with the params Neovim's LSP client builds, must succeed, though Neovim writes every
-- empty table in them as `[]`.

local H = dofile(vim.env.CONVO_TEST_ROOT .. '/tests/helpers.lua')
local test, eq = H.test, H.eq

local binary = assert(vim.env.CONVO_TEST_BINARY, 'CONVO_TEST_BINARY is not set')

local notifications = {}
local exit = nil
local dispatchers = {
  notification = function(method, params)
    table.insert(notifications, { method, params })
  end,
  on_exit = function(code, signal)
    exit = { code, signal }
  end,
}

-- `vim.lsp.rpc.start(cmd, args, dispatchers, extra)` until 0.10, `(cmd_list, dispatchers, extra)` since.
local rpc
if vim.fn.has('nvim-0.10') == 1 then
  rpc = vim.lsp.rpc.start({ binary, '--store', 'memory' }, dispatchers)
else
  rpc = vim.lsp.rpc.start(binary, { '--store', 'memory' }, dispatchers)
end
assert(rpc, 'vim.lsp.rpc.start spawned nothing')

--- A request through vim.lsp.rpc, waited for: err, result.
local function request(method, params)
  local done, err_, result_ = false, nil, nil
  assert(rpc.request(method, params, function(err, result)
    done, err_, result_ = true, err, result
  end), 'the request was not sent')
  H.wait_for(function()
    return done
  end, 'the answer to ' .. method)
  return err_, result_
end

--- The initialize params of Neovim's LSP client (vim.lsp.start_client, 0.7.2), with its
--- default capabilities; no root folder.
local function lsp_initialize_params()
  local version = vim.version()
  return {
    processId = (vim.uv or vim.loop).getpid(),
    clientInfo = { name = 'Neovim', version = string.format('%d.%d.%d', version.major, version.minor, version.patch) },
    rootPath = vim.NIL,
    rootUri = vim.NIL,
    initializationOptions = nil,
    capabilities = vim.lsp.protocol.make_client_capabilities(),
    trace = 'off',
    workspaceFolders = vim.NIL,
  }
end

test('no plugin is loaded', function()
  eq(nil, package.loaded['convo'], 'convo.nvim is not loaded')
  eq(0, vim.fn.exists(':ConvoShow'), 'its commands are not defined')
end)

test('an empty Lua table is sent as []', function()
  eq('[]', vim.json.encode({}), 'vim.json.encode({})')
end)

test("initialize with Neovim's default LSP params succeeds", function()
  local params = lsp_initialize_params()
  local err, result = request('initialize', params)
  eq(nil, err, 'no error')
  eq({ 'convo', 1, 'memory', 'lsp' }, {
    result.server_info.name,
    result.protocol_version,
    result.capabilities.store,
    result.capabilities.framing,
  }, 'the answer')
  H.truthy(vim.tbl_contains(result.capabilities.methods, 'session/create'), 'its methods')
end)

test('initialize with {} (sent as params: []) succeeds and answers the same', function()
  local _, first = request('initialize', lsp_initialize_params())
  local err, result = request('initialize', {})
  eq(nil, err, 'no error')
  eq(first, result, 'the same answer')
end)

test('a session through vim.lsp.rpc: create, add, history, a 1001 error', function()
  local err, info = request('session/create', { session_id = 'raw', metadata = {} })
  eq(nil, err, 'create')
  eq(vim.empty_dict(), info.metadata, 'metadata {} sent as [] is stored as {}')
  err = request('session/add_user', { session_id = 'raw', text = 'hi' })
  eq(nil, err, 'add_user')
  err = request('session/add_assistant', {
    session_id = 'raw',
    tool_calls = { { id = 't1', name = 'ls', arguments = {} } },
  })
  eq(nil, err, 'add_assistant with arguments {} sent as []')
  local history
  err, history = request('session/history', { session_id = 'raw' })
  eq(nil, err, 'history')
  eq({ 3, 1 }, { #history.messages, history.repaired }, 'the repaired view')
  local args = history.messages[2].tool_calls[1].arguments
  eq(getmetatable(vim.empty_dict()), getmetatable(args), 'the arguments came back as an object {}')
  eq(true, history.messages[3].metadata.synthetic, 'the synthetic result')
  err = request('session/get', { session_id = 'missing' })
  eq({ 1001, 'session_not_found', 'missing' }, { err.code, err.data.kind, err.data.session_id }, 'the error')
end)

test('shutdown, exit: the process ends with code 0', function()
  local err, result = request('shutdown', nil)
  eq({ nil, nil }, { err, result }, 'shutdown answers null')
  rpc.notify('exit', nil)
  H.wait_for(function()
    return exit ~= nil
  end, 'the process to exit')
  eq(0, exit[1], 'the exit code')
end)

H.run('vim.lsp.rpc')
