-- wright.nvim: the wright language server and its coding agent in Neovim 0.10+.
--
-- `require('wright').setup{}` starts `wright lsp` for every file buffer under a workspace root
-- (found by `root_markers`); the `:Wright*` commands (plugin/wright.lua) drive the agent through
-- wright's LSP extensions (docs/protocol.md). Edits arrive as versioned `workspace/applyEdit`
-- requests, checked by a strict handler (wright/apply.lua).

local ui = require('wright.ui')

local M = {}

local defaults = {
  -- The server command; `wright` from PATH by default.
  cmd = { 'wright', 'lsp' },
  -- Extra environment for the server (e.g. { OPENAI_BASE_URL = 'http://localhost:11434/v1' }).
  cmd_env = nil,
  -- `PROVIDER/MODEL` or `auto`; nil leaves the choice to wright's configuration files and
  -- environment (WRIGHT_MODEL).
  model = nil,
  -- 'auto' applies the agent's edits as it goes; 'review' holds them for :WrightAccept.
  apply_mode = 'auto',
  -- A workspace root holds one of these; buffers outside any root get no server.
  root_markers = { '.git', '.wright' },
  -- Limit to these filetypes; nil attaches to every file buffer under a root.
  filetypes = nil,
  -- More configuration for the server, a layer above wright's config files (see the README):
  -- e.g. { agent = { approve_commands = 'git push*' } }.
  settings = nil,
  -- Progress window: shown while a session runs, closed `linger_ms` after it ends.
  progress = { float = true, linger_ms = 4000 },
  -- Start the server as buffers open.
  autostart = true,
  -- Global keymaps: none unless asked. `true` sets the ones below; a table sets those given
  -- (e.g. { run = '<leader>ar' }). `run` works in visual mode too (the selection as context).
  keymaps = false,
}

local default_keymaps = {
  run = '<leader>wr',
  cancel = '<leader>wc',
  undo = '<leader>wu',
  sessions = '<leader>ws',
  status = '<leader>wi',
}

local config = nil
local group = nil

--- The configuration in effect (the defaults before setup).
function M.config()
  return config or vim.deepcopy(defaults)
end

function M.is_setup()
  return config ~= nil
end

local has_011 = vim.fn.has('nvim-0.11') == 1

-- Neovim 0.11 made the client's methods colon calls; 0.10 has them as fields.
local function request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function get_clients(filter)
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

--- The wright client for `bufnr` (the current buffer by default), else any wright client.
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  return get_clients({ name = 'wright', bufnr = bufnr })[1] or get_clients({ name = 'wright' })[1]
end

local function init_options()
  local options = vim.deepcopy(config.settings or {})
  if config.model then
    options.model = config.model
  end
  return next(options) and options or nil
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.workspace = caps.workspace or {}
  caps.workspace.applyEdit = true
  -- No resource operations: the strict handler applies text edits only (checked all first,
  -- applied all or none), so wright creates, renames and deletes files on disk itself. An
  -- edit to a file no buffer shows arrives unversioned and is made in a buffer loaded for it.
  caps.workspace.workspaceEdit = vim.tbl_extend(
    'force',
    caps.workspace.workspaceEdit or {},
    { documentChanges = true, resourceOperations = {} }
  )
  caps.window = caps.window or {}
  caps.window.workDoneProgress = true
  -- wright asks for approvals with its own request only when the client declares it.
  -- It also shows wright/agentEvent itself: no outcome messages for command-started sessions.
  caps.experimental = vim.tbl_extend('force', caps.experimental or {}, {
    wrightRequestApproval = true,
    wrightAgentEvents = true,
  })
  return caps
end

local handlers = {
  ['workspace/applyEdit'] = function(...)
    return require('wright.apply').workspace_apply_edit(...)
  end,
  ['wright/agentEvent'] = function(_, params)
    ui.on_event(params)
  end,
  ['wright/requestApproval'] = function(...)
    return require('wright.approval').request_approval(...)
  end,
}

--- Starts (or reuses) the server for `bufnr`; the client id, or nil when the buffer is not a
--- file under a workspace root.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not config or vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
    return nil
  end
  if config.filetypes and not vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype) then
    return nil
  end
  local root = vim.fs.root(bufnr, config.root_markers)
  if not root then
    return nil
  end
  return vim.lsp.start({
    name = 'wright',
    cmd = config.cmd,
    cmd_env = config.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } },
    capabilities = capabilities(),
    init_options = init_options(),
    handlers = handlers,
  }, { bufnr = bufnr })
end

function M.setup(opts)
  config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  if type(config.cmd) == 'string' then
    config.cmd = { config.cmd, 'lsp' }
  end
  if config.apply_mode ~= 'auto' and config.apply_mode ~= 'review' then
    ui.notify(string.format('apply_mode %q is neither "auto" nor "review"; using "auto"', config.apply_mode), vim.log.levels.WARN)
    config.apply_mode = 'auto'
  end
  ui.configure(config.progress)
  local keymaps = config.keymaps == true and default_keymaps or config.keymaps
  if type(keymaps) == 'table' then
    local actions = {
      run = { { 'n', 'x' }, ':Wright ', 'wright: run the agent on a task' },
      cancel = { 'n', '<cmd>WrightCancel<cr>', 'wright: cancel the session' },
      undo = { 'n', '<cmd>WrightUndo<cr>', "wright: undo the last session's edits" },
      sessions = { 'n', '<cmd>WrightSessions<cr>', 'wright: sessions' },
      status = { 'n', '<cmd>WrightStatus<cr>', 'wright: status' },
    }
    for name, lhs in pairs(keymaps) do
      local action = actions[name]
      if not action then
        ui.notify(string.format('keymaps: unknown action %q (expected run, cancel, undo, sessions, status)', name), vim.log.levels.WARN)
      elseif lhs then
        vim.keymap.set(action[1], lhs, action[2], { desc = action[3] })
      end
    end
  end
  group = vim.api.nvim_create_augroup('wright', { clear = true })
  if config.autostart then
    vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'FileType' }, {
      group = group,
      callback = function(args)
        M.attach(args.buf)
      end,
    })
    for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(bufnr) then
        M.attach(bufnr)
      end
    end
  end
  vim.api.nvim_create_autocmd('LspProgress', {
    group = group,
    callback = function(args)
      local data = args.data or {}
      local client = data.client_id and vim.lsp.get_client_by_id(data.client_id)
      if client and client.name == 'wright' and data.params then
        ui.on_progress(data.params)
      end
    end,
  })
end

--- The client to talk to, or nil after telling the user why there is none.
local function need_client()
  if not config then
    ui.notify("not set up: call require('wright').setup{} in your config", vim.log.levels.ERROR)
    return nil
  end
  local client = M.client()
  if not client then
    ui.notify('no wright server for this buffer (is it a file under a .git or .wright root?)', vim.log.levels.ERROR)
  end
  return client
end

local function error_message(err)
  return type(err) == 'table' and (err.message or vim.inspect(err)) or tostring(err)
end

--- Sends `method` and calls `on_result(result)`, or reports the error.
local function call(client, method, params, on_result)
  request(client, method, params, function(err, result)
    if err then
      ui.notify(string.format('%s failed: %s', method, error_message(err)), vim.log.levels.ERROR)
      return
    end
    on_result(result)
  end, vim.api.nvim_get_current_buf())
end

--- The selection of a `:Wright` command as an LSP range, or nil without one.
local function command_range(opts, bufnr, client)
  if not opts or (opts.range or 0) == 0 then
    return nil
  end
  local encoding = client.offset_encoding or 'utf-16'
  local function position(row, col)
    -- row 1-based, col a 0-based byte index.
    local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ''
    col = math.min(col, #line)
    return { line = row - 1, character = vim.lsp.util.character_offset(bufnr, row - 1, col, encoding) }
  end
  local start_mark, end_mark = vim.api.nvim_buf_get_mark(bufnr, '<'), vim.api.nvim_buf_get_mark(bufnr, '>')
  if opts.range == 2 and vim.fn.visualmode() == 'v' and start_mark[1] == opts.line1 and end_mark[1] == opts.line2 then
    -- A characterwise selection: exactly the selected characters ('>' is on the last one).
    local last = vim.api.nvim_buf_get_lines(bufnr, end_mark[1] - 1, end_mark[1], false)[1] or ''
    -- The end is exclusive: past the whole (possibly multibyte) last character.
    local after = math.min(end_mark[2], #last)
    after = after + #vim.fn.strpart(last, after, 1, true)
    return { start = position(start_mark[1], start_mark[2]), ['end'] = position(end_mark[1], after) }
  end
  -- Whole lines.
  local last_line = vim.api.nvim_buf_get_lines(bufnr, opts.line2 - 1, opts.line2, false)[1] or ''
  return { start = position(opts.line1, 0), ['end'] = position(opts.line2, #last_line) }
end

local function review_target(session_id)
  session_id = session_id or ui.current
  if not session_id then
    ui.notify('no session to review', vim.log.levels.WARN)
  end
  return session_id
end

--- Starts a session on `task` (the current buffer and the range as context).
function M.run(task, opts)
  local client = need_client()
  if not client then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local range = command_range(opts, bufnr, client)
  local function start(text)
    if not text or vim.trim(text) == '' then
      return
    end
    local params = {
      task = text,
      textDocument = vim.bo[bufnr].buftype == '' and { uri = vim.uri_from_bufnr(bufnr) } or nil,
      range = range,
      applyMode = (opts and opts.apply_mode) or config.apply_mode,
      model = opts and opts.model or nil,
      mode = opts and opts.mode or nil,
    }
    call(client, 'wright/agentRun', params, function(result)
      ui.session(result.sessionId).task = text
      ui.set_current(result.sessionId)
      ui.notify(string.format('%s started: %s', result.sessionId, text))
      if opts and opts.on_started then
        opts.on_started(result.sessionId)
      end
    end)
  end
  if task and vim.trim(task) ~= '' then
    start(task)
  else
    vim.ui.input({ prompt = 'Wright task: ' }, start)
  end
end

--- The user's next message to a session (`opts.session`, else the chat's or the current one):
--- it steers the running turn, or starts the next (`wright/agentPrompt`). `opts.mode` and
--- `opts.model` apply from this turn on.
function M.prompt(message, opts)
  opts = opts or {}
  local client = need_client()
  local session_id = opts.session or require('wright.chat').session_of() or ui.current
  if not client then
    return
  end
  if not session_id then
    ui.notify('no session to continue: start one with :Wright <task>', vim.log.levels.WARN)
    return
  end
  if not message or vim.trim(message) == '' then
    return
  end
  local params = { sessionId = session_id, message = message, mode = opts.mode, model = opts.model }
  call(client, 'wright/agentPrompt', params, function(result)
    local session = ui.session(result.sessionId)
    session.status = 'running'
    ui.set_current(result.sessionId)
  end)
end

--- Sets the current session's mode (`code`, `plan`) from its next step on.
function M.configure(settings, session_id)
  local client = need_client()
  session_id = session_id or require('wright.chat').session_of() or ui.current
  if not client or not session_id then
    return
  end
  local params = vim.tbl_extend('force', { sessionId = session_id }, settings)
  call(client, 'wright/sessionConfigure', params, function()
    ui.notify(string.format('%s: %s', session_id, vim.inspect(settings, { newline = ' ', indent = '' })))
  end)
end

--- `:Wright [plan|code] [task]`: without a task or a range, opens the chat (`plan`/`code` alone
--- switch the current session's mode); with a task (or a range, which asks for it), starts a
--- session on it.
function M.command(args, opts)
  local words = vim.split(vim.trim(args or ''), '%s+', { trimempty = true })
  local mode = (words[1] == 'plan' or words[1] == 'code') and table.remove(words, 1) or nil
  local task = table.concat(words, ' ')
  if task == '' and mode then
    require('wright.chat').set_mode(mode)
    if ui.current then
      M.configure({ mode = mode })
    end
    return
  end
  -- A range with no task asks for the task (the selection goes with it).
  if task == '' and (not opts or (opts.range or 0) == 0) then
    M.chat(nil, mode)
    return
  end
  M.run(task, vim.tbl_extend('force', opts or {}, { mode = mode }))
end

--- Opens the chat of `session_id` (the current session; a new chat when there is none).
function M.chat(session_id, mode)
  if not need_client() then
    return
  end
  return require('wright.chat').open(session_id or ui.current, mode)
end

--- Accepts or rejects the hunks `ids` of a review session; `on_done` after the answer.
function M.hunks_decision(accept, session_id, ids, on_done)
  local client = need_client()
  if not client then
    return
  end
  local method = accept and 'wright/editsAccept' or 'wright/editsReject'
  call(client, method, { sessionId = session_id, hunks = ids }, function(result)
    if on_done then
      on_done(result)
    end
  end)
end

--- Opens each proposal of a review session in diff mode, per hunk (see wright/review.lua).
function M.review_hunks(session_id)
  session_id = review_target(session_id)
  if not session_id then
    return
  end
  local views, paths = require('wright.review').open_all(session_id)
  if #paths == 0 then
    ui.notify(session_id .. ' holds no proposed edits')
  end
  return views, paths
end

--- Cancels `session_id` (by default the current session, else every running one).
function M.cancel(session_id)
  local client = need_client()
  if not client then
    return
  end
  session_id = session_id or ui.current
  local function done(result)
    ui.notify(result.cancelled and 'cancelled' or 'nothing was running')
  end
  if session_id then
    call(client, 'wright/agentCancel', { sessionId = session_id }, done)
  else
    call(client, 'workspace/executeCommand', { command = 'wright.agent.cancel', arguments = {} }, done)
  end
end

--- Takes back the edits of `session_id` (the last session by default).
function M.undo(session_id, checkpoint)
  local client = need_client()
  if not client then
    return
  end
  call(client, 'wright/undo', { sessionId = session_id, checkpoint = checkpoint }, function(result)
    local files = #result.files > 0 and table.concat(result.files, ', ') or 'nothing to restore'
    ui.notify(string.format('undid %s: %s', result.sessionId, files))
  end)
end

--- Applies (accept) or drops the edits a review session holds.
function M.review_decision(accept, session_id)
  local client = need_client()
  session_id = review_target(session_id)
  if not client or not session_id then
    return
  end
  local method = accept and 'wright/editsAccept' or 'wright/editsReject'
  call(client, method, { sessionId = session_id }, function(result)
    ui.session(session_id).proposals = {}
    local files = #result.files > 0 and table.concat(result.files, ', ') or 'no files'
    ui.notify(string.format('%s %s: %s', accept and 'accepted' or 'rejected', result.sessionId, files))
  end)
end

--- Shows the edits a review session proposes, as a unified diff in a scratch buffer.
function M.review(session_id)
  session_id = review_target(session_id)
  if not session_id then
    return
  end
  local session = ui.session(session_id)
  local diff = vim.text and vim.text.diff or vim.diff
  local lines = {}
  local paths = vim.tbl_keys(session.proposals)
  table.sort(paths)
  for _, path in ipairs(paths) do
    local proposal = session.proposals[path]
    local before = proposal.before ~= vim.NIL and proposal.before or ''
    local after = proposal.after ~= vim.NIL and proposal.after or ''
    vim.list_extend(lines, { 'diff --wright a/' .. path .. ' b/' .. path, '--- a/' .. path, '+++ b/' .. path })
    vim.list_extend(lines, vim.split(diff(before, after, { ctxlen = 3 }), '\n', { trimempty = true }))
  end
  if #lines == 0 then
    ui.notify(session_id .. ' holds no proposed edits')
    return
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, true, lines)
  vim.bo[buf].filetype = 'diff'
  vim.bo[buf].modifiable = false
  vim.cmd('botright split')
  vim.api.nvim_win_set_buf(0, buf)
  return buf
end

local resumable = { interrupted = true, failed = true, cancelled = true }

--- Lists the sessions; the chosen one can be resumed, undone or cancelled.
function M.sessions()
  local client = need_client()
  if not client then
    return
  end
  call(client, 'wright/sessions', nil, function(result)
    local sessions = result.sessions or {}
    if #sessions == 0 then
      ui.notify('no sessions yet')
      return
    end
    vim.ui.select(sessions, {
      prompt = 'wright sessions',
      kind = 'wright_session',
      format_item = function(s)
        local files = #s.filesChanged > 0 and (' · ' .. table.concat(s.filesChanged, ', ')) or ''
        return string.format('%s [%s] %s (%d steps%s)', s.sessionId, s.status, s.task, s.steps, files)
      end,
    }, function(chosen)
      if not chosen then
        return
      end
      local actions = {}
      if resumable[chosen.status] then
        table.insert(actions, 'Resume')
      end
      if chosen.status == 'running' then
        table.insert(actions, 'Cancel')
      end
      if chosen.checkpoints > 0 and chosen.status ~= 'running' then
        table.insert(actions, 'Undo its edits')
      end
      table.insert(actions, 'Make current')
      vim.ui.select(actions, { prompt = chosen.sessionId .. ': ' .. chosen.task, kind = 'wright_session_action' }, function(action)
        if action == 'Resume' then
          -- A resumed session starts over as running (its events follow the answer or not).
          local session = ui.session(chosen.sessionId)
          session.status, session.task = 'running', chosen.task
          call(client, 'wright/agentRun', { task = chosen.task, sessionId = chosen.sessionId }, function(run)
            ui.set_current(run.sessionId)
            ui.notify(run.sessionId .. ' resumed')
          end)
        elseif action == 'Cancel' then
          M.cancel(chosen.sessionId)
        elseif action == 'Undo its edits' then
          M.undo(chosen.sessionId)
        elseif action == 'Make current' then
          local session = ui.session(chosen.sessionId)
          session.task = chosen.task
          if chosen.status ~= 'running' then
            session.status = chosen.status
          end
          ui.set_current(chosen.sessionId)
        end
      end)
    end)
  end)
end

--- What the server holds and how it is configured.
function M.status()
  local client = need_client()
  if not client then
    return
  end
  call(client, 'wright/status', nil, function(status)
    local lines = {
      string.format('%s %s, positions in %s', status.server.name, status.server.version, status.positionEncoding),
      'folders: ' .. table.concat(status.workspaceFolders or {}, ', '),
      string.format('open documents: %d', #(status.documents or {})),
    }
    for _, setting in ipairs(status.settings or {}) do
      if setting.key == 'model' then
        local value = setting.value ~= vim.NIL and setting.value or '(none: set model in setup or WRIGHT_MODEL)'
        local source = setting.source ~= vim.NIL and setting.source or 'unset'
        table.insert(lines, string.format('model: %s (%s)', value, source))
      end
    end
    for _, problem in ipairs(status.problems or {}) do
      table.insert(lines, 'problem: ' .. problem)
    end
    local session = ui.current and ui.sessions[ui.current]
    if session then
      table.insert(lines, string.format('current session: %s [%s] %s', session.id, session.status, session.activity))
    end
    table.insert(lines, 'apply mode: ' .. config.apply_mode)
    ui.notify(table.concat(lines, '\n'))
  end)
end

--- What happened to the agent's work (`wright/stats`): the last `days` days (30 by default),
--- in all and per model, from the journals on this machine.
function M.stats(days)
  local client = need_client()
  if not client then
    return
  end
  call(client, 'wright/stats', { sinceDays = days }, function(stats)
    local function row(name, c)
      local first = c.firstEditSecs ~= vim.NIL and c.firstEditSecs ~= nil and (c.firstEditSecs .. 's') or '-'
      return string.format(
        '%-24s sessions %d, turns %d; edits proposed %d, applied %d, rejected %d, undone %d, kept %d; commands %d (%d refused); %d tokens, $%.4f; first edit %s',
        name, c.sessions, c.turns, c.edits.proposed, c.edits.applied, c.edits.rejected, c.edits.undone, c.edits.kept,
        c.commands.run, c.commands.refused, c.usage.input + c.usage.output, c.costUsd, first)
    end
    local lines = { string.format('stats of the last %d days', stats.sinceDays) }
    local models = vim.tbl_keys(stats.models or {})
    table.sort(models)
    for _, model in ipairs(models) do
      table.insert(lines, row(model, stats.models[model]))
    end
    table.insert(lines, row('all', stats))
    ui.notify(table.concat(lines, '\n'))
  end)
end

--- Opens the log of the agent's events.
function M.log()
  vim.cmd('botright split')
  vim.api.nvim_win_set_buf(0, ui.log_buffer())
end

M.statusline = ui.statusline

return M
