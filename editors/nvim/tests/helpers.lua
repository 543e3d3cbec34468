-- Shared by the Lua tests of wright.nvim. Each test runs in a fresh headless Neovim
-- (`nvim --headless -u NONE -i NONE -n -l <test>.lua`), started by tests/tests/nvim.rs, which
-- passes the plugin, the wright binary and a copy of the example workspace in the environment
-- and plays the model with its scripted provider. A test exits 0 when it passes, 1 with a
-- message on stderr when it fails, and every wait is bounded.

local H = {}

local function env(name)
  local value = os.getenv(name)
  if not value or value == '' then
    io.stderr:write('FAIL: $' .. name .. ' is not set (run these tests through `cargo test -p wright-tests --test nvim`)\n')
    os.exit(1)
  end
  return value
end

H.plugin = env('WRIGHT_NVIM_PLUGIN')
H.bin = env('WRIGHT_BIN')
H.workspace = env('WRIGHT_TEST_WORKSPACE')
H.timeout = 20000

vim.opt.runtimepath:prepend(H.plugin)
vim.cmd('runtime plugin/wright.lua')
vim.cmd('filetype on')
vim.o.swapfile = false

--- Notifications the plugin showed, in order: { message, level }.
H.notifications = {}
vim.notify = function(message, level)
  table.insert(H.notifications, { message = message, level = level })
end

function H.fail(message)
  io.stderr:write('FAIL: ' .. message .. '\n')
  io.stderr:write('notifications:\n')
  for _, n in ipairs(H.notifications) do
    io.stderr:write(string.format('  [%s] %s\n', tostring(n.level), n.message))
  end
  os.exit(1)
end

--- Waits until `condition()` holds, failing with `what` after `ms` (default H.timeout).
function H.wait(what, condition, ms)
  if not vim.wait(ms or H.timeout, condition, 20) then
    H.fail('timed out waiting for ' .. what)
  end
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    H.fail(string.format('%s: expected %s, got %s', what, vim.inspect(expected), vim.inspect(actual)))
  end
end

function H.truthy(value, what)
  if not value then
    H.fail(what)
  end
end

function H.setup(opts)
  require('wright').setup(vim.tbl_extend('force', { cmd = { H.bin, 'lsp' } }, opts or {}))
end

--- Opens `relative` (in the workspace) and waits until wright is attached to it; the buffer
--- and the client.
function H.open(relative)
  vim.cmd.edit(vim.fn.fnameescape(H.workspace .. '/' .. relative))
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  H.wait('the wright client to attach to ' .. relative, function()
    client = vim.lsp.get_clients({ name = 'wright', bufnr = bufnr })[1]
    return client ~= nil and client.initialized
  end)
  return bufnr, client
end

function H.text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, true), '\n') .. '\n'
end

function H.read_file(relative)
  local file = assert(io.open(H.workspace .. '/' .. relative, 'rb'))
  local text = file:read('*a')
  file:close()
  return text
end

--- Waits for the current session to end; its record in the plugin.
function H.finished()
  local ui = require('wright.ui')
  H.wait('a session to start', function()
    return ui.current ~= nil
  end)
  local session = ui.sessions[ui.current]
  H.wait('session ' .. ui.current .. ' to finish', function()
    return session.status ~= 'running'
  end)
  return session
end

--- Runs `body`, then exits 0; any error fails the test with its traceback.
function H.run(body)
  local ok, err = xpcall(body, debug.traceback)
  if not ok then
    H.fail(tostring(err))
  end
  for _, client in ipairs(vim.lsp.get_clients({ name = 'wright' })) do
    client:stop()
  end
  vim.wait(2000, function()
    return #vim.lsp.get_clients({ name = 'wright' }) == 0
  end, 20)
  io.stdout:write('ok\n')
  os.exit(0)
end

return H
