-- Neovim's own LSP client, without wright.nvim: the server started with `vim.lsp.start`, as
-- users do who configure servers by hand (`vim.lsp.config` / `vim.lsp.enable`). The user types
-- a line inside Neovim's `workspace/applyEdit` handler, just before it applies the agent's
-- edit (computed against the text before the keystroke). Neovim's handler must skip it ("newer
-- than edits": the edit is versioned, at a version Neovim checks), the model hears the edit did
-- not apply and redoes it, and the buffer ends with the user's line and the agent's edit once.
-- Run by tests/tests/nvim.rs, which plays the model: the edit, the same edit a second later,
-- then "Done.". Exits 0 and prints "ok" when it passes.

local function env(name)
  local value = os.getenv(name)
  if not value or value == '' then
    io.stderr:write('FAIL: $' .. name .. ' is not set (run this through tests/tests/nvim.rs)\n')
    os.exit(1)
  end
  return value
end

local bin = env('WRIGHT_BIN')
local workspace = env('WRIGHT_TEST_WORKSPACE')
vim.o.swapfile = false

local messages = {}
vim.notify = function(message, level)
  table.insert(messages, { message = message, level = level })
end

-- Neovim's handler says "Buffer … newer than edits." with print when it skips a stale edit.
local printed = {}
_G.print = function(...)
  table.insert(printed, table.concat(vim.tbl_map(tostring, { ... }), ' '))
end

local function fail(message)
  io.stderr:write('FAIL: ' .. message .. '\n')
  for _, m in ipairs(messages) do
    io.stderr:write(string.format('  [%s] %s\n', tostring(m.level), m.message))
  end
  os.exit(1)
end

local function wait(what, condition)
  if not vim.wait(20000, condition, 20) then
    fail('timed out waiting for ' .. what)
  end
end

local function eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    fail(string.format('%s: expected %s, got %s', what, vim.inspect(expected), vim.inspect(actual)))
  end
end

local function text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, true), '\n') .. '\n'
end

local typed = '// typed while the agent worked'
local edits, answers = {}, {}
local builtin = vim.lsp.handlers['workspace/applyEdit']
vim.lsp.handlers['workspace/applyEdit'] = function(err, params, ctx)
  table.insert(edits, vim.deepcopy(params.edit))
  if #edits == 1 then
    -- The keystroke lands between the server computing the edit and Neovim applying it.
    local bufnr = vim.fn.bufnr(workspace .. '/src/lib.rs')
    vim.api.nvim_buf_set_lines(bufnr, 0, 0, true, { typed })
  end
  local answer = builtin(err, params, ctx)
  table.insert(answers, answer)
  return answer
end
local events = {}
vim.lsp.handlers['wright/agentEvent'] = function(_, params)
  table.insert(events, params)
end

local ok, err = xpcall(function()
  vim.cmd.edit(vim.fn.fnameescape(workspace .. '/src/lib.rs'))
  local bufnr = vim.api.nvim_get_current_buf()
  local original = text(bufnr)
  local id = vim.lsp.start({ name = 'wright', cmd = { bin, 'lsp' }, root_dir = workspace })
  local client
  wait('the client to initialize', function()
    client = vim.lsp.get_client_by_id(id)
    return client ~= nil and client.initialized and vim.lsp.buf_is_attached(bufnr, id)
  end)

  local session
  client:request('wright/agentRun', {
    task = 'make add commutative',
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  }, function(request_err, result)
    if request_err then
      fail('wright/agentRun: ' .. vim.inspect(request_err))
    end
    session = result.sessionId
  end, bufnr)
  local outcome
  wait('the session to finish', function()
    for _, event in ipairs(events) do
      if session and event.sessionId == session and event.kind == 'finished' then
        outcome = event.outcome
        return true
      end
    end
    return false
  end)
  eq('done', outcome.status, 'the session outcome')

  eq(2, #edits, 'edits sent (the skipped one and its redo)')
  local skipped = vim.tbl_filter(function(line)
    return line:find('newer than edits', 1, true) ~= nil
  end, printed)
  eq(1, #skipped, "Neovim's own handler skipped the stale edit by its version: " .. vim.inspect(printed))
  for index, edit in ipairs(edits) do
    if edit.changes ~= nil or edit.documentChanges == nil or #edit.documentChanges ~= 1 then
      fail('edit ' .. index .. ' is not one versioned document: ' .. vim.inspect(edit))
    end
    local version = edit.documentChanges[1].textDocument.version
    if type(version) ~= 'number' or version < 1 then
      fail('edit ' .. index .. ' has a version Neovim does not check: ' .. vim.inspect(version))
    end
  end
  local expected = typed .. '\n' .. (original:gsub('    a %+ b\n', '    b + a\n'))
  eq(expected, text(bufnr), 'the buffer: the user line, and the agent edit once')
  if not vim.bo[bufnr].modified then
    fail('the buffer is saved; the edit should have stayed unsaved')
  end
  client:stop()
  wait('the client to stop', function()
    return vim.lsp.get_client_by_id(id) == nil
  end)
end, debug.traceback)
if not ok then
  fail(tostring(err))
end
io.stdout:write('ok\n')
os.exit(0)
