-- wright.nvim: a strict `workspace/applyEdit` handler.
--
-- Neovim's own handler answers `applied: true` even when it skipped a stale edit, checks the
-- version only when it is above 0 and only on the first `TextDocumentEdit`. wright's edits are
-- computed against a buffer version, so this handler checks every one of them against the
-- buffer's LSP version (its changedtick, 0 included), applies all of them or none, and says why
-- when it refuses: the server then tells the agent, which reads the file again and retries.

local M = {}

--- The LSP version Neovim last reported (or will report) for `bufnr`.
local function buffer_version(bufnr)
  -- Neovim reports 0 in didOpen, then the changedtick of every change (0.12 keeps the 0 as the
  -- table's default, hence no rawget).
  local version = vim.lsp.util.buf_versions[bufnr]
  if version == nil then
    -- Not attached to any client: the changedtick is what a version would be.
    version = vim.api.nvim_buf_get_changedtick(bufnr)
  end
  return version
end

--- The loaded buffer showing `uri`, or nil.
local function loaded_buffer(uri)
  local fname = vim.uri_to_fname(uri)
  local bufnr = vim.fn.bufnr(fname)
  if bufnr == -1 or not vim.api.nvim_buf_is_loaded(bufnr) then
    return nil
  end
  return bufnr
end

local function short_name(uri)
  return vim.fn.fnamemodify(vim.uri_to_fname(uri), ':~:.')
end

--- The document edits of a WorkspaceEdit as `{ uri, version, edits }`, or nil and the reason it
--- cannot be applied here.
local function document_edits(edit)
  local out = {}
  if edit.documentChanges then
    for _, change in ipairs(edit.documentChanges) do
      if change.kind then
        return nil,
          string.format('wright.nvim does not apply resource operations (%s %s)', change.kind, change.uri or change.oldUri or '?')
      end
      local version = change.textDocument.version
      if version == vim.NIL then
        version = nil
      end
      table.insert(out, { uri = change.textDocument.uri, version = version, edits = change.edits })
    end
  elseif edit.changes then
    for uri, edits in pairs(edit.changes) do
      table.insert(out, { uri = uri, edits = edits })
    end
  end
  return out
end

--- Whether every range of `edits` lies inside buffer `bufnr` (a position past the end is
--- clamped by Neovim only up to the last line plus one).
local function ranges_fit(bufnr, edits)
  local line_count = vim.api.nvim_buf_line_count(bufnr)
  for _, text_edit in ipairs(edits) do
    local range = text_edit.range
    if range.start.line > line_count or range['end'].line > line_count then
      return false
    end
    if range.start.line > range['end'].line
      or (range.start.line == range['end'].line and range.start.character > range['end'].character)
    then
      return false
    end
  end
  return true
end

--- Applies `edit` all or nothing. Returns true, or false and the reason.
function M.apply(edit, offset_encoding)
  local entries, reason = document_edits(edit)
  if not entries then
    return false, reason
  end
  -- Check everything before touching anything.
  for _, entry in ipairs(entries) do
    local bufnr = loaded_buffer(entry.uri)
    if entry.version ~= nil then
      if not bufnr then
        return false,
          string.format('%s is not open in Neovim, so version %d cannot be checked', short_name(entry.uri), entry.version)
      end
      local current = buffer_version(bufnr)
      if current ~= entry.version then
        return false,
          string.format(
            '%s changed since the edit was computed: the buffer is at version %d, the edit is for version %d',
            short_name(entry.uri),
            current,
            entry.version
          )
      end
    elseif not bufnr then
      bufnr = vim.fn.bufadd(vim.uri_to_fname(entry.uri))
      vim.fn.bufload(bufnr)
    end
    if not vim.bo[bufnr].modifiable then
      return false, string.format('%s is not modifiable', short_name(entry.uri))
    end
    if not ranges_fit(bufnr, entry.edits) then
      return false, string.format('an edit range lies outside %s', short_name(entry.uri))
    end
    entry.bufnr = bufnr
  end
  -- Apply; on a failure put back every buffer already changed.
  local saved = {}
  for _, entry in ipairs(entries) do
    if not saved[entry.bufnr] then
      saved[entry.bufnr] = vim.api.nvim_buf_get_lines(entry.bufnr, 0, -1, true)
    end
    local ok, err = pcall(vim.lsp.util.apply_text_edits, entry.edits, entry.bufnr, offset_encoding)
    if not ok then
      for bufnr, lines in pairs(saved) do
        vim.api.nvim_buf_set_lines(bufnr, 0, -1, true, lines)
      end
      return false, string.format('applying the edit to %s failed (nothing applied): %s', short_name(entry.uri), err)
    end
  end
  return true
end

--- The `workspace/applyEdit` handler.
function M.workspace_apply_edit(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local encoding = client and client.offset_encoding or 'utf-16'
  local ok, applied, reason = pcall(M.apply, params.edit, encoding)
  if not ok then
    applied, reason = false, 'wright.nvim: ' .. tostring(applied)
  end
  if applied then
    return { applied = true }
  end
  require('wright.ui').edit_refused(reason)
  return { applied = false, failureReason = reason }
end

return M
