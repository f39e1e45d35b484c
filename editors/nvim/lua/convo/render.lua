-- Pure functions: a session and its history as transcript lines, and JSON as text.
-- No buffers, no IO; `convo.transcript` puts the lines in a buffer.
--
-- A transcript:
--
--   # demo — Editions
--   revision 7 · 9 messages · cwd /src
--
--   ## System
--   You are a careful coding agent.
--
--   ## User
--   Read both files.
--
--   ## Assistant
--   Reading both.
--   ▸ read_file {"path":"README.md"} (call_1)          ┐ one fold per call,
--     # demo                                            ┘ its result indented under it
--   ▸ read_file {"path":"Cargo.toml"} (call_2) [cancelled]
--     Cancelled — connection was lost before this tool ran.
--
-- A call's result is marked `[cancelled]` when convo stored a synthetic one (metadata
-- `synthetic: true`), `[pending]` when the repaired view shows one that is not stored
-- (`id` null: the call may still be answered), `[no result]` when there is none.

local M = {}

local function is_null(v)
  return v == nil or v == vim.NIL
end

local function lines_of(text)
  return vim.split(text, '\n', { plain = true })
end

--- JSON text for `value`, on one line unless `indent` is given; object members sorted
--- by a few well-known names first, then by name, so that the text is stable (a
--- decoded Lua table keeps no member order). `vim.empty_dict()` is `{}`, another empty
--- table `[]`.
local FIRST = {
  'system',
  'system_instruction',
  'messages',
  'contents',
  'role',
  'type',
  'id',
  'name',
  'content',
  'text',
  'parts',
}
local RANK = {}
for i, name in ipairs(FIRST) do
  RANK[name] = i
end

local function sorted_keys(t)
  local keys = vim.tbl_keys(t)
  table.sort(keys, function(a, b)
    local ra, rb = RANK[a] or math.huge, RANK[b] or math.huge
    if ra ~= rb then
      return ra < rb
    end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local function encode_scalar(v)
  if is_null(v) then
    return 'null'
  end
  -- cjson escapes `/`; JSON does not need it.
  return (vim.json.encode(v):gsub('\\/', '/'))
end

-- `vim.tbl_islist` became `vim.islist` in 0.10.
local islist = vim.islist or vim.tbl_islist

local function is_object(t)
  return getmetatable(t) == getmetatable(vim.empty_dict()) or (next(t) ~= nil and not islist(t))
end

function M.json(value, indent, depth)
  depth = depth or 0
  if type(value) ~= 'table' then
    return encode_scalar(value)
  end
  local pad = indent and string.rep(indent, depth + 1) or ''
  local close = indent and string.rep(indent, depth) or ''
  local nl, sep = indent and '\n' or '', indent and ': ' or ':'
  local items = {}
  if is_object(value) then
    for _, k in ipairs(sorted_keys(value)) do
      table.insert(items, pad .. encode_scalar(tostring(k)) .. sep .. M.json(value[k], indent, depth + 1))
    end
    if #items == 0 then
      return '{}'
    end
    return '{' .. nl .. table.concat(items, ',' .. nl) .. nl .. close .. '}'
  end
  for _, v in ipairs(value) do
    table.insert(items, pad .. M.json(v, indent, depth + 1))
  end
  if #items == 0 then
    return '[]'
  end
  return '[' .. nl .. table.concat(items, ',' .. nl) .. nl .. close .. ']'
end

--- A content value (string, content parts or null) as lines; images as `[image]`.
function M.content(content, images)
  local out = {}
  if type(content) == 'string' then
    if content ~= '' then
      vim.list_extend(out, lines_of(content))
    end
  elseif type(content) == 'table' then
    for _, part in ipairs(content) do
      if type(part) == 'table' and part.type == 'text' and type(part.text) == 'string' then
        vim.list_extend(out, lines_of(part.text))
      elseif type(part) == 'table' and (part.type == 'image_url' or part.type == 'image') then
        table.insert(out, '[image]')
      elseif type(part) == 'table' and part.type == 'tool_use' then
        table.insert(out, string.format('[tool_use %s %s]', tostring(part.name), M.json(part.input)))
      else
        table.insert(out, '[' .. tostring(type(part) == 'table' and part.type or part) .. ']')
      end
    end
  end
  for _ = 1, type(images) == 'table' and #images or 0 do
    table.insert(out, '[image]')
  end
  return out
end

--- A tool call's name and arguments, in any of the accepted shapes.
local function call_parts(call)
  local fn = type(call['function']) == 'table' and call['function'] or {}
  local name = fn.name or call.name or '?'
  local args = fn.arguments
  if is_null(args) then
    args = call.arguments
  end
  if is_null(args) then
    args = call.input
  end
  if type(args) ~= 'string' then
    args = is_null(args) and '{}' or M.json(args)
  end
  return tostring(name), args
end

local function heading(role, m)
  local text = '## ' .. role:sub(1, 1):upper() .. role:sub(2)
  if type(m.name) == 'string' then
    text = text .. ' (' .. m.name .. ')'
  end
  local meta = type(m.metadata) == 'table' and m.metadata or {}
  if meta.partial == true then
    text = text .. ' [partial: ' .. tostring(meta.reason or '?') .. ']'
  end
  return text
end

local function result_mark(result)
  if not result then
    return ' [no result]'
  end
  if is_null(result.id) then
    return ' [pending]'
  end
  local meta = type(result.metadata) == 'table' and result.metadata or {}
  if meta.synthetic == true then
    return ' [cancelled]'
  end
  return ''
end

--- The transcript of session `info` with the messages `history` (as `session/history`
--- returns them, repaired) and the stream in progress `draft` (or nil). Returns the
--- lines, the fold level of each line (a list for 'foldexpr': `'>1'` opens a call's
--- fold, 1 continues it, 0 is outside), and the stored message id each line shows
--- (false where none).
function M.transcript(info, history, draft)
  local lines, folds, ids = {}, {}, {}
  local function add(text, level, id)
    table.insert(lines, text)
    table.insert(folds, level or 0)
    table.insert(ids, id or false)
  end
  local function blank()
    if #lines > 0 and lines[#lines] ~= '' then
      add('')
    end
  end

  local title = '# ' .. info.session_id
  if type(info.title) == 'string' and info.title ~= '' then
    title = title .. ' — ' .. info.title
  end
  add(title)
  local messages = history.messages or {}
  local stored = #messages - (history.repaired or 0)
  local about = string.format('revision %d · %d message%s', history.revision, stored, stored == 1 and '' or 's')
  if type(info.forked_from) == 'table' then
    about = about .. ' · forked from ' .. tostring(info.forked_from.session_id)
  end
  if type(info.cwd) == 'string' then
    about = about .. ' · cwd ' .. info.cwd
  end
  add(about)
  if type(info.system) == 'string' and info.system ~= '' then
    blank()
    add('## System')
    for _, l in ipairs(lines_of(info.system)) do
      add(l)
    end
  end

  -- Each call's result, by call id, from the tool messages right after its assistant message.
  local shown = {}
  local function show_message(i)
    local m = messages[i]
    local id = not is_null(m.id) and m.id or false
    if m.role == 'tool' then
      if shown[i] then
        return
      end
      blank()
      add(heading('tool', m) .. ' ' .. tostring(m.tool_call_id) .. result_mark(m), 0, id)
      for _, l in ipairs(M.content(m.content)) do
        add('  ' .. l, 0, id)
      end
      return
    end
    blank()
    add(heading(m.role, m), 0, id)
    for _, l in ipairs(M.content(m.content, m.images)) do
      add(l, 0, id)
    end
    local calls = type(m.tool_calls) == 'table' and m.tool_calls or {}
    if #calls == 0 then
      return
    end
    local results = {}
    local j = i + 1
    while messages[j] and messages[j].role == 'tool' do
      results[messages[j].tool_call_id] = results[messages[j].tool_call_id] or j
      j = j + 1
    end
    for _, call in ipairs(calls) do
      local name, args = call_parts(call)
      local at = results[call.id]
      local result = at and messages[at]
      add(string.format('▸ %s %s (%s)%s', name, args, tostring(call.id), result_mark(result)), '>1', id)
      if result then
        shown[at] = true
        local rid = not is_null(result.id) and result.id or false
        local body = M.content(result.content)
        if #body == 0 then
          body = { '(empty)' }
        end
        for _, l in ipairs(body) do
          add('  ' .. l, 1, rid)
        end
      end
    end
  end
  for i = 1, #messages do
    show_message(i)
  end

  if type(draft) == 'table' then
    for _, m in ipairs(draft.messages or {}) do
      blank()
      add(heading(m.role, m) .. ' [streaming]')
      for _, l in ipairs(M.content(m.content, m.images)) do
        add(l)
      end
    end
  end
  return lines, folds, ids
end

return M
