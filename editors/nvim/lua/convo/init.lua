-- convo.nvim: browse, export, fork and trim convo sessions from Neovim, and a client
-- other plugins can build on.
--
--   require('convo').setup({ cmd = 'convo', store = 'sqlite:/path/sessions.db' })
--   local client = require('convo').client()   -- started on first use
--   client:request('session/list', {}, function(err, result) … end)
--
-- Every failure of a command is told through `vim.notify` (level ERROR), with convo's
-- own message.

local M = {}

local defaults = {
  -- The binary: a path or name, or a list (binary, then arguments). Unset: $CONVO_BINARY,
  -- then `convo` on PATH (`convo.exe` on Windows).
  cmd = nil,
  -- `--store`: `sqlite`, `sqlite:PATH` or `memory`. Unset: convo's own default
  -- ($CONVO_STORE, else the platform data folder).
  store = nil,
  -- More arguments for convo (`--log-level`, …).
  args = {},
  -- Extra environment variables for the process.
  env = nil,
}

M.config = vim.deepcopy(defaults)

--- The export formats `session/export` knows.
M.FORMATS = { 'openai_chat', 'anthropic_messages', 'gemini_contents' }

local shared = nil

function M.setup(opts)
  M.config = vim.tbl_extend('force', vim.deepcopy(defaults), opts or {})
  if shared and shared:is_running() then
    shared:stop()
  end
  shared = nil
end

--- The binary's file name on this system: `convo.exe` on Windows, `convo` elsewhere.
function M.executable_name()
  return vim.fn.has('win32') == 1 and 'convo.exe' or 'convo'
end

--- Where the binary was found and how: returns path, source (`setup`, `CONVO_BINARY`,
--- `PATH`), or nil and the reason.
function M.binary()
  local cmd = M.config.cmd
  if type(cmd) == 'table' then
    cmd = cmd[1]
  end
  local source = 'setup'
  if cmd == nil or cmd == '' then
    cmd, source = vim.env.CONVO_BINARY, 'CONVO_BINARY'
  end
  if cmd == nil or cmd == '' then
    cmd, source = M.executable_name(), 'PATH'
  end
  local path = vim.fn.exepath(cmd)
  if path == '' then
    local why = source == 'PATH' and (cmd .. ' is not on PATH (set cmd in setup() or $CONVO_BINARY)')
      or string.format('%s from %s is not an executable', cmd, source)
    return nil, why
  end
  return path, source
end

--- The command line convo is started with.
function M.command()
  local path, why = M.binary()
  if not path then
    return nil, why
  end
  local cmd = { path }
  if type(M.config.cmd) == 'table' then
    vim.list_extend(cmd, vim.list_slice(M.config.cmd, 2))
  end
  if M.config.store then
    vim.list_extend(cmd, { '--store', M.config.store })
  end
  vim.list_extend(cmd, M.config.args or {})
  return cmd
end

--- The shared client, started on first use (and again after the process ended).
--- Returns the client, or nil and an error table.
function M.client()
  if shared and shared:is_running() then
    return shared
  end
  local client_mod = require('convo.client')
  local cmd, why = M.command()
  if not cmd then
    return nil, client_mod.error(client_mod.CONNECTION_CLOSED, why, { kind = 'binary_not_found' })
  end
  local client, err = client_mod.start(cmd, { env = M.config.env })
  shared = client
  return client, err
end

--- Tells `err` (an error table or a string) through vim.notify.
function M.report(err)
  local text = type(err) == 'table' and err.message or tostring(err)
  vim.notify('convo: ' .. text, vim.log.levels.ERROR, { title = 'convo' })
end

--- Runs `fn(client)` with the shared client, or reports why there is none.
local function with_client(fn)
  local client, err = M.client()
  if not client then
    M.report(err)
    return
  end
  return fn(client)
end

--- A request whose failure is reported; `then_(result)` runs on success.
local function call(method, params, then_)
  return with_client(function(client)
    client:request(method, params, function(err, result)
      if err then
        M.report(err)
      elseif then_ then
        then_(result, client)
      end
    end)
  end)
end

--- The session of the current transcript buffer, or the one given; reports when neither.
local function session_here(given)
  if given and given ~= '' then
    return given
  end
  local id = require('convo.transcript').session_of()
  if not id then
    M.report('no session here: give a session id, or run this in a :ConvoShow buffer')
  end
  return id
end

--- Shows the transcript of `session_id` in the current window (`done(err, buf)` after).
function M.show(session_id, done)
  return with_client(function(client)
    require('convo.transcript').open(client, session_id, function(err, buf)
      if err then
        M.report(err)
      end
      if done then
        done(err, buf)
      end
    end)
  end)
end

--- Picks a session with vim.ui.select (newest first) and shows it.
function M.sessions(done)
  call('session/list', { limit = 1000 }, function(result)
    local sessions = result.sessions or {}
    if #sessions == 0 then
      vim.notify('convo: no sessions', vim.log.levels.INFO, { title = 'convo' })
      return done and done(nil)
    end
    vim.ui.select(sessions, {
      prompt = 'convo sessions',
      kind = 'convo_session',
      format_item = function(s)
        local title = (type(s.title) == 'string' and s.title ~= '') and (' — ' .. s.title) or ''
        return string.format('%s%s (%d messages, %s)', s.session_id, title, s.message_count, s.updated_at)
      end,
    }, function(choice)
      if choice then
        M.show(choice.session_id, done)
      elseif done then
        done(nil)
      end
    end)
  end)
end

--- Opens `session/export`'s payload for `format` as JSON in a new buffer; its warnings
--- are told through vim.notify (WARN).
function M.export(session_id, format, done)
  format = (format and format ~= '') and format or 'openai_chat'
  if not vim.tbl_contains(M.FORMATS, format) then
    return M.report(string.format('unknown format %q: use one of %s', format, table.concat(M.FORMATS, ', ')))
  end
  call('session/export', { session_id = session_id, format = format }, function(result)
    local text = require('convo.render').json(result.payload, '  ')
    vim.cmd('enew')
    local buf = vim.api.nvim_get_current_buf()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true }))
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].filetype = 'json'
    pcall(vim.api.nvim_buf_set_name, buf, string.format('convo://export/%s/%s.json', session_id, format))
    for _, w in ipairs(result.warnings or {}) do
      local at = type(w.index) == 'number' and string.format(' (message %d)', w.index) or ''
      vim.notify('convo export: ' .. w.message .. at, vim.log.levels.WARN, { title = 'convo' })
    end
    if done then
      done(buf)
    end
  end)
end

--- Forks a session (`opts.session_id`, else the current transcript's) and shows the fork.
--- `opts.new_session_id` names it; `opts.at_cursor` copies the history only up to the
--- message under the cursor.
function M.fork(opts, done)
  opts = opts or {}
  local id = session_here(opts.session_id)
  if not id then
    return
  end
  local params = { session_id = id, new_session_id = opts.new_session_id }
  if opts.at_cursor then
    local tr = require('convo.transcript')
    params.at_message_id = tr.message_at(vim.api.nvim_get_current_buf(), vim.fn.line('.'))
    if not params.at_message_id then
      return M.report('no stored message under the cursor to fork at')
    end
  end
  call('session/fork', params, function(info)
    M.show(info.session_id, done)
  end)
end

--- Keeps the last `turns` turns of the current transcript's session (or
--- `session_id`'s): `session/trim`, checked against the revision on screen.
function M.trim(turns, session_id, done)
  local n = tonumber(turns)
  if not n or n < 0 or n % 1 ~= 0 then
    return M.report(string.format('trim takes a number of turns to keep, got %q', tostring(turns)))
  end
  local id = session_here(session_id)
  if not id then
    return
  end
  local tr = require('convo.transcript')
  local buf = vim.api.nvim_get_current_buf()
  local expected = tr.session_of(buf) == id and tr.revision_of(buf) or nil
  call('session/trim', { session_id = id, max_turns = n, expected_revision = expected }, function(result, client)
    local removed = string.format('convo: removed %d message%s', result.removed, result.removed == 1 and '' or 's')
    vim.notify(removed, vim.log.levels.INFO, { title = 'convo' })
    local pending = 0
    for _, b in ipairs(tr.buffers(id)) do
      pending = pending + 1
      tr.refresh(client, b, function()
        pending = pending - 1
        if pending == 0 and done then
          done(result)
        end
      end)
    end
    if pending == 0 and done then
      done(result)
    end
  end)
end

--- Session ids for command completion.
function M.complete_sessions(prefix)
  local client = M.client()
  if not client then
    return {}
  end
  local result = client:request_sync('session/list', { limit = 1000 }, 2000)
  local out = {}
  for _, s in ipairs(result and result.sessions or {}) do
    if vim.startswith(s.session_id, prefix or '') then
      table.insert(out, s.session_id)
    end
  end
  return out
end

return M
