-- A connection to one convo process, through Neovim's own JSON-RPC client
-- (`vim.lsp.rpc.start`, LSP framing): async requests and notifications, server
-- notifications by method, and errors as tables `{code, message, data = {kind, …}}`.
--
-- Works on Neovim 0.7.2 and newer: `vim.lsp.rpc.start` took `(cmd, args, dispatchers,
-- extra)` until 0.10 and takes `(cmd_list, dispatchers, extra)` since. An empty Lua
-- table is sent as `[]`, which convo reads as `{}` (protocol/README.md, Empty tables
-- from Lua), so params are plain tables.

local M = {}

--- `data.kind` for the JSON-RPC codes, which carry no data (as every convo client names them).
M.KINDS = {
  [-32700] = 'parse_error',
  [-32600] = 'invalid_request',
  [-32601] = 'method_not_found',
  [-32602] = 'invalid_params',
  [-32603] = 'internal_error',
  [-32800] = 'request_cancelled',
}

--- The code of the errors the client makes itself when the process is gone
--- (vscode-jsonrpc's code for a request pending when its connection ended).
M.CONNECTION_CLOSED = -32097

local error_mt = {
  __tostring = function(e)
    return string.format('%s (%s %d)', e.message, e.data.kind, e.code)
  end,
}

--- An error table from an error reply `{code, message, data?}`: `data.kind` is always set.
function M.error(code, message, data)
  local copy = {}
  if type(data) == 'table' then
    for k, v in pairs(data) do
      copy[k] = v
    end
  end
  if type(copy.kind) ~= 'string' then
    copy.kind = M.KINDS[code] or 'unknown'
  end
  return setmetatable({ code = code, message = message or 'error', data = copy }, error_mt)
end

--- Runs `fn` now, or on the main loop when called from a libuv callback.
local function main_loop(fn)
  if vim.in_fast_event() then
    vim.schedule(fn)
  else
    fn()
  end
end

local Client = {}
Client.__index = Client

--- Spawns `cmd` (a list: the binary, then its arguments) and sends `initialize`.
--- Returns the client, or nil and an error table.
function M.start(cmd, opts)
  opts = opts or {}
  local self = setmetatable({
    cmd = cmd,
    pending = {},
    next_id = 0,
    handlers = {},
    exited = nil,
    info = nil,
  }, Client)
  local dispatchers = {
    notification = function(method, params)
      main_loop(function()
        self:_dispatch(method, params)
      end)
    end,
    on_exit = function(code, signal)
      main_loop(function()
        self:_on_exit(code, signal)
      end)
    end,
  }
  local extra = { env = opts.env, cwd = opts.cwd }
  local ok, rpc
  if vim.fn.has('nvim-0.10') == 1 then
    ok, rpc = pcall(vim.lsp.rpc.start, cmd, dispatchers, extra)
  else
    ok, rpc = pcall(vim.lsp.rpc.start, cmd[1], vim.list_slice(cmd, 2), dispatchers, extra)
  end
  if not ok or not rpc then
    local why = ok and 'the process could not be spawned' or tostring(rpc)
    return nil, M.error(M.CONNECTION_CLOSED, 'cannot start ' .. cmd[1] .. ': ' .. why, { kind = 'spawn_failed' })
  end
  self.rpc = rpc
  self:request('initialize', {}, function(err, result)
    self.info = result
    self.init_error = err
  end)
  return self
end

--- Sends a request; `callback(err, result)` runs on the main loop, with `err` an error
--- table (see `M.error`) or nil. Returns the request's number, or nil when the process
--- is gone (the callback then gets a `connection_closed` error at once).
function Client:request(method, params, callback)
  callback = callback or function() end
  if self.exited then
    main_loop(function()
      callback(self:_closed_error())
    end)
    return nil
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = callback
  local sent = self.rpc.request(method, params, function(err, result)
    local cb = self.pending[id]
    if not cb then
      return
    end
    self.pending[id] = nil
    main_loop(function()
      if err then
        cb(M.error(err.code, err.message, err.data), nil)
      else
        cb(nil, result)
      end
    end)
  end)
  if not sent then
    self.pending[id] = nil
    main_loop(function()
      callback(self:_closed_error())
    end)
    return nil
  end
  return id
end

--- Sends a request and waits for its answer (at most `timeout_ms`, 10 s by default):
--- returns result, err.
function Client:request_sync(method, params, timeout_ms)
  local done, err_, result_ = false, nil, nil
  self:request(method, params, function(err, result)
    done, err_, result_ = true, err, result
  end)
  if not vim.wait(timeout_ms or 10000, function()
    return done
  end, 5) then
    return nil, M.error(M.CONNECTION_CLOSED, method .. ': no answer within ' .. (timeout_ms or 10000) .. ' ms', {
      kind = 'timeout',
    })
  end
  return result_, err_
end

--- Sends a notification; false when the process is gone.
function Client:notify(method, params)
  if self.exited then
    return false
  end
  return self.rpc.notify(method, params) ~= false
end

--- Calls `handler(params)` for every server notification `method` (`session/changed`…);
--- returns a function that removes the handler.
function Client:on(method, handler)
  self.handlers[method] = self.handlers[method] or {}
  table.insert(self.handlers[method], handler)
  return function()
    local list = self.handlers[method] or {}
    for i, h in ipairs(list) do
      if h == handler then
        table.remove(list, i)
        return
      end
    end
  end
end

--- Whether the process is still there.
function Client:is_running()
  return not self.exited
end

--- Ends the process: `shutdown` (every write made durable), then `exit`.
function Client:stop(timeout_ms)
  if self.exited then
    return
  end
  self:request_sync('shutdown', nil, timeout_ms or 5000)
  self:notify('exit', nil)
  vim.wait(timeout_ms or 5000, function()
    return self.exited ~= nil
  end, 5)
  if not self.exited and self.rpc.terminate then
    self.rpc.terminate()
  end
end

function Client:_dispatch(method, params)
  for _, handler in ipairs(vim.list_slice(self.handlers[method] or {})) do
    local ok, e = pcall(handler, params)
    if not ok then
      vim.notify('convo: a ' .. method .. ' handler failed: ' .. tostring(e), vim.log.levels.ERROR)
    end
  end
end

function Client:_closed_error()
  local exit = self.exited or {}
  local message = 'the convo process is not running'
  if exit.code then
    message = string.format('the convo process exited (code %d)', exit.code)
  end
  return M.error(M.CONNECTION_CLOSED, message, { kind = 'connection_closed', exit_code = exit.code, signal = exit.signal })
end

function Client:_on_exit(code, signal)
  self.exited = { code = code, signal = signal }
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    cb(self:_closed_error())
  end
  self:_dispatch('$/exit', self.exited)
end

return M
