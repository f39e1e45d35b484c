-- Transcript buffers: one read-only buffer per session (`convo://session/<id>`,
-- `filetype=convo`), filled from `session/get` and `session/history` and refreshed when
-- convo tells of a change (`session/subscribe`, `session/changed`), whichever process
-- made it. A buffer subscribes while it is loaded and unsubscribes when unloaded.

local render = require('convo.render')

local M = {}

--- Per buffer: { session_id, revision, ids (line -> message id), busy, again, subscription }
local state = {}

local PREFIX = 'convo://session/'

function M.name(session_id)
  return PREFIX .. session_id
end

--- The session shown in buffer `buf` (the current one by default), or nil.
function M.session_of(buf)
  local s = state[buf or vim.api.nvim_get_current_buf()]
  return s and s.session_id
end

--- The revision buffer `buf` shows, or nil.
function M.revision_of(buf)
  local s = state[buf or vim.api.nvim_get_current_buf()]
  return s and s.revision
end

--- The stored message shown on line `lnum` (1-based) of buffer `buf`, or nil.
function M.message_at(buf, lnum)
  local s = state[buf]
  local id = s and s.ids and s.ids[lnum]
  return id or nil
end

--- Every transcript buffer of `session_id`.
function M.buffers(session_id)
  local out = {}
  for buf, s in pairs(state) do
    if s.session_id == session_id and vim.api.nvim_buf_is_loaded(buf) then
      table.insert(out, buf)
    end
  end
  table.sort(out)
  return out
end

local function set_lines(buf, lines)
  vim.bo[buf].readonly = false
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].readonly = true
  vim.bo[buf].modified = false
end

--- Shows the session's state in `buf` now.
local function fill(buf, info, history)
  local lines, folds, ids = render.transcript(info, history, history.draft)
  local s = state[buf]
  s.revision, s.ids = history.revision, ids
  vim.api.nvim_buf_set_var(buf, 'convo_folds', folds)
  vim.api.nvim_buf_set_var(buf, 'convo_revision', history.revision)
  set_lines(buf, lines)
end

--- Reads the session again and shows it; `done(err)` runs after (err nil on success).
--- A refresh asked for while one runs makes one more after it, not one each.
function M.refresh(client, buf, done)
  done = done or function() end
  local s = state[buf]
  if not s then
    return done(nil)
  end
  if s.busy then
    s.again = true
    table.insert(s.waiting, done)
    return
  end
  s.busy = true
  local id = s.session_id
  local info_, err_
  client:request('session/get', { session_id = id }, function(err, info)
    info_, err_ = info, err
  end)
  client:request('session/history', { session_id = id, include_draft = true }, function(err, history)
    s.busy = false
    err = err_ or err
    if state[buf] == s and vim.api.nvim_buf_is_loaded(buf) then
      if err and err.data.kind == 'session_not_found' then
        set_lines(buf, { '# ' .. id, 'deleted' })
        s.revision = nil
      elseif not err then
        fill(buf, info_, history)
      end
    end
    done(err)
    -- Those who asked meanwhile get the next read, which sees what made them ask.
    local waiting = s.waiting
    s.waiting = {}
    local function tell(e)
      for _, w in ipairs(waiting) do
        w(e)
      end
    end
    if s.again and state[buf] == s then
      s.again = false
      M.refresh(client, buf, tell)
    else
      tell(err)
    end
  end)
end

--- Whether `session_id` is watched already, and the unsubscription hook.
local watched = {}

local function watch(client, session_id)
  if watched[session_id] then
    return
  end
  watched[session_id] = { pending = true }
  client:request('session/subscribe', { session_id = session_id }, function(err, result)
    if err then
      watched[session_id] = nil
      return
    end
    watched[session_id] = { subscription_id = result.subscription_id }
    if #M.buffers(session_id) == 0 then
      client:request('session/unsubscribe', { subscription_id = result.subscription_id })
      watched[session_id] = nil
    end
  end)
end

local function unwatch(client, session_id)
  local w = watched[session_id]
  if w and w.subscription_id and #M.buffers(session_id) == 0 then
    client:request('session/unsubscribe', { subscription_id = w.subscription_id })
    watched[session_id] = nil
  end
end

--- Installs the `session/changed` handler on `client` (once per client).
function M.attach(client)
  if client.convo_transcripts then
    return
  end
  client.convo_transcripts = true
  client:on('session/changed', function(params)
    for _, buf in ipairs(M.buffers(params.session_id)) do
      if state[buf].revision ~= params.revision or params.change == 'draft' then
        M.refresh(client, buf)
      end
    end
  end)
  client:on('$/exit', function()
    watched = {}
  end)
end

--- Folds: one per tool call with its result, closed (set wherever the buffer is shown,
--- for that window and buffer only).
local function fold_options()
  vim.cmd('setlocal foldmethod=expr foldexpr=get(b:convo_folds,v:lnum-1,0) foldlevel=0 foldenable')
end

local function new_buffer(client, session_id)
  -- An unloaded buffer (`:bdelete`) keeps its name: take it over.
  for _, old in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(old) == M.name(session_id) then
      vim.api.nvim_buf_delete(old, { force = true })
    end
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(buf, M.name(session_id))
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].readonly = true
  vim.api.nvim_buf_set_var(buf, 'convo_folds', {})
  state[buf] = { session_id = session_id, waiting = {} }
  vim.api.nvim_create_autocmd('BufWinEnter', { buffer = buf, callback = fold_options })
  -- `:bdelete` or `:bwipeout`: the transcript is gone, and so is its subscription.
  vim.api.nvim_create_autocmd('BufUnload', {
    buffer = buf,
    once = true,
    callback = function()
      state[buf] = nil
      vim.schedule(function()
        unwatch(client, session_id)
      end)
    end,
  })
  return buf
end

--- Opens (or shows again) the transcript of `session_id` in the current window;
--- `done(err, buf)` runs once it is filled. When a new buffer cannot be filled (no such
--- session), it is wiped and the window shows what it showed before.
function M.open(client, session_id, done)
  done = done or function() end
  M.attach(client)
  local buf = M.buffers(session_id)[1]
  local fresh = buf == nil
  if fresh then
    buf = new_buffer(client, session_id)
  end
  local win, before = vim.api.nvim_get_current_win(), vim.api.nvim_get_current_buf()
  vim.api.nvim_win_set_buf(win, buf)
  vim.bo[buf].filetype = 'convo'
  watch(client, session_id)
  M.refresh(client, buf, function(err)
    if err and fresh and vim.api.nvim_buf_is_valid(buf) then
      if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == buf and vim.api.nvim_buf_is_valid(before) then
        vim.api.nvim_win_set_buf(win, before)
      end
      vim.api.nvim_buf_delete(buf, { force = true })
      buf = nil
    end
    done(err, buf)
  end)
  return buf
end

return M
