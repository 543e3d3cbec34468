//! The `wright` command line: parses arguments, sets up logging, runs a subcommand.

mod cli;

use cli::{terminal, workspace as commands};

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// glibc's allocator spent a fifth of a cold index in `malloc` and `free` (many threads making
/// and dropping small parse-tree and posting allocations); mimalloc's per-thread heaps do not
/// (`docs/benchmarks.md`, "index").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// tree-sitter's C code allocates through libc's `malloc` unless told otherwise, and a cold
/// index still spent about 5% of its time there: parse trees are many small allocations, made
/// and freed on every indexing thread. These hand it mimalloc's functions, from the library
/// the global allocator already links, and abort like tree-sitter's own wrappers when memory
/// runs out (tree-sitter requires a non-null answer).
mod tree_sitter_allocator {
    use std::ffi::c_void;

    unsafe extern "C" {
        fn mi_malloc(size: usize) -> *mut c_void;
        fn mi_calloc(count: usize, size: usize) -> *mut c_void;
        fn mi_realloc(pointer: *mut c_void, size: usize) -> *mut c_void;
        fn mi_free(pointer: *mut c_void);
    }

    fn non_null(pointer: *mut c_void, size: usize) -> *mut c_void {
        if pointer.is_null() && size != 0 {
            let layout = std::alloc::Layout::from_size_align(size, 16);
            std::alloc::handle_alloc_error(layout.unwrap_or(std::alloc::Layout::new::<u128>()));
        }
        pointer
    }

    unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
        // SAFETY: mimalloc's malloc takes any size.
        non_null(unsafe { mi_malloc(size) }, size)
    }

    unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
        non_null(
            // SAFETY: mimalloc's calloc takes any count and size (it checks the product).
            unsafe { mi_calloc(count, size) },
            count.saturating_mul(size),
        )
    }

    unsafe extern "C" fn realloc(pointer: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: tree-sitter passes a pointer this allocator returned (or null), as realloc asks.
        non_null(unsafe { mi_realloc(pointer, size) }, size)
    }

    unsafe extern "C" fn free(pointer: *mut c_void) {
        // SAFETY: tree-sitter frees only what this allocator returned (or null).
        unsafe { mi_free(pointer) }
    }

    /// Installs the four. Called in `main` before anything else runs that could touch
    /// tree-sitter.
    pub fn install() {
        // SAFETY: one allocator family, libc's alignment (mimalloc aligns to 16 like glibc),
        // never null for a non-zero size (`non_null` aborts instead), and no tree-sitter
        // object exists yet, nor another thread.
        unsafe {
            tree_sitter::set_allocator(Some(tree_sitter::Allocator {
                malloc,
                calloc,
                realloc,
                free,
            }));
        }
    }
}

/// wright: a language server that hosts a coding agent.
#[derive(Parser)]
#[command(name = "wright", version, about)]
struct Cli {
    /// The workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Append the log here instead of writing it to stderr. The filter is WRIGHT_LOG
    /// (tracing's syntax, e.g. `debug` or `wright=trace`); the default is `warn,wright=info`.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Language Server Protocol on stdin/stdout (what editors run).
    Lsp,
    /// Serve the Agent Client Protocol on stdin/stdout (Zed, JetBrains, CodeCompanion, avante,
    /// agent-shell): each session works in the folder its client names.
    Acp,
    /// Show the configuration wright resolves, where each value came from, and the log.
    Doctor {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Apply an edit read from stdin to the files under --root: all files or none.
    /// Exit 0 applied, 1 refused (nothing written), 2 usage or IO error.
    Apply {
        /// The edit's format: auto, patch, search-replace, udiff or json.
        #[arg(long, default_value = "auto", value_name = "FORMAT")]
        format: wright::edit::Format,
        /// Check the edit and report what it would do, writing nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON document: {"applied", "files", "error"}.
        #[arg(long)]
        json: bool,
    },
    /// Run commands isolated: no network, writes only to the workspace and a private /tmp.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Build or refresh the persistent symbol index of the workspace.
    Index {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Find definitions by name: exact, by identifier parts, or one typo away.
    Symbols {
        query: String,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only this kind (function, method, class, interface, module, macro, constant, type…).
        #[arg(long)]
        kind: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// The code retrieval would show a model for QUERY, ranked and fitted to a token budget.
    Context {
        query: String,
        /// Tokens the snippets may take (o200k tokenizer).
        #[arg(long, default_value_t = 8000)]
        budget: usize,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Run the agent headless on --root: edits land on disk (atomically, each recorded for
    /// --undo), progress streams to stderr. Exit 0 done, 1 failed or cancelled, 2 usage error.
    Exec {
        /// What to do, in words (not needed with --undo or --resume); with --resume, the
        /// message of a new turn.
        #[arg(required_unless_present_any = ["undo", "resume"])]
        task: Option<String>,
        /// Continue session SESSION: where it stopped (interrupted, failed, cancelled), or,
        /// with a message, with a new turn (finished sessions too). `wright sessions` lists them.
        #[arg(long, value_name = "SESSION", conflicts_with = "undo")]
        resume: Option<String>,
        /// Plan mode: read-only tools, commands in a throw-away snapshot; ends with a plan.
        #[arg(long, conflicts_with = "undo")]
        plan: bool,
        /// PROVIDER/MODEL, or auto; overrides WRIGHT_MODEL and the configuration.
        #[arg(long)]
        model: Option<String>,
        /// Model calls before the run gives up [default: agent.max_steps, else 50].
        #[arg(long)]
        max_steps: Option<u32>,
        /// Print one JSON document with the result on stdout.
        #[arg(long)]
        json: bool,
        /// Put back every file the last run on --root changed (refused if one changed since).
        #[arg(long, conflicts_with = "task")]
        undo: bool,
    },
    /// The agent sessions journaled on --root, newest first: id, title, state, turns, model,
    /// when last updated, tokens and cost.
    Sessions {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// What happened to the agent's work, from this machine's journals (nothing is sent):
    /// sessions, turns, edits proposed / applied / rejected / undone / kept, commands, tokens,
    /// cost, time to the first edit, per model.
    Stats {
        /// The last DAYS days.
        #[arg(long, value_name = "DAYS", default_value_t = 30)]
        since: u64,
        /// Every workspace's sessions, not only --root's.
        #[arg(long)]
        all: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Training data from the journaled sessions of --root.
    Trajectories {
        #[command(subcommand)]
        command: TrajectoriesCommand,
    },
    /// Search the workspace with a regular expression (ignore rules respected).
    Grep {
        pattern: String,
        /// Only files matching this glob (`*.rs`; `!*.md` excludes). Repeatable.
        #[arg(long)]
        glob: Vec<String>,
        #[arg(long, default_value_t = 200)]
        limit: usize,
        /// Lines of context around each match (text output).
        #[arg(short = 'C', long, default_value_t = 0)]
        context: usize,
        /// Match without regard to case.
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// MCP: the servers whose tools the agent uses, and wright's own engines as a server.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// Serve wright's engines (symbols, grep, reads, context, edits, patches, sandboxed
    /// commands) over the workspace at --root to an MCP client, on stdin/stdout.
    Serve {
        /// Serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765) instead.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// The configured MCP servers: where each was defined, its state and its tools. Starts
    /// the trusted ones to ask for their tools.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Connect to one server (a streamable HTTP URL, or a stdio command after `--`),
    /// initialize, list its tools and, with --call, call one. A command given here runs as
    /// you, unconfined, in --root (like running it in a shell; configured servers are
    /// sandboxed), with only PATH, HOME and LANG of your environment. Exit 0 ok, 1 the call
    /// failed or returned isError, 2 the server could not be started, reached or initialized.
    Check {
        /// Call this tool.
        #[arg(long, value_name = "TOOL")]
        call: Option<String>,
        /// The call's arguments, a JSON object.
        #[arg(long, value_name = "JSON", requires = "call")]
        args: Option<String>,
        /// Print one JSON document: {"server","protocolVersion","tools":[…],"result"?}.
        #[arg(long)]
        json: bool,
        /// Seconds to wait for the call's result (default 60); the handshake gets 30.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        timeout: Option<u64>,
        /// For a URL: send the value of this environment variable as the bearer token.
        #[arg(long, value_name = "VAR")]
        bearer_token_env: Option<String>,
        /// The server: a URL, or `--` and a command with its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "URL | -- COMMAND"
        )]
        server: Vec<String>,
    },
    /// Allow the workspace-defined server NAME, exactly as defined now, to start.
    Trust { name: String },
}

#[derive(Subcommand)]
enum TrajectoriesCommand {
    /// JSON lines: edit triples (`{"path","original","edit","final","format","session",
    /// "model","kept"}`) or sessions in the OpenAI fine-tuning chat shape. Secrets are
    /// replaced by [REDACTED].
    Export {
        /// Only sessions started in the last DAYS days.
        #[arg(long, value_name = "DAYS")]
        since: Option<u64>,
        #[arg(long, default_value = "triples", value_parser = ["triples", "chat"])]
        format: String,
        /// Only the edits that were kept (triples).
        #[arg(long)]
        kept_only: bool,
        /// Write to FILE (created 0600) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Export secrets as they are.
        #[arg(long)]
        no_redact: bool,
    },
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Run CMD isolated under --root; the exit status is CMD's (124 on timeout).
    Run {
        /// Share the host's network for this command.
        #[arg(long)]
        allow_net: bool,
        /// Wall time in seconds; then every process of the command is killed.
        #[arg(long, default_value_t = 300.0, value_name = "S")]
        timeout: f64,
        /// Memory limit in MiB.
        #[arg(long, default_value_t = 4096, value_name = "MB")]
        memory: u64,
        /// Write to a throw-away layer over the workspace and list the changed files.
        #[arg(long)]
        snapshot: bool,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
        /// The command and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<String>,
    },
}

const DEFAULT_FILTER: &str = "warn,wright=info";

fn main() -> ExitCode {
    // The sandbox's helper must stay single-threaded until it has unshared its namespaces:
    // it branches off here, before argument parsing, logging or any runtime.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == wright::sandbox::HELPER_SUBCOMMAND)
    {
        wright::sandbox::helper_main();
    }
    tree_sitter_allocator::install();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // The reader went away (`wright context … | head`): what it wanted it has; as a
        // shell pipeline expects, no complaint.
        Err(err) if broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            terminal::say!("wright: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let root = match cli.root {
        Some(root) => {
            // host path: --root itself, before any handle on it exists.
            std::fs::canonicalize(&root).with_context(|| format!("--root {}", root.display()))?
        }
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let log = init_logging(cli.log_file.as_deref())?;
    match cli.command {
        Command::Acp => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            Ok(ExitCode::from(
                runtime.block_on(wright::acp::run_stdio()) as u8
            ))
        }
        Command::Lsp => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            let options = wright::lsp::ServerOptions {
                default_root: root,
                log,
            };
            let code = runtime.block_on(wright::lsp::run_stdio(options));
            // Stdin is read by a blocking thread that would keep the runtime's drop waiting for
            // a client that may never close its end; the protocol says exit now.
            std::process::exit(code);
        }
        Command::Mcp { command } => match command {
            McpCommand::Serve { http } => cli::mcp_serve::run(&root, http.as_deref()),
            McpCommand::List { json } => cli::mcp::list(&root, json),
            McpCommand::Check {
                call,
                args,
                json,
                timeout,
                bearer_token_env,
                server,
            } => cli::mcp_check::run(cli::mcp_check::Check {
                root: &root,
                server: &server,
                call: call.as_deref(),
                args: args.as_deref(),
                json,
                timeout,
                bearer_token_env: bearer_token_env.as_deref(),
            }),
            McpCommand::Trust { name } => cli::mcp::trust(&root, &name),
        },
        Command::Doctor { json } => {
            let env = |var: &str| std::env::var(var).ok();
            let report = cli::doctor::Report::gather(&root, log, &env);
            if json {
                println!("{}", serde_json::to_string_pretty(&report.to_json())?);
            } else {
                write!(terminal::stdout(false), "{}", report.to_text())?;
            }
            Ok(if report.has_errors() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Apply {
            format,
            dry_run,
            json,
        } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading the edit from stdin")?;
            let env = |var: &str| std::env::var(var).ok();
            let gate = cli::apply::configured_gate(&root, &env);
            let options = cli::apply::Options {
                format,
                dry_run,
                json,
                gate,
            };
            let outcome = cli::apply::run(&root, &input, options);
            write!(terminal::stdout(json), "{}", outcome.stdout)?;
            write!(terminal::stderr(), "{}", outcome.stderr)?;
            Ok(ExitCode::from(outcome.code))
        }
        Command::Sandbox {
            command:
                SandboxCommand::Run {
                    allow_net,
                    timeout,
                    memory,
                    snapshot,
                    json,
                    command,
                },
        } => {
            if !(timeout.is_finite() && timeout > 0.0) {
                anyhow::bail!("--timeout must be a positive number of seconds");
            }
            let workspace = commands::Workspace::load(root.clone());
            let options = cli::sandbox_run::Options {
                allow_net,
                timeout: std::time::Duration::from_secs_f64(timeout),
                memory_mb: memory,
                snapshot,
                json,
                settings: wright::sandbox::policy::settings(&workspace.config),
            };
            let env = |var: &str| std::env::var(var).ok();
            let printed = cli::sandbox_run::run(&root, command, &options, &env);
            terminal::stdout(json).write_all(&printed.stdout)?;
            terminal::stderr().write_all(&printed.stderr)?;
            Ok(ExitCode::from(printed.code))
        }
        Command::Index { json } => {
            let workspace = commands::Workspace::load(root);
            commands::index(&workspace, json, &mut terminal::stdout(json)).map(ExitCode::from)
        }
        Command::Symbols {
            query,
            limit,
            kind,
            json,
        } => {
            let workspace = commands::Workspace::load(root);
            commands::symbols(
                &workspace,
                &query,
                limit,
                kind.as_deref(),
                json,
                &mut terminal::stdout(json),
            )
            .map(ExitCode::from)
        }
        Command::Context {
            query,
            budget,
            json,
        } => {
            let workspace = commands::Workspace::load(root);
            commands::context(
                &workspace,
                &query,
                budget,
                json,
                &mut terminal::stdout(json),
            )
            .map(ExitCode::from)
        }
        Command::Exec {
            task,
            resume,
            plan,
            model,
            max_steps,
            json,
            undo,
        } => {
            let workspace = commands::Workspace::load(root);
            if undo {
                return commands::exec_undo(&workspace, json).map(ExitCode::from);
            }
            let start = match (&task, &resume) {
                (Some(message), Some(id)) => commands::ExecStart::FollowUp(id, message),
                (None, Some(id)) => commands::ExecStart::Resume(id),
                (Some(task), None) => commands::ExecStart::Task(task),
                (None, None) => anyhow::bail!("a task is required"),
            };
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime
                .block_on(commands::exec(
                    &workspace,
                    start,
                    commands::ExecOptions {
                        model: model.as_deref(),
                        max_steps,
                        plan,
                        json,
                    },
                ))
                .map(ExitCode::from)
        }
        Command::Stats { since, all, json } => {
            let workspace = commands::Workspace::load(root);
            let options = cli::learning::StatsOptions {
                since_days: since,
                all,
                json,
            };
            cli::learning::stats(&workspace, &options, &mut terminal::stdout(json))
                .map(ExitCode::from)
        }
        Command::Trajectories {
            command:
                TrajectoriesCommand::Export {
                    since,
                    format,
                    kept_only,
                    out,
                    no_redact,
                },
        } => {
            let workspace = commands::Workspace::load(root);
            let options = cli::learning::ExportOptions {
                since_days: since,
                chat: format == "chat",
                kept_only,
                out,
                redact: !no_redact,
            };
            cli::learning::export(&workspace, &options).map(ExitCode::from)
        }
        Command::Sessions { json } => {
            let workspace = commands::Workspace::load(root);
            commands::sessions(&workspace, json, &mut terminal::stdout(json)).map(ExitCode::from)
        }
        Command::Grep {
            pattern,
            glob,
            limit,
            context,
            ignore_case,
            json,
        } => {
            let workspace = commands::Workspace::load(root);
            let query = wright::search::GrepQuery {
                pattern,
                globs: glob,
                limit,
                context,
                case_insensitive: ignore_case,
            };
            commands::grep(&workspace, query, json, &mut terminal::stdout(json)).map(ExitCode::from)
        }
    }
}

/// Logs go to stderr or the `--log-file`, never stdout: in `wright lsp` stdout is the protocol.
/// On stderr, a language client that asks for the log gets it as `window/logMessage` instead
/// (`wright::lsp::client_log`). Returns where the log goes, for reports.
fn init_logging(log_file: Option<&Path>) -> anyhow::Result<String> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, fmt};

    let (filter, bad_filter) = match std::env::var("WRIGHT_LOG") {
        Ok(spec) => match EnvFilter::try_new(&spec) {
            Ok(filter) => (filter, None),
            Err(err) => (EnvFilter::new(DEFAULT_FILTER), Some((spec, err))),
        },
        Err(_) => (EnvFilter::new(DEFAULT_FILTER), None),
    };
    let registry = tracing_subscriber::registry().with(filter);
    let target = match log_file {
        Some(path) => {
            // host path: the log file the user named.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening the log file {}", path.display()))?;
            registry
                .with(
                    fmt::layer()
                        .with_ansi(false)
                        .with_writer(std::sync::Mutex::new(file)),
                )
                .init();
            path.display().to_string()
        }
        None => {
            registry
                .with(
                    fmt::layer()
                        .with_ansi(std::io::stderr().is_terminal())
                        .with_writer(std::io::stderr)
                        .with_filter(wright::lsp::client_log::StderrGate),
                )
                .with(wright::lsp::client_log::layer())
                .init();
            "stderr".to_owned()
        }
    };
    if let Some((spec, err)) = bad_filter {
        tracing::warn!(
            "WRIGHT_LOG={spec:?} is not a valid filter ({err}); using {DEFAULT_FILTER:?}"
        );
    }
    Ok(target)
}
