-- convo.nvim's commands. Loading this file starts nothing: the convo process is spawned
-- by the first command (or `require('convo').client()`).
if vim.g.loaded_convo then
  return
end
vim.g.loaded_convo = true

local function convo()
  return require('convo')
end

local function complete_sessions(arg_lead)
  return convo().complete_sessions(arg_lead)
end

local command = vim.api.nvim_create_user_command

command('ConvoSessions', function()
  convo().sessions()
end, { nargs = 0, desc = 'Pick a convo session and show its transcript' })

command('ConvoShow', function(o)
  if o.args == '' then
    return convo().sessions()
  end
  convo().show(o.args)
end, { nargs = '?', complete = complete_sessions, desc = 'Show a convo session as a read-only transcript' })

command('ConvoExport', function(o)
  local id, format = o.fargs[1], o.fargs[2]
  if #o.fargs == 1 and vim.tbl_contains(convo().FORMATS, id) then
    id, format = nil, o.fargs[1]
  end
  if not id then
    id = require('convo.transcript').session_of()
    if not id then
      return convo().report('no session here: :ConvoExport {id} {format}')
    end
  end
  convo().export(id, format)
end, {
  nargs = '*',
  complete = function(arg_lead, line)
    local n = #vim.split(line, '%s+', { trimempty = false })
    if n <= 2 then
      return complete_sessions(arg_lead)
    end
    return vim.tbl_filter(function(f)
      return vim.startswith(f, arg_lead)
    end, convo().FORMATS)
  end,
  desc = 'Export a convo session for a provider (openai_chat, anthropic_messages, gemini_contents) as JSON',
})

command('ConvoFork', function(o)
  convo().fork({ new_session_id = o.fargs[1], at_cursor = o.bang })
end, { nargs = '?', bang = true, desc = 'Fork the session shown here (!: up to the message under the cursor)' })

command('ConvoTrim', function(o)
  convo().trim(o.args)
end, { nargs = 1, desc = 'Keep the last {turns} turns of the session shown here' })
