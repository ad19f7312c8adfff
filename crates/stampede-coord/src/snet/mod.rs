//! S-Net (seed 004 §3.2): networks of stateless boxes over typed records, composed by
//! combinators, checked before they run.
//!
//! A program is written in the network language ([`Network::parse`]) or with the embedded
//! builder; both give the same checked [`Network`]. docs/snet.md teaches the language.

mod ast;
mod boxes;
mod builder;
mod calls;
mod check;
mod det;
mod diag;
mod dot;
mod inst;
mod network;
mod parse;
mod print;
mod record;
mod route;
mod run;
mod shared;
mod stream;
mod types;

use std::sync::Arc;

pub use boxes::{BoxCall, BoxError, BoxFn};
pub use builder::Net;
pub use diag::{Diagnostic, Diagnostics};
pub use network::Network;
pub use record::{Record, Value};
pub use run::{Run, RunStats, Runner};
pub use shared::Policy;

impl Network {
    /// Parses and checks a program. `file` names the source in diagnostics.
    pub fn parse(file: &str, source: &str) -> Result<Network, Diagnostics> {
        let file: Arc<str> = Arc::from(file);
        let source: Arc<str> = Arc::from(source);
        let def = parse::program(&source)
            .map_err(|d| Diagnostics::new(file.clone(), source.clone(), vec![*d]))?;
        check::check(&def, file.clone(), source.clone())
            .map_err(|list| Diagnostics::new(file, source, list))
    }
}

/// The program in canonical form: parsed and printed back, without checking. Two programs
/// with the same canonical form have the same syntax tree.
pub fn canonical(source: &str) -> Result<String, Diagnostics> {
    let def = parse::program(source)
        .map_err(|d| Diagnostics::new(Arc::from("<canonical>"), Arc::from(source), vec![*d]))?;
    Ok(print::net_def(&def))
}
