-- wright.nvim: review per hunk. `:WrightReview` opens each proposal of a review session in a
-- tab of its own, in diff mode (the file as the proposal was computed against, left; the
-- proposal, right), with keys on both sides: `ga` accepts the hunk under the cursor, `gr`
-- rejects it, `gA` / `gR` every hunk of the file, `q` closes the tab. The server applies an
-- accepted hunk where the user's lines moved it (or refuses it when they touched it); the
-- proposal left over comes back as a new `editProposed`, and the tab shows it.

local M = {}

--- Open review tabs by path: { tab, before_buf, after_buf, session }.
local open = {}

local function lines_of(text)
  if text == nil or text == vim.NIL or text == '' then
    return {}
  end
  local lines = vim.split(text, '\n', { plain = true })
  if lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

local function count_lines(text)
  return #lines_of(text)
end

--- The hunk of `proposal` at 1-based `line` of its before (`side` 'before') or after text.
function M.hunk_at(proposal, side, line)
  local offset = 0
  for _, hunk in ipairs(proposal.hunks or {}) do
    local old_count = math.max(0, hunk.endLine - hunk.startLine + 1)
    local new_count = count_lines(hunk.newText)
    local first, count
    if side == 'before' then
      first, count = hunk.startLine, old_count
    else
      first, count = hunk.startLine + offset, new_count
    end
    -- An empty side of a hunk (an insertion, a deletion) is reached from the line before it.
    local last = first + math.max(count, 1) - 1
    if line >= first - (count == 0 and 1 or 0) and line <= last then
      return hunk
    end
    offset = offset + new_count - old_count
  end
end

local function fill(buf, text)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, true, lines_of(text))
  vim.bo[buf].modifiable = false
end

local function close(path)
  local view = open[path]
  open[path] = nil
  if view and vim.api.nvim_tabpage_is_valid(view.tab) then
    local tabnr = vim.api.nvim_tabpage_get_number(view.tab)
    pcall(vim.cmd, 'tabclose ' .. tabnr)
  end
end

--- Sends the decision on `ids` (every hunk when nil) of `path`'s proposal.
local function decide(session_id, path, accept, ids)
  local ui = require('wright.ui')
  local session = ui.session(session_id)
  local proposal = session.proposals[path]
  if not proposal then
    ui.notify('nothing is proposed for ' .. path, vim.log.levels.WARN)
    return
  end
  local all = {}
  for _, hunk in ipairs(proposal.hunks or {}) do
    table.insert(all, hunk.id)
  end
  ids = ids or all
  require('wright').hunks_decision(accept, session_id, ids, function()
    -- Every hunk decided: nothing is left of the proposal (else a new editProposed says what).
    if #ids == #all then
      session.proposals[path] = nil
      close(path)
    end
    ui.notify(string.format('%s %d hunk(s) of %s', accept and 'accepted' or 'rejected', #ids, path))
  end)
end

local function map_keys(buf, session_id, path, side)
  local function under_cursor(accept)
    local proposal = require('wright.ui').session(session_id).proposals[path]
    local line = vim.api.nvim_win_get_cursor(0)[1]
    local hunk = proposal and M.hunk_at(proposal, side, line)
    if not hunk then
      require('wright.ui').notify('no hunk under the cursor', vim.log.levels.WARN)
      return
    end
    decide(session_id, path, accept, { hunk.id })
  end
  local opts = function(desc)
    return { buffer = buf, desc = 'wright: ' .. desc, nowait = true }
  end
  vim.keymap.set('n', 'ga', function()
    under_cursor(true)
  end, opts('accept the hunk under the cursor'))
  vim.keymap.set('n', 'gr', function()
    under_cursor(false)
  end, opts('reject the hunk under the cursor'))
  vim.keymap.set('n', 'gA', function()
    decide(session_id, path, true)
  end, opts("accept every hunk of the file"))
  vim.keymap.set('n', 'gR', function()
    decide(session_id, path, false)
  end, opts("reject every hunk of the file"))
  vim.keymap.set('n', 'q', function()
    close(path)
  end, opts('close the review'))
end

local function scratch(name, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.bo[buf].filetype = filetype or ''
  return buf
end

--- Opens (or refreshes) the review tab of `path`'s proposal in session `session_id`.
function M.show(session_id, path)
  local proposal = require('wright.ui').session(session_id).proposals[path]
  if not proposal then
    return nil
  end
  local view = open[path]
  if view and vim.api.nvim_buf_is_valid(view.before_buf) and vim.api.nvim_buf_is_valid(view.after_buf) then
    fill(view.before_buf, proposal.before)
    fill(view.after_buf, proposal.after)
    return view
  end
  local filetype = vim.filetype.match({ filename = path }) or ''
  local before_buf = scratch('wright://review/' .. session_id .. '/before/' .. path, filetype)
  local after_buf = scratch('wright://review/' .. session_id .. '/proposed/' .. path, filetype)
  fill(before_buf, proposal.before)
  fill(after_buf, proposal.after)
  vim.cmd('tabnew')
  local tab = vim.api.nvim_get_current_tabpage()
  local left = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(left, before_buf)
  vim.cmd('diffthis')
  vim.cmd('rightbelow vsplit')
  local right = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(right, after_buf)
  vim.cmd('diffthis')
  map_keys(before_buf, session_id, path, 'before')
  map_keys(after_buf, session_id, path, 'after')
  view = { tab = tab, before_buf = before_buf, after_buf = after_buf, left = left, right = right, session = session_id }
  open[path] = view
  return view
end

--- Opens every proposal of the session in review tabs; the views by path.
function M.open_all(session_id)
  local session = require('wright.ui').session(session_id)
  local paths = vim.tbl_keys(session.proposals)
  table.sort(paths)
  local views = {}
  for _, path in ipairs(paths) do
    views[path] = M.show(session_id, path)
  end
  return views, paths
end

--- A new proposal for `path` arrived: an open review tab shows it.
function M.on_proposal(session_id, path)
  local view = open[path]
  if view and view.session == session_id then
    M.show(session_id, path)
  end
end

return M
