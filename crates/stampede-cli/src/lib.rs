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
mod host;
mod inspect;

use std::fmt;
use std::process::ExitCode;

use clap::Parser;
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

impl From<NetError> for Failure {
    fn from(e: NetError) -> Failure {
        let code = match e {
            // Settings and names come from the command line: usage errors, as clap's.
            NetError::Config(_) | NetError::InvalidName(_) => 2,
            _ => 1,
        };
        let mut message = strip_locations(&e.to_string());
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
    let cli = Cli::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        init_logging("off");
    }
    let result = match cli.command {
        Command::Router(a) => host::router(a),
        Command::Space(a) => host::space(a),
        Command::Names(a) => inspect::names(a),
        Command::Spaces(a) => inspect::spaces(a),
        Command::Watermark(a) => inspect::watermark(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {f}");
            ExitCode::from(f.code)
        }
    }
}

/// Sends diagnostics to stderr, so that stdout stays parseable, filtered by `RUST_LOG` or
/// else by `default`. The first call wins: with `RUST_LOG` set it happens at start; else
/// long-running commands call it once joined, so that a failure to join is reported once,
/// by the command, rather than also by Zenoh.
pub(crate) fn init_logging(default: &str) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

/// Removes the source locations Zenoh appends to its errors (` at /path/file.rs:388.`):
/// they mean nothing to an operator.
fn strip_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" at ") {
        let tail = &rest[i + 4..];
        let word = &tail[..tail.find(char::is_whitespace).unwrap_or(tail.len())];
        let location = word.find(".rs:").and_then(|r| {
            let digits = word[r + 4..].bytes().take_while(u8::is_ascii_digit).count();
            (digits > 0).then_some(r + 4 + digits)
        });
        match location {
            Some(end) => {
                out.push_str(&rest[..i]);
                // The location ends the sentence; what closes around it stays.
                let after = &tail[end..];
                rest = after.strip_prefix('.').unwrap_or(after);
            }
            None => {
                out.push_str(&rest[..i + 4]);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
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
        assert_eq!(strip_locations("look at this"), "look at this");
        assert_eq!(
            strip_locations("refused (Timeout! at /z/src/orchestrator.rs:388.) at once"),
            "refused (Timeout!) at once"
        );
        assert_eq!(Failure::from(NetError::Config("lease".into())).code, 2);
    }
}
