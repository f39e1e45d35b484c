-- convo.nvim in a real (headless) Neovim against the real convo binary: setup, the
-- commands, the Lua API, errors through vim.notify, :checkhealth and live refresh.
-- Run by test.sh: CONVO_TEST_BINARY is the binary, CONVO_TEST_DIR a fresh folder.

local H = dofile(vim.env.CONVO_TEST_ROOT .. '/tests/helpers.lua')
local test, eq, lines, wait_for = H.test, H.eq, H.lines, H.wait_for

local binary = assert(vim.env.CONVO_TEST_BINARY, 'CONVO_TEST_BINARY is not set')
local dir = assert(vim.env.CONVO_TEST_DIR, 'CONVO_TEST_DIR is not set')
local store = 'sqlite:' .. dir .. '/sessions.db'
local CANCELLED = 'Cancelled — connection was lost before this tool ran.'

local convo = require('convo')
local transcript = require('convo.transcript')

local function client()
  return H.truthy(convo.client(), 'a client')
end

--- A request through the plugin's client that must succeed.
local function call(method, params)
  local result, err = client():request_sync(method, params)
  if err then
    error(method .. ' failed: ' .. tostring(err), 2)
  end
  return result
end

--- Runs an Ex command that opens a transcript and waits until `session_id`'s buffer is
--- filled at `revision`; returns the buffer.
local function shown(cmd, session_id, revision)
  vim.cmd(cmd)
  local buf
  wait_for(function()
    buf = transcript.buffers(session_id)[1]
    return buf and vim.b[buf].convo_revision == revision and vim.api.nvim_get_current_buf() == buf
  end, cmd .. ' to show ' .. session_id .. ' at revision ' .. revision)
  return buf
end

-- The transcript of `demo` as built below: every kind of result mark.
local function demo_lines(revision_line)
  return {
    '# demo — Editions',
    revision_line or 'revision 7 · 8 messages · cwd /src',
    '',
    '## System',
    'You are terse.',
    '',
    '## User',
    'Read both files.',
    '',
    '## Assistant',
    'Reading both.',
    '▸ read_file {"path":"README.md"} (call_1)',
    '  # demo',
    '  A demo.',
    '▸ read_file {"path":"Cargo.toml"} (call_2) [cancelled]',
    '  ' .. CANCELLED,
    '',
    '## User',
    'Never mind the other.',
    '',
    '## Assistant',
    'OK.',
    '',
    '## User',
    'List the files.',
    '',
    '## Assistant',
    '▸ ls {} (call_3) [pending]',
    '  ' .. CANCELLED,
  }
end

test('setup finds the binary: the option, then $CONVO_BINARY, then PATH', function()
  local saved_env, saved_path = vim.env.CONVO_BINARY, vim.env.PATH
  convo.setup({ store = store })
  vim.env.CONVO_BINARY = binary
  eq({ binary, 'CONVO_BINARY' }, { convo.binary() }, 'from $CONVO_BINARY')
  vim.env.CONVO_BINARY = nil
  vim.env.PATH = '/nonexistent'
  local path, why = convo.binary()
  eq(nil, path, 'nothing on PATH')
  eq('convo is not on PATH (set cmd in setup() or $CONVO_BINARY)', why, 'the reason')
  -- PATH's separator: `;` on Windows.
  vim.env.PATH = vim.fn.fnamemodify(binary, ':h') .. (vim.fn.has('win32') == 1 and ';' or ':') .. saved_path
  eq({ binary, 'PATH' }, { convo.binary() }, 'from PATH')
  vim.env.CONVO_BINARY = '/nonexistent/convo'
  convo.setup({ cmd = binary, store = store })
  eq({ binary, 'setup' }, { convo.binary() }, 'the option comes first')
  eq({ binary, '--store', store }, convo.command(), 'the command line')
  vim.env.CONVO_BINARY, vim.env.PATH = saved_env, saved_path
end)

test('on Windows the binary looked for on PATH is convo.exe', function()
  local saved_env, saved_path, saved_has = vim.env.CONVO_BINARY, vim.env.PATH, vim.fn.has
  local saved_config = vim.deepcopy(convo.config)
  local bin_dir = dir .. '/windows-bin'
  vim.fn.mkdir(bin_dir, 'p')
  local exe = bin_dir .. '/convo.exe'
  assert(vim.loop.fs_symlink(binary, exe))
  -- has('win32') answers as on Windows; everything else as here.
  vim.fn.has = function(feature)
    return feature == 'win32' and 1 or saved_has(feature)
  end
  local ok, e = pcall(function()
    convo.setup({ store = store })
    vim.env.CONVO_BINARY = nil
    eq('convo.exe', convo.executable_name(), 'the name on Windows')
    vim.env.PATH = bin_dir
    eq({ exe, 'PATH' }, { convo.binary() }, 'convo.exe from PATH')
    vim.env.PATH = vim.fn.fnamemodify(binary, ':h') -- a folder with `convo` in it, not `convo.exe`
    local path, why = convo.binary()
    eq(nil, path, 'no convo.exe on PATH')
    eq('convo.exe is not on PATH (set cmd in setup() or $CONVO_BINARY)', why, 'the reason names convo.exe')
  end)
  vim.fn.has, vim.env.CONVO_BINARY, vim.env.PATH = saved_has, saved_env, saved_path
  convo.setup(saved_config) -- the tests below use the binary set up before
  if not ok then
    error(e, 0)
  end
end)

test('the Lua API: async requests, notifications, errors as tables', function()
  local c = client()
  local got
  c:request('session/create', { session_id = 'demo', system = 'You are terse.', title = 'Editions', cwd = '/src', metadata = {} }, function(err, result)
    got = { err = err, result = result }
  end)
  wait_for(function()
    return got
  end, 'the answer to session/create')
  eq(nil, got.err, 'no error')
  eq('demo', got.result.session_id, 'the session id')
  eq(getmetatable(vim.empty_dict()), getmetatable(got.result.metadata), 'metadata {} (sent as []) comes back as an object')

  call('session/add_user', { session_id = 'demo', text = 'Read both files.' })
  call('session/add_assistant', {
    session_id = 'demo',
    text = 'Reading both.',
    tool_calls = {
      { id = 'call_1', name = 'read_file', arguments = { path = 'README.md' } },
      { id = 'call_2', type = 'function', ['function'] = { name = 'read_file', arguments = '{"path":"Cargo.toml"}' } },
    },
  })
  call('session/add_tool_result', { session_id = 'demo', tool_call_id = 'call_1', content = '# demo\nA demo.' })
  call('session/add_user', { session_id = 'demo', text = 'Never mind the other.' })
  -- A notification runs its method and gets no answer.
  eq(true, c:notify('session/add_assistant', { session_id = 'demo', text = 'OK.' }), 'notify sent')
  call('session/add_user', { session_id = 'demo', text = 'List the files.' })
  call('session/add_assistant', { session_id = 'demo', tool_calls = { { id = 'call_3', name = 'ls', input = {} } } })
  eq(7, call('session/get', { session_id = 'demo' }).revision, 'every change made, the notification among them')

  local result, err = c:request_sync('session/get', { session_id = 'nope' })
  eq(nil, result, 'no result')
  eq({ 1001, 'session_not_found', 'nope' }, { err.code, err.data.kind, err.data.session_id }, 'a protocol error')
  _, err = c:request_sync('session/get', {})
  eq({ -32602, 'invalid_params' }, { err.code, err.data.kind }, 'a JSON-RPC error gets its kind too')
  eq('invalid params: missing field `session_id`', err.message, 'its message')

  local seen = {}
  local off = c:on('session/changed', function(p)
    table.insert(seen, p)
  end)
  local sub = call('session/subscribe', { session_id = 'other' })
  call('session/create', { session_id = 'other' })
  wait_for(function()
    return #seen > 0
  end, 'session/changed for other')
  off()
  eq({ sub.subscription_id, 'other', 'created', 0 }, { seen[1].subscription_id, seen[1].session_id, seen[1].change, seen[1].revision }, 'the notification')
  call('session/unsubscribe', { subscription_id = sub.subscription_id })
  call('session/delete', { session_id = 'other' })
end)

test(':ConvoShow shows the transcript read-only, calls folded with their results', function()
  local buf = shown('ConvoShow demo', 'demo', 7)
  lines(demo_lines(), H.buf_lines(buf), 'the transcript')
  eq('convo://session/demo', vim.api.nvim_buf_get_name(buf), 'its name')
  eq({ 'convo', false, 'nofile' }, { vim.bo[buf].filetype, vim.bo[buf].modifiable, vim.bo[buf].buftype }, 'its options')
  local ok = pcall(vim.api.nvim_buf_set_lines, buf, 0, 1, false, { 'x' })
  eq(false, ok, 'the buffer refuses changes')
  local call_1 = vim.fn.search('(call_1)', 'nw')
  eq({ call_1, call_1 + 2 }, { vim.fn.foldclosed(call_1), vim.fn.foldclosedend(call_1) }, 'call_1 folded with its result')
  local call_2 = call_1 + 3
  eq({ call_2, call_2 + 1 }, { vim.fn.foldclosed(call_2), vim.fn.foldclosedend(call_2) }, 'call_2 folded with its result')
  eq(-1, vim.fn.foldclosed(call_1 - 1), 'the message text is not folded')
end)

test(':ConvoSessions picks with vim.ui.select and shows the choice', function()
  call('session/create', { session_id = 'second', title = 'Second' })
  vim.cmd('enew')
  local original, offered = vim.ui.select, nil
  vim.ui.select = function(items, opts, on_choice)
    offered = vim.tbl_map(opts.format_item, items)
    for _, item in ipairs(items) do
      if item.session_id == 'demo' then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  local ok, e = pcall(shown, 'ConvoSessions', 'demo', 7)
  vim.ui.select = original
  assert(ok, e)
  eq(2, #offered, 'two sessions offered')
  H.truthy(offered[1]:match('^second — Second %(0 messages, %d%d%d%d%-'), 'newest first, with title and count: ' .. offered[1])
  H.truthy(offered[2]:match('^demo — Editions %(8 messages, '), offered[2])
  lines(demo_lines(), H.buf_lines(), 'the chosen transcript')
  call('session/delete', { session_id = 'second' })
end)

test(':ConvoExport opens the provider payload as JSON', function()
  local want = call('session/export', { session_id = 'demo', format = 'anthropic_messages' }).payload
  vim.cmd('ConvoExport demo anthropic_messages')
  wait_for(function()
    return vim.bo.filetype == 'json'
  end, 'the export buffer')
  local text = table.concat(H.buf_lines(), '\n')
  local ok, got = pcall(vim.json.decode, text)
  H.truthy(ok, 'the buffer is valid JSON: ' .. tostring(got))
  eq(want, got, 'the payload')
  eq('You are terse.', got.system, 'the system prompt')
  eq('user', got.messages[1].role, 'the first message')
  H.truthy(text:find('"input": {}', 1, true), 'an empty object stays an object: ' .. text)
  eq('convo://export/demo/anthropic_messages.json', vim.api.nvim_buf_get_name(0), 'its name')
end)

test(':ConvoFork forks the session shown, whole or up to the cursor', function()
  shown('ConvoShow demo', 'demo', 7)
  local buf = shown('ConvoFork demo-fork', 'demo-fork', 0)
  local want = demo_lines('revision 0 · 8 messages · forked from demo · cwd /src')
  want[1] = '# demo-fork — Editions'
  lines(want, H.buf_lines(buf), 'the fork')

  shown('ConvoShow demo', 'demo', 7)
  vim.fn.cursor(vim.fn.search([[^OK\.$]], 'nw'), 1)
  buf = shown('ConvoFork! demo-early', 'demo-early', 0)
  want = vim.list_slice(demo_lines('revision 0 · 6 messages · forked from demo · cwd /src'), 1, 22)
  want[1] = '# demo-early — Editions'
  lines(want, H.buf_lines(buf), 'the fork up to "OK."')
end)

test(':ConvoTrim keeps the last turns of the session shown', function()
  local buf = shown('ConvoShow demo-fork', 'demo-fork', 0)
  local seen = H.notifications(function()
    vim.cmd('ConvoTrim 1')
    wait_for(function()
      return vim.b[buf].convo_revision == 1
    end, 'the trimmed transcript')
  end)
  eq({ { 'convo: removed 6 messages', vim.log.levels.INFO } }, seen, 'what it told')
  lines({
    '# demo-fork — Editions',
    'revision 1 · 2 messages · forked from demo · cwd /src',
    '',
    '## System',
    'You are terse.',
    '',
    '## User',
    'List the files.',
    '',
    '## Assistant',
    '▸ ls {} (call_3) [pending]',
    '  ' .. CANCELLED,
  }, H.buf_lines(buf), 'the trimmed transcript')
end)

test('errors are told through vim.notify', function()
  local seen = H.notifications(function(seen)
    vim.cmd('ConvoShow nope')
    wait_for(function()
      return #seen > 0
    end, 'the error')
  end)
  eq({ { 'convo: session not found: nope', vim.log.levels.ERROR } }, seen, ':ConvoShow of no session')
  wait_for(function()
    return vim.fn.bufexists('convo://session/nope') == 0
  end, 'the buffer of no session to go')
  seen = H.notifications(function(seen)
    vim.cmd('ConvoTrim many')
    vim.cmd('ConvoExport demo xml')
    vim.cmd('enew')
    vim.cmd('ConvoFork')
  end)
  eq({
    { 'convo: trim takes a number of turns to keep, got "many"', vim.log.levels.ERROR },
    { 'convo: unknown format "xml": use one of openai_chat, anthropic_messages, gemini_contents', vim.log.levels.ERROR },
    { 'convo: no session here: give a session id, or run this in a :ConvoShow buffer', vim.log.levels.ERROR },
  }, seen, 'bad arguments')
  -- A trim against a revision that is no longer the session's: 1003, nothing trimmed. The
  -- change is sent just before, with no chance for the buffer to hear of it.
  local buf = shown('ConvoShow demo-early', 'demo-early', 0)
  seen = H.notifications(function(seen)
    client():notify('session/add_user', { session_id = 'demo-early', text = 'meanwhile' })
    vim.cmd('ConvoTrim 0')
    wait_for(function()
      return #seen > 0
    end, 'the conflict')
  end)
  eq({ { 'convo: revision conflict: expected 0, current 1', vim.log.levels.ERROR } }, seen, 'a stale trim is refused')
  eq(7, call('session/get', { session_id = 'demo-early' }).message_count, 'nothing was trimmed')
  wait_for(function()
    return vim.b[buf].convo_revision == 1
  end, 'the transcript to catch up')
end)

test('an open transcript follows changes made by another convo process', function()
  local buf = shown('ConvoShow demo', 'demo', 7)
  local frame = vim.json.encode({
    jsonrpc = '2.0',
    id = 1,
    method = 'session/add_user',
    params = { session_id = 'demo', text = 'Also this.' },
  })
  local out = vim.fn.system({ binary, '--store', store }, frame .. '\n')
  eq(0, vim.v.shell_error, 'the other process ran: ' .. out)
  H.truthy(out:find('"revision":8', 1, true), 'it appended: ' .. out)
  wait_for(function()
    return vim.b[buf].convo_revision == 8
  end, 'the refresh after session/changed')
  local want = demo_lines('revision 8 · 10 messages · cwd /src')
  want[28] = '▸ ls {} (call_3) [cancelled]'
  vim.list_extend(want, { '', '## User', 'Also this.' })
  lines(want, H.buf_lines(buf), 'the transcript after the change')
  eq({ 28, 29 }, { vim.fn.foldclosed(28), vim.fn.foldclosedend(28) }, 'call_3 is still folded with its result')
end)

test('a transcript marks partial answers, streams, images and unanswered calls', function()
  local render = require('convo.render')
  local info = { session_id = 's', title = vim.NIL, system = vim.NIL, cwd = vim.NIL, forked_from = vim.NIL }
  local history = {
    revision = 4,
    repaired = 0,
    messages = {
      { id = 'm1', role = 'user', content = { { type = 'text', text = 'look' }, { type = 'image_url', image_url = {} } }, name = 'ana', images = { 'iVBORw0KGgo=' } },
      { id = 'm2', role = 'assistant', content = 'It is', metadata = { partial = true, reason = 'cancelled' } },
      { id = 'm3', role = 'assistant', content = vim.NIL, tool_calls = { { id = 'c', name = 'f', arguments = vim.empty_dict() } } },
    },
  }
  local draft = { stream_id = 'x', messages = { { role = 'user', content = 'go on' }, { role = 'assistant', content = 'Work' } } }
  local got, folds, ids = render.transcript(info, history, draft)
  lines({
    '# s',
    'revision 4 · 3 messages',
    '',
    '## User (ana)',
    'look',
    '[image]',
    '[image]',
    '',
    '## Assistant [partial: cancelled]',
    'It is',
    '',
    '## Assistant',
    '▸ f {} (c) [no result]',
    '',
    '## User [streaming]',
    'go on',
    '',
    '## Assistant [streaming]',
    'Work',
  }, got, 'the lines')
  eq('>1', folds[13], 'a call opens a fold')
  eq({ 'm1', 'm2', 'm3', false }, { ids[5], ids[10], ids[13], ids[16] }, 'the message on each line')
  local text = render.json({ b = vim.empty_dict(), a = {}, content = 'x/y', role = 'user' })
  eq('{"role":"user","content":"x/y","a":[],"b":{}}', text, 'JSON text: well-known members first, then by name')
end)

test(':checkhealth convo reports OK', function()
  vim.cmd('checkhealth convo')
  local report = H.buf_lines()
  local text = table.concat(report, '\n')
  for _, l in ipairs(report) do
    H.truthy(not l:find('ERROR') and not l:find('WARN'), 'a problem reported: ' .. l .. '\n' .. text)
  end
  local want = {
    'binary: ' .. vim.pesc(binary) .. ' %(from setup%)',
    'version: convo %d+%.%d+%.%d+',
    'store: sqlite %(%-%-store ' .. vim.pesc(store) .. '%)',
    'protocol_version: 1',
    'the store answers: session/list',
  }
  for _, pattern in ipairs(want) do
    local found = false
    for _, l in ipairs(report) do
      found = found or (l:find('OK') and l:find(pattern)) ~= nil
    end
    H.truthy(found, 'no OK line matching ' .. pattern .. ' in:\n' .. text)
  end
end)

test(':checkhealth convo reports a missing binary as an error', function()
  convo.setup({ cmd = '/nonexistent/convo', store = store })
  vim.cmd('checkhealth convo')
  local text = table.concat(H.buf_lines(), '\n')
  convo.setup({ cmd = binary, store = store })
  H.truthy(text:find('ERROR', 1, true) and text:find('/nonexistent/convo from setup is not an executable', 1, true), text)
end)

H.run('convo.nvim', function()
  convo.client():stop()
end)
