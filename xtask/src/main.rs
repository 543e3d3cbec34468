//! `cargo xtask`: the project's own tasks, in Rust so they run wherever cargo does.

mod bench_edit;
mod demo;
mod fuzz;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  bench edit [--files N] [--no-write]
         the edit engine's accuracy on real source files against two baselines;
         writes its section of docs/benchmarks.md
  fuzz [--seconds N] [TARGET...]
         run each cargo-fuzz target of server/fuzz (every edit parser) for N seconds
  demo   build wright and drive `wright lsp` on the example workspace as an editor would
  tidy   check the codebase's own rules (also run by `cargo test` as a test)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench") => match args.get(1).map(String::as_str) {
            Some("edit") => bench_edit::run(&args[2..]),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        },
        Some("demo") => demo::run(),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("tidy") => tidy::run(),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The repository root (xtask lives one level below it).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the repository")
        .to_path_buf()
}
