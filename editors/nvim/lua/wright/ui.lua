-- wright.nvim: what the user sees of a session: a small floating window with the session's
-- progress, a statusline component, a log buffer of the agent's events, and notifications.

local M = {}

--- Sessions this Neovim started or heard of, by id:
--- { id, task, status, step, activity, text, proposals = { [path] = { before, after } }, outcome }.
M.sessions = {}
--- The id of the session the commands act on by default (the last one started).
M.current = nil
--- Indexing and other `$/progress` from the server, by token: the last message.
M.progress = {}

local float = { win = nil, buf = nil, timer = nil }
local log_buf = nil
local options = { float = true, linger_ms = 4000 }

function M.configure(opts)
  options = vim.tbl_extend('force', options, opts or {})
end

function M.notify(message, level)
  vim.notify('wright: ' .. message, level or vim.log.levels.INFO, { title = 'wright' })
end

--- The session `id`, created on first sight.
function M.session(id)
  local session = M.sessions[id]
  if not session then
    session = { id = id, status = 'running', step = 0, activity = '', text = '', proposals = {} }
    M.sessions[id] = session
  end
  return session
end

local function short(text, width)
  text = (text or ''):gsub('\n.*', '')
  if vim.fn.strchars(text) > width then
    return vim.fn.strcharpart(text, 0, width - 1) .. '…'
  end
  return text
end

--- The activity an event shows, if any.
local function activity(event)
  if event.kind == 'stepStarted' then
    return string.format('step %d: thinking', event.step)
  elseif event.kind == 'toolCall' then
    local ok, args = pcall(vim.json.decode, event.arguments or '')
    local target = ok and type(args) == 'table' and (args.path or args.pattern or args.query or args.name or args.command)
    return target and string.format('%s %s', event.name, short(target, 40)) or event.name
  elseif event.kind == 'filesChanged' then
    return 'changed ' .. table.concat(event.paths or {}, ', ')
  elseif event.kind == 'editProposed' then
    return 'proposed an edit to ' .. event.path
  elseif event.kind == 'error' then
    return 'error: ' .. short(event.message, 60)
  end
end

local function log_lines(session, event)
  local kind = event.kind
  if kind == 'textDelta' then
    return nil
  elseif kind == 'toolCall' then
    return { string.format('[%s] %s %s', session.id, event.name, short(event.arguments, 100)) }
  elseif kind == 'toolResult' then
    local first = short(event.output, 100)
    return { string.format('[%s]   -> %s%s', session.id, event.isError and 'error: ' or '', first) }
  elseif kind == 'stepStarted' then
    return { string.format('[%s] step %d', session.id, event.step) }
  elseif kind == 'stepRetried' then
    return { string.format('[%s] step %d: the answer was cut (%s); asking again', session.id, event.step, event.reason or '') }
  elseif kind == 'model' then
    return { string.format('[%s] model %s (%s)', session.id, event.model, event.reason or '') }
  elseif kind == 'turn' then
    return { string.format('[%s] turn %d: %s', session.id, event.turn, short(event.message, 100)) }
  elseif kind == 'finished' then
    local outcome = event.outcome or {}
    local lines = { string.format('[%s] %s after %d steps', session.id, outcome.status, outcome.steps or 0) }
    for _, line in ipairs(vim.split(outcome.message or '', '\n')) do
      table.insert(lines, '  ' .. line)
    end
    return lines
  elseif kind == 'error' or kind == 'filesChanged' or kind == 'editProposed' then
    return { string.format('[%s] %s', session.id, activity(event)) }
  end
end

--- The log buffer (`:WrightLog`), created on first use.
function M.log_buffer()
  if not (log_buf and vim.api.nvim_buf_is_valid(log_buf)) then
    log_buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(log_buf, 'wright://log')
    vim.bo[log_buf].bufhidden = 'hide'
    vim.bo[log_buf].filetype = 'wrightlog'
  end
  return log_buf
end

local function append_log(lines)
  local buf = M.log_buffer()
  local count = vim.api.nvim_buf_line_count(buf)
  local empty = count == 1 and vim.api.nvim_buf_get_lines(buf, 0, 1, true)[1] == ''
  vim.api.nvim_buf_set_lines(buf, empty and 0 or count, -1, true, lines)
end

local function close_float()
  if float.win and vim.api.nvim_win_is_valid(float.win) then
    vim.api.nvim_win_close(float.win, true)
  end
  float.win = nil
end

--- Shows `lines` in the progress window (bottom right, not focusable).
local function show_float(lines)
  if not options.float then
    return
  end
  if not (float.buf and vim.api.nvim_buf_is_valid(float.buf)) then
    float.buf = vim.api.nvim_create_buf(false, true)
  end
  vim.api.nvim_buf_set_lines(float.buf, 0, -1, true, lines)
  local width = 10
  for _, line in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(line))
  end
  width = math.min(width, math.max(10, vim.o.columns - 4))
  local config = {
    relative = 'editor',
    anchor = 'SE',
    row = math.max(1, vim.o.lines - vim.o.cmdheight - 1),
    col = vim.o.columns,
    width = width,
    height = #lines,
    style = 'minimal',
    border = 'rounded',
    focusable = false,
    noautocmd = true,
    zindex = 45,
  }
  if float.win and vim.api.nvim_win_is_valid(float.win) then
    config.noautocmd = nil
    vim.api.nvim_win_set_config(float.win, config)
  else
    float.win = vim.api.nvim_open_win(float.buf, false, config)
  end
end

--- Whether the progress window is showing (for tests and statusline plugins).
function M.float_visible()
  return float.win ~= nil and vim.api.nvim_win_is_valid(float.win)
end

local function cancel_linger()
  if float.timer then
    pcall(function()
      float.timer:stop()
      float.timer:close()
    end)
    float.timer = nil
  end
end

--- Redraws the progress window: running sessions and server progress; once nothing runs, the
--- current session's end for `linger_ms`, then nothing.
local function refresh()
  local lines = {}
  for _, session in pairs(M.sessions) do
    if session.status == 'running' then
      table.insert(lines, string.format('wright %s  %s', session.id, short(session.activity, 60)))
    end
  end
  for _, message in pairs(M.progress) do
    table.insert(lines, 'wright ' .. message)
  end
  local last = M.current and M.sessions[M.current]
  if #lines > 0 then
    cancel_linger()
    show_float(lines)
  elseif last and last.status ~= 'running' and not last.end_shown then
    last.end_shown = true
    cancel_linger()
    show_float({ string.format('wright %s  %s', last.id, last.status) })
    float.timer = vim.uv.new_timer()
    float.timer:start(options.linger_ms, 0, vim.schedule_wrap(function()
      cancel_linger()
      close_float()
    end))
  elseif not float.timer then
    close_float()
  end
  vim.cmd('redrawstatus')
end

--- Makes `id` the session the commands act on by default. Its events may have come before
--- the answer to `wright/agentRun` did.
function M.set_current(id)
  M.current = id
  refresh()
end

--- A statusline component: "wright: step 2: edit src/lib.rs", "wright: done", "" when idle.
function M.statusline()
  local session = M.current and M.sessions[M.current]
  if not session then
    for _, message in pairs(M.progress) do
      return 'wright: ' .. message
    end
    return ''
  end
  if session.status == 'running' then
    return 'wright: ' .. short(session.activity ~= '' and session.activity or 'starting', 40)
  end
  return 'wright: ' .. session.status
end

--- A `wright/agentEvent` notification.
function M.on_event(params)
  local session = M.session(params.sessionId)
  local event = params
  if event.kind == 'textDelta' then
    session.text = session.text .. (event.text or '')
  elseif event.kind == 'stepStarted' then
    session.step = event.step
    session.text = ''
  elseif event.kind == 'stepRetried' then
    -- The partial answer of this step is void: it streams again from the start.
    session.text = ''
  elseif event.kind == 'editProposed' then
    session.proposals[event.path] = { before = event.before, after = event.after, hunks = event.hunks or {} }
  elseif event.kind == 'turn' then
    session.status = 'running'
  elseif event.kind == 'title' then
    session.title = event.title
  elseif event.kind == 'finished' then
    local outcome = event.outcome or {}
    session.status = outcome.status or 'done'
    session.outcome = outcome
    session.finished_turn = event.turn
    session.end_shown = false
    local level = outcome.status == 'failed' and vim.log.levels.ERROR or vim.log.levels.INFO
    local message = outcome.message and outcome.message ~= '' and outcome.message or outcome.reason or ''
    local files = outcome.filesChanged and #outcome.filesChanged > 0
      and ('; files: ' .. table.concat(outcome.filesChanged, ', ')) or ''
    local review = next(session.proposals) and '; review with :WrightReview, then :WrightAccept or :WrightReject' or ''
    M.notify(string.format('%s %s%s%s\n%s', session.id, session.status, files, review, message), level)
  end
  local seen = activity(event)
  if seen then
    session.activity = seen
  end
  local lines = log_lines(session, event)
  if lines then
    append_log(lines)
  end
  require('wright.chat').on_event(params)
  if event.kind == 'editProposed' then
    require('wright.review').on_proposal(params.sessionId, event.path)
  end
  refresh()
end

--- The `LspProgress` autocommand for wright's `$/progress` (indexing; sessions come as events).
function M.on_progress(params)
  local value = params.value or {}
  local token = tostring(params.token)
  if tostring(token):match('^wright/agent/') then
    return
  end
  if value.kind == 'end' then
    M.progress[token] = nil
  else
    local text = value.title or M.progress[token] or ''
    if value.message then
      text = (value.title or 'Indexing') .. ': ' .. value.message
    end
    M.progress[token] = text
  end
  refresh()
end

--- Called by the strict applyEdit handler when it refuses an edit.
function M.edit_refused(reason)
  M.notify('edit refused, the agent will retry: ' .. reason, vim.log.levels.WARN)
  append_log({ 'edit refused: ' .. reason })
end

return M
