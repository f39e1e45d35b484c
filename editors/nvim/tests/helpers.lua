-- A small test runner for `nvim --headless`: named tests run in order, each failure is
-- printed with its reason, and Neovim exits with code 1 when any failed.

local H = {}

local tests = {}

function H.test(name, fn)
  table.insert(tests, { name = name, fn = fn })
end

local function show(v)
  if type(v) == 'string' then
    return string.format('%q', v)
  end
  return vim.inspect(v)
end

function H.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(string.format('%s:\n  want %s\n  got  %s', what or 'values differ', show(want), show(got)), 2)
  end
end

function H.truthy(v, what)
  if not v then
    error(what or 'expected a true value', 2)
  end
  return v
end

--- Lines that differ, for a readable failure when a buffer is not what it should be.
function H.lines(want, got, what)
  if vim.deep_equal(want, got) then
    return
  end
  local out = { (what or 'lines differ') .. ':' }
  for i = 1, math.max(#want, #got) do
    local mark = want[i] == got[i] and '  ' or '!!'
    table.insert(out, string.format('%s %3d want %s', mark, i, show(want[i])))
    if want[i] ~= got[i] then
      table.insert(out, string.format('%s     got  %s', mark, show(got[i])))
    end
  end
  error(table.concat(out, '\n'), 2)
end

--- Waits (running the event loop) until `cond()` is true; fails naming `what` after `ms`
--- (30 s unless given: a deadline, not a measurement; CI runs this beside other suites on
--- two busy cores).
function H.wait_for(cond, what, ms)
  if not vim.wait(ms or 30000, cond, 10) then
    error('timed out waiting for ' .. what, 2)
  end
end

function H.buf_lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

--- Every vim.notify call while `fn` runs, as { {msg, level}, … }.
function H.notifications(fn)
  local seen = {}
  local original = vim.notify
  vim.notify = function(msg, level)
    table.insert(seen, { msg, level })
  end
  local ok, e = pcall(fn, seen)
  vim.notify = original
  if not ok then
    error(e, 0)
  end
  return seen
end

--- Runs every test, prints a line per test, runs `cleanup`, and exits Neovim (code 1 on
--- any failure).
function H.run(suite, cleanup)
  local failed = 0
  for _, t in ipairs(tests) do
    local ok, e = xpcall(t.fn, debug.traceback)
    if ok then
      io.stdout:write('ok - ' .. t.name .. '\n')
    else
      failed = failed + 1
      io.stdout:write('not ok - ' .. t.name .. '\n' .. tostring(e):gsub('\n', '\n    ') .. '\n')
    end
  end
  io.stdout:write(string.format('%s: %d passed, %d failed\n', suite, #tests - failed, failed))
  io.stdout:flush()
  if cleanup then
    pcall(cleanup)
  end
  if failed > 0 then
    vim.cmd('1cquit')
  else
    vim.cmd('qall!')
  end
end

return H
