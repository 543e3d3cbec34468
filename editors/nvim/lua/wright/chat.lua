-- wright.nvim: the chat buffer. `:Wright` opens a markdown buffer of the current session's
-- conversation: each turn's message, the answer as it streams, tool calls with their output
-- folded, proposals, each turn's end with its cost. A follow-up is typed below the prompt line
-- at the bottom and sent with <CR> in normal mode or <C-s> in insert mode: it steers the
-- running turn, or starts the next one (wright/agentPrompt). A chat with no session yet starts
-- one with its first message (wright/agentRun).
--
-- Every event of every session is kept as it arrives, so a chat opened late (or before the
-- session's id is known) renders the whole conversation.

local M = {}

--- The prompt line: everything typed below it is the next message.
M.PROMPT = '── your message (<CR> in normal mode or <C-s> in insert mode sends) ──'

--- Events by session id, in order.
local history = {}
--- Open chats by buffer: { session = id or nil, mode = 'code' | 'plan' | nil, state = what the
--- header shows, streaming = whether the last line is the answer's, step_row = where the
--- step's text began }.
local chats = {}

local function chat_of_session(id)
  for buf, chat in pairs(chats) do
    if chat.session == id and vim.api.nvim_buf_is_valid(buf) then
      return buf, chat
    end
  end
end

--- The row (0-based) of the prompt line: the last line that is exactly the prompt (put back
--- at the end when the user deleted it).
local function prompt_row(buf, _)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, true)
  for row = #lines, 1, -1 do
    if lines[row] == M.PROMPT then
      return row - 1
    end
  end
  vim.api.nvim_buf_set_lines(buf, -1, -1, true, { M.PROMPT, '' })
  return #lines
end

--- Inserts `lines` just above the prompt line.
local function append(buf, chat, lines)
  local row = prompt_row(buf, chat)
  vim.api.nvim_buf_set_lines(buf, row, row, true, lines)
end

--- Adds `text` (which may hold newlines) to the end of the conversation, above the prompt.
local function stream(buf, chat, text)
  local row = prompt_row(buf, chat)
  local parts = vim.split(text, '\n', { plain = true })
  if not chat.streaming then
    vim.api.nvim_buf_set_lines(buf, row, row, true, parts)
    chat.streaming = true
    return
  end
  local last = vim.api.nvim_buf_get_lines(buf, row - 1, row, true)[1]
  parts[1] = last .. parts[1]
  vim.api.nvim_buf_set_lines(buf, row - 1, row, true, parts)
end

local function one_line(text, width)
  text = (text or ''):gsub('%s+', ' ')
  if vim.fn.strchars(text) > width then
    return vim.fn.strcharpart(text, 0, width - 1) .. '…'
  end
  return text
end

--- The header: the session, its title, mode, context use and cost.
local function header(buf, chat)
  local s = chat.state
  local parts = { '# wright' }
  if s.title then
    table.insert(parts, s.title)
  end
  table.insert(parts, chat.session or 'new chat')
  table.insert(parts, 'mode ' .. (s.mode or chat.mode or 'code'))
  if s.context_window and s.context_window > 0 then
    table.insert(parts, string.format('context %d%%', math.floor(100 * (s.context_tokens or 0) / s.context_window)))
  end
  if s.cost then
    table.insert(parts, string.format('$%.4f', s.cost))
  end
  vim.api.nvim_buf_set_lines(buf, 0, 1, true, { table.concat(parts, ' · ') })
end

--- Renders one event into the chat.
local function render(buf, chat, event)
  local kind = event.kind
  local s = chat.state
  if kind == 'turn' then
    chat.streaming = false
    local lines = { '', string.format('## You (turn %d)', event.turn) }
    vim.list_extend(lines, vim.split(event.message or '', '\n', { plain = true }))
    vim.list_extend(lines, { '', '## wright' })
    append(buf, chat, lines)
  elseif kind == 'stepStarted' then
    chat.streaming = false
    chat.step_row = prompt_row(buf, chat)
  elseif kind == 'textDelta' then
    stream(buf, chat, event.text or '')
  elseif kind == 'stepRetried' then
    -- The partial answer of this step is void: it streams again.
    if chat.step_row then
      vim.api.nvim_buf_set_lines(buf, chat.step_row, prompt_row(buf, chat), true, { '_(the answer was cut; asking again)_' })
    end
    chat.streaming = false
  elseif kind == 'toolCall' then
    chat.streaming = false
    append(buf, chat, { string.format('▸ `%s` %s', event.name, one_line(event.arguments, 100)) })
  elseif kind == 'toolResult' then
    chat.streaming = false
    local lines = { string.format('  %s %s output {{{', event.isError and '✗' or '✓', event.name) }
    local output = vim.split(event.output or '', '\n', { plain = true, trimempty = true })
    for i = 1, math.min(#output, 40) do
      table.insert(lines, '    ' .. output[i])
    end
    if #output > 40 then
      table.insert(lines, string.format('    … %d more lines', #output - 40))
    end
    table.insert(lines, '  }}}')
    append(buf, chat, lines)
  elseif kind == 'editProposed' then
    chat.streaming = false
    append(buf, chat, { string.format('✎ proposed: %s (%d hunks; :WrightReview)', event.path, #(event.hunks or {})) })
  elseif kind == 'plan' then
    chat.streaming = false
    local lines = { 'Plan:' }
    for _, step in ipairs(event.steps or {}) do
      local mark = step.status == 'done' and 'x' or step.status == 'in_progress' and '>' or ' '
      table.insert(lines, string.format('- [%s] %s', mark, step.title))
    end
    append(buf, chat, lines)
  elseif kind == 'error' then
    chat.streaming = false
    append(buf, chat, { '**error:** ' .. one_line(event.message, 200) })
  elseif kind == 'finished' then
    chat.streaming = false
    local outcome = event.outcome or {}
    local why = outcome.reason and outcome.reason ~= vim.NIL and (': ' .. outcome.reason) or ''
    append(buf, chat, { '', string.format('_— turn %d %s after %d steps%s —_', event.turn or 0, outcome.status or 'done', outcome.steps or 0, why) })
  elseif kind == 'title' then
    s.title = event.title
  elseif kind == 'mode' then
    s.mode = event.mode
  elseif kind == 'usage' then
    s.context_tokens, s.context_window = event.contextTokens, event.contextWindow
    if event.costUsd ~= nil and event.costUsd ~= vim.NIL then
      s.cost = event.costUsd
    end
  end
  if kind == 'title' or kind == 'mode' or kind == 'usage' or kind == 'turn' then
    header(buf, chat)
  end
end

--- Binds the chat in `buf` to session `id` and renders what it did so far.
local function bind(buf, chat, id)
  chat.session = id
  pcall(vim.api.nvim_buf_set_name, buf, 'wright://chat/' .. id)
  for _, event in ipairs(history[id] or {}) do
    render(buf, chat, event)
  end
  header(buf, chat)
end

--- A `wright/agentEvent`: kept, and shown in the session's chat if one is open.
function M.on_event(params)
  local id = params.sessionId
  history[id] = history[id] or {}
  table.insert(history[id], params)
  local buf, chat = chat_of_session(id)
  if buf then
    render(buf, chat, params)
  end
end

--- The message typed below the prompt line, and clears it.
local function take_message(buf, chat)
  local row = prompt_row(buf, chat)
  local lines = vim.api.nvim_buf_get_lines(buf, row + 1, -1, true)
  vim.api.nvim_buf_set_lines(buf, row + 1, -1, true, { '' })
  return vim.trim(table.concat(lines, '\n'))
end

--- Sends what is typed below the prompt line.
function M.send(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local chat = chats[buf]
  if not chat then
    return
  end
  local message = take_message(buf, chat)
  if message == '' then
    return
  end
  local wright = require('wright')
  if chat.session then
    wright.prompt(message, { session = chat.session, mode = chat.mode })
  else
    wright.run(message, {
      mode = chat.mode,
      on_started = function(id)
        if vim.api.nvim_buf_is_valid(buf) and not chat.session then
          bind(buf, chat, id)
        end
      end,
    })
  end
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 then
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
  end
end

--- The chat buffer of session `id` (a new chat when nil), created on first use.
function M.buffer(id, mode)
  if id then
    local buf = chat_of_session(id)
    if buf then
      return buf
    end
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = 'markdown'
  vim.api.nvim_buf_set_lines(buf, 0, -1, true, { '# wright', M.PROMPT, '' })
  local chat = { mode = mode, state = {}, streaming = false }
  chats[buf] = chat
  vim.keymap.set('n', '<CR>', function()
    M.send(buf)
  end, { buffer = buf, desc = 'wright: send the message' })
  vim.keymap.set('i', '<C-s>', function()
    M.send(buf)
  end, { buffer = buf, desc = 'wright: send the message' })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    callback = function()
      chats[buf] = nil
    end,
  })
  if id then
    bind(buf, chat, id)
  else
    pcall(vim.api.nvim_buf_set_name, buf, 'wright://chat/new-' .. buf)
  end
  return buf
end

--- Opens the chat of session `id` (a new chat when nil) in a split, the cursor in the
--- message area.
function M.open(id, mode)
  local buf = M.buffer(id, mode)
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.cmd('botright vsplit')
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
  else
    vim.api.nvim_set_current_win(win)
  end
  vim.wo[win].foldmethod = 'marker'
  vim.wo[win].foldlevel = 0
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
  return buf
end

--- Sets the mode the chat in `buf` (the current buffer) sends its messages with.
function M.set_mode(mode, buf)
  local chat = chats[buf or vim.api.nvim_get_current_buf()]
  if chat then
    chat.mode = mode
    header(buf or vim.api.nvim_get_current_buf(), chat)
  end
end

--- The session a chat buffer shows (nil for a new chat or another buffer).
function M.session_of(buf)
  local chat = chats[buf or vim.api.nvim_get_current_buf()]
  return chat and chat.session
end

return M
