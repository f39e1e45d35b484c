-- `:checkhealth convo`: the binary, its version, the store and the protocol version, as
-- a running convo answers them.
--
-- The report functions moved: Neovim 0.7 has only `health#report_*` (Vimscript), 0.8 and
-- 0.9 `vim.health.report_*`, 0.10 `vim.health.start/ok/warn/error/info` (the report_*
-- names deprecated, later removed). `report` picks what this Neovim has.

local M = {}

--- The protocol version this plugin speaks.
M.PROTOCOL_VERSION = 1

local function reporter()
  local h = vim.health
  if type(h) == 'table' and type(h.start) == 'function' then
    return { start = h.start, ok = h.ok, warn = h.warn, error = h.error, info = h.info }
  end
  if type(h) == 'table' and type(h.report_start) == 'function' then
    return {
      start = h.report_start,
      ok = h.report_ok,
      warn = h.report_warn,
      error = h.report_error,
      info = h.report_info,
    }
  end
  local function vimscript(name)
    return function(...)
      vim.fn['health#report_' .. name](...)
    end
  end
  return {
    start = vimscript('start'),
    ok = vimscript('ok'),
    warn = vimscript('warn'),
    error = vimscript('error'),
    info = vimscript('info'),
  }
end

--- The first line convo writes on stderr when it cannot start with this store (it
--- reads an empty input and exits), or nil when it starts.
local function store_problem(cmd)
  local out = vim.fn.system(cmd, '')
  if vim.v.shell_error == 0 then
    return nil
  end
  return vim.trim(out)
end

function M.check()
  local report = reporter()
  local convo = require('convo')
  report.start('convo')

  if vim.fn.has('nvim-0.7.2') == 1 then
    report.ok('Neovim ' .. tostring(vim.version().major) .. '.' .. vim.version().minor .. '.' .. vim.version().patch)
  else
    report.error('Neovim 0.7.2 or newer is needed')
  end

  local path, source = convo.binary()
  if not path then
    report.error('convo binary not found: ' .. source, {
      "set cmd in require('convo').setup{}",
      'or set $CONVO_BINARY to its path',
      'or put convo on PATH',
    })
    return
  end
  report.ok(string.format('binary: %s (from %s)', path, source))

  local version = vim.trim(vim.fn.system({ path, '--version' }))
  if vim.v.shell_error ~= 0 then
    report.error('`' .. path .. ' --version` failed: ' .. version)
    return
  end
  report.ok('version: ' .. version)

  local cmd = convo.command()
  local client, err = convo.client()
  local info, init_err
  if client then
    info, init_err = client:request_sync('initialize', {}, 5000)
  end
  if not info then
    local why = err or init_err
    report.error('convo did not start: ' .. (why and why.message or 'no answer'), {
      store_problem(cmd) or 'run `' .. table.concat(cmd, ' ') .. ' --log-level debug` in a terminal to see why',
    })
    return
  end

  local configured = convo.config.store or vim.env.CONVO_STORE or 'sqlite (the default location)'
  report.ok(string.format('store: %s (--store %s)', info.capabilities.store, configured))
  if info.capabilities.store == 'memory' then
    report.info('sessions in the memory store are gone when Neovim exits')
  end

  if info.protocol_version == M.PROTOCOL_VERSION then
    report.ok('protocol_version: ' .. info.protocol_version)
  else
    report.error(
      string.format('protocol_version: %s, but this plugin speaks %d', tostring(info.protocol_version), M.PROTOCOL_VERSION),
      { 'update convo.nvim and convo to matching versions' }
    )
  end

  local list, list_err = client:request_sync('session/list', { limit = 1 }, 5000)
  if list then
    report.ok('the store answers: session/list')
  else
    report.error('session/list failed: ' .. list_err.message)
  end
end

return M
