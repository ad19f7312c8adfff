//! The `stampede` command: runs routers and address spaces of a distributed Stampede
//! application and inspects it from outside.
//!
//! The inspecting commands (`names`, `spaces`, `watermark`) join the application as a
//! short-lived address space of their own, with no tasks, so they never hold anyone's
//! watermark; they leave as soon as they have answered, and hide themselves from what they
//! print. See `docs/cli.md` for an operator's guide.
//!
//! Exit codes: 0 on success (and after a clean leave on SIGINT or SIGTERM), 1 when the
//! application could not be joined or asked, 2 for invalid arguments or configuration.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod args;
mod dashboard;
mod host;
mod inspect;
mod top;

use std::fmt;
use std::process::ExitCode;

use clap::Parser;
use stampede_core::StmError;
use stampede_net::NetError;

use args::{Cli, Command};

/// Why a command failed, and the exit code that says so.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// A failure of the application or the network, not of the command line.
    pub(crate) fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<StmError> for Failure {
    fn from(e: StmError) -> Failure {
        NetError::Stm(e).into()
    }
}

impl From<NetError> for Failure {
    fn from(e: NetError) -> Failure {
        let code = match e {
            // Settings and names come from the command line: usage errors, as clap's.
            NetError::Config(_) | NetError::Stm(StmError::InvalidName(_)) => 2,
            _ => 1,
        };
        // The error's text leaves out the source locations Zenoh appends to its own.
        let mut message = e.to_string();
        if matches!(&e, NetError::Connect(t) if t.contains("Unable to connect")) {
            message.push_str(" (is a router or peer listening there?)");
        }
        Failure { code, message }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the underlying error spans.
        let mut first = true;
        for line in self
            .message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            if !first {
                f.write_str("; ")?;
            }
            f.write_str(line)?;
            first = false;
        }
        Ok(())
    }
}

/// Parses the command line, runs the command, and reports how it ended.
pub fn main() -> ExitCode {
    stampede_net::size_zenoh_runtime_in_main();
    let cli = Cli::parse();
    if std::env::var_os("STAMPEDE_LOG").is_some() || std::env::var_os("RUST_LOG").is_some() {
        init_logging("off");
    }
    let result = match cli.command {
        Command::Router(a) => host::router(a),
        Command::Space(a) => host::space(a),
        Command::Names(a) => inspect::names(a),
        Command::Spaces(a) => inspect::spaces(a),
        Command::Watermark(a) => inspect::watermark(a),
        Command::Threads(a) => inspect::threads(a),
        Command::Metrics(a) => inspect::metrics(a),
        Command::Top(a) => top::top(a),
        Command::Dashboard(a) => dashboard::dashboard(a),
        Command::Node(a) => host::node(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {f}");
            ExitCode::from(f.code)
        }
    }
}

/// Sends diagnostics to stderr, so that stdout stays parseable, filtered by `STAMPEDE_LOG`
/// or `RUST_LOG` or else by `default` (`STAMPEDE_LOG_FORMAT=json` for JSON lines). The first call wins: with `RUST_LOG` set it happens at start; else
/// long-running commands call it once joined, so that a failure to join is reported once,
/// by the command, rather than also by Zenoh.
pub(crate) fn init_logging(default: &str) {
    stampede_observe::init_logging(Some(default));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_one_line_without_source_locations() {
        let f = Failure::from(NetError::Connect(
            "Unable to connect to any of [tcp/127.0.0.1:1]. Timeout! at \
             /home/u/.cargo/registry/src/zenoh-1.10.2/src/net/runtime/orchestrator.rs:388.\n\
             second line"
                .into(),
        ));
        assert_eq!(f.code, 1);
        assert_eq!(
            f.to_string(),
            "could not join: Unable to connect to any of [tcp/127.0.0.1:1]. Timeout!; \
             second line (is a router or peer listening there?)"
        );
        assert_eq!(Failure::from(NetError::Config("lease".into())).code, 2);
        let f = Failure::from(NetError::Config(
            "no/such = 1: unknown key at /home/u/.cargo/registry/src/zenoh-config/src/lib.rs:9."
                .into(),
        ));
        assert_eq!(
            f.to_string(),
            "invalid configuration: no/such = 1: unknown key"
        );
    }
}
