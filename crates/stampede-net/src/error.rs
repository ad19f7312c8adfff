//! Errors of joining, naming and configuration. Operations on containers return the same
//! error types as in one process ([`stampede_core::GetError`] and the others), with an
//! `Unreachable` case for an owner that left, died or did not answer in time.

use std::fmt;

use stampede_core::{ErrorCode, StmError};

use crate::wire::DecodeError;

/// What went wrong outside the STM operations themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetError {
    /// The configuration is invalid; says which setting.
    Config(String),
    /// The Zenoh session could not be opened (no router or peer reachable, bad endpoint).
    Connect(String),
    /// A router or peer rejected this address space's credentials or certificate.
    AuthRejected(String),
    /// Another address space did not answer in time, or left.
    Unreachable(String),
    /// A message could not be decoded.
    Protocol(DecodeError),
    /// The runtime refused: a name that cannot be used, not found or of another kind, or
    /// any other STM error.
    Stm(StmError),
}

impl fmt::Display for NetError {
    /// Says what went wrong in words for users: source locations that Zenoh appends to its
    /// errors (` at /path/file.rs:388.`) are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Config(s) => write!(f, "invalid configuration: {}", strip_locations(s)),
            NetError::Connect(s) => write!(f, "could not join: {}", strip_locations(s)),
            NetError::AuthRejected(s) => write!(f, "rejected: {}", strip_locations(s)),
            NetError::Unreachable(s) => write!(f, "unreachable: {}", strip_locations(s)),
            NetError::Protocol(e) => write!(f, "malformed message: {e}"),
            NetError::Stm(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for NetError {}

impl NetError {
    /// The core's stable code for this situation (see [`stampede_core::ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            NetError::Config(_) => ErrorCode::Config,
            NetError::Connect(_) => ErrorCode::Connect,
            NetError::AuthRejected(_) => ErrorCode::AuthRejected,
            NetError::Unreachable(_) => ErrorCode::Unreachable,
            NetError::Protocol(_) => ErrorCode::Protocol,
            NetError::Stm(e) => e.code().0,
        }
    }
}

impl From<StmError> for NetError {
    fn from(e: StmError) -> Self {
        NetError::Stm(e)
    }
}

impl From<DecodeError> for NetError {
    fn from(e: DecodeError) -> Self {
        NetError::Protocol(e)
    }
}

/// The text of a Zenoh error, without the source locations Zenoh appends.
pub(crate) fn zenoh_text(e: &impl fmt::Display) -> String {
    strip_locations(&e.to_string())
}

/// Removes source locations (` at /path/file.rs:388.`) from `text`: they mean nothing to a
/// user, and name directories of the machine that built the program.
pub(crate) fn strip_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, end)) = next_location(rest) {
        out.push_str(&rest[..start]);
        // The location ends the sentence; what closes around it stays.
        let after = &rest[end..];
        rest = after.strip_prefix('.').unwrap_or(after);
    }
    out.push_str(rest);
    out
}

/// Where the first ` at <path>.rs:<line>` in `text` starts and ends.
fn next_location(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = text[from..].find(".rs:") {
        let r = from + i;
        let digits = text[r + 4..].bytes().take_while(u8::is_ascii_digit).count();
        from = r + 4;
        if digits == 0 {
            continue;
        }
        let Some(start) = text[..r].rfind(" at ") else {
            continue;
        };
        let path = &text[start + 4..r];
        let one_word = !path.contains(char::is_whitespace);
        if !path.is_empty() && !path.contains('\n') && (one_word || path.contains(['/', '\\'])) {
            return Some((start, r + 4 + digits));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_locations_are_stripped() {
        assert_eq!(strip_locations("look at this"), "look at this");
        assert_eq!(
            strip_locations("refused (Timeout! at /z/src/orchestrator.rs:388.) at once"),
            "refused (Timeout!) at once"
        );
        assert_eq!(
            strip_locations(
                "Endpoints must be of the form <protocol>/<address>: x at \
                 /home/u/.cargo/registry/src/zenoh-protocol-1.10.2/src/core/endpoint.rs:615."
            ),
            "Endpoints must be of the form <protocol>/<address>: x"
        );
        assert_eq!(
            strip_locations("a at /x/a.rs:1. - Caused by b at C:\\My Files\\b.rs:2."),
            "a - Caused by b"
        );
        assert_eq!(
            strip_locations("done at once, at main.rs:7"),
            "done at once,"
        );
        assert_eq!(
            strip_locations("see lib.rs: it is at a.rs:x"),
            "see lib.rs: it is at a.rs:x"
        );
    }

    #[test]
    fn messages_show_no_source_locations() {
        let e = NetError::Connect(
            "Unable to connect to any of [tcp/127.0.0.1:1]. Timeout! at \
             /home/u/.cargo/registry/src/zenoh-1.10.2/src/net/runtime/orchestrator.rs:388."
                .into(),
        );
        assert_eq!(
            e.to_string(),
            "could not join: Unable to connect to any of [tcp/127.0.0.1:1]. Timeout!"
        );
    }
}
