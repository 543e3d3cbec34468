//! The command line's subcommands, all of them in the binary: each turns arguments into library
//! calls and renders the result as text for a person (escaped on a terminal) or JSON for a
//! program. The library holds no argument parsing and no printing.

pub mod apply;
pub mod doctor;
pub mod learning;
pub mod mcp;
pub mod mcp_check;
pub mod mcp_serve;
pub mod sandbox_run;
pub mod terminal;
pub mod workspace;
