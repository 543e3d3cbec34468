-- wright.nvim: `:checkhealth wright`: the binary, its version, the sandbox as `wright doctor`
-- sees it, and the model configuration.

local M = {}

local function system(argv, env)
  local ok, job = pcall(vim.system, argv, { text = true, env = env })
  if not ok then
    return nil, tostring(job)
  end
  local result = job:wait(30000)
  if result.signal ~= 0 and result.code == 0 then
    return nil, 'killed by signal ' .. result.signal
  end
  return result
end

function M.check()
  local health = vim.health
  local wright = require('wright')
  local config = wright.config()
  health.start('wright')

  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()))
  else
    health.error('Neovim 0.10 or later is required')
  end
  if wright.is_setup() then
    health.ok('setup() called; apply mode ' .. config.apply_mode)
  else
    health.warn("setup() not called: nothing starts the server", { "call require('wright').setup{} in your config" })
  end

  local binary = vim.fn.exepath(config.cmd[1])
  if binary == '' then
    health.error('wright binary not found: ' .. config.cmd[1], {
      'install it (cargo install --path server in a wright checkout) and put it on PATH',
      "or give its path: require('wright').setup{ cmd = { '/path/to/wright', 'lsp' } }",
    })
    return
  end
  health.ok('binary: ' .. binary)

  local version, err = system({ binary, '--version' }, config.cmd_env)
  if not version or version.code ~= 0 then
    health.error('`wright --version` failed: ' .. (err or vim.trim(version.stderr or '')))
    return
  end
  health.ok('version: ' .. vim.trim(version.stdout))

  local root = vim.fs.root(0, config.root_markers) or vim.fn.getcwd()
  local doctor, doctor_err = system({ binary, '--root', root, 'doctor', '--json' }, config.cmd_env)
  if not doctor or doctor.code ~= 0 then
    health.error('`wright doctor --json` failed: ' .. (doctor_err or vim.trim(doctor.stderr or '')))
    return
  end
  local ok, report = pcall(vim.json.decode, doctor.stdout)
  if not ok or type(report) ~= 'table' then
    health.error('`wright doctor --json` printed no JSON: ' .. vim.trim(doctor.stdout))
    return
  end

  health.start('wright: sandbox (wright doctor, root ' .. root .. ')')
  for _, primitive in ipairs(report.sandbox or {}) do
    local line = string.format('%s: %s', primitive.name, primitive.detail)
    if primitive.available then
      health.ok(line)
    else
      health.warn(line, { 'commands the agent runs are less isolated; see `wright doctor`' })
    end
  end

  health.start('wright: configuration')
  local settings = {}
  for _, setting in ipairs(report.settings or {}) do
    settings[setting.key] = setting
  end
  local function value(key)
    local setting = settings[key]
    return setting and setting.value ~= vim.NIL and setting.value or nil
  end
  local model, source = config.model, 'setup{ model }'
  if not model then
    model = value('model')
    source = settings.model and settings.model.source ~= vim.NIL and settings.model.source or nil
  end
  if model then
    health.ok(string.format('model: %s (%s)', model, source or '?'))
    local provider = model:match('^([^/]+)/')
    if provider == 'openai' or provider == 'anthropic' then
      local key = value('providers.' .. provider .. '.api_key') or value('providers.' .. provider .. '.api_key_command')
      local base_url = value('providers.' .. provider .. '.base_url') or '?'
      if key then
        health.ok(string.format('%s: key set, endpoint %s', provider, base_url))
      else
        health.warn(string.format('%s: no API key (endpoint %s)', provider, base_url), {
          provider == 'openai' and 'set OPENAI_API_KEY (a local OpenAI-compatible server may not need one)'
            or 'set ANTHROPIC_API_KEY',
        })
      end
    end
  else
    health.error('no model configured', {
      "require('wright').setup{ model = 'openai/gpt-4.1' }",
      'or WRIGHT_MODEL=PROVIDER/MODEL in the environment, or model = "…" in ~/.config/wright/config.toml',
    })
  end
  for _, problem in ipairs(report.problems or {}) do
    health.warn(problem)
  end

  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ name = 'wright' }) or {}
  if #clients > 0 then
    for _, client in ipairs(clients) do
      health.ok(string.format('server running (client %d) on %s', client.id, client.root_dir or '?'))
    end
  else
    health.info('no wright server running in this Neovim yet')
  end
end

return M
