//! Errors of joining, naming and configuration. Operations on containers return the same
//! error types as in one process ([`stampede_core::GetError`] and the others), with an
//! `Unreachable` case for an owner that left, died or did not answer in time.

use std::fmt;

use stampede_core::StmError;

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
    /// No container or service of this name appeared in time.
    NotFound(String),
    /// The name has the wrong kind (a queue asked for as a channel, say).
    WrongKind {
        /// The name.
        name: String,
        /// What it is.
        is: crate::wire::Kind,
    },
    /// A name that cannot be used (empty, or containing `*`, `$`, `?`, `#` or empty parts).
    InvalidName(String),
    /// Another address space did not answer in time, or left.
    Unreachable(String),
    /// A message could not be decoded.
    Protocol(DecodeError),
    /// The local runtime refused.
    Stm(StmError),
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Config(s) => write!(f, "invalid configuration: {s}"),
            NetError::Connect(s) => write!(f, "could not join: {s}"),
            NetError::AuthRejected(s) => write!(f, "rejected: {s}"),
            NetError::NotFound(n) => write!(f, "no container or service named {n:?}"),
            NetError::WrongKind { name, is } => write!(f, "{name:?} is a {is}"),
            NetError::InvalidName(n) => write!(
                f,
                "invalid name {n:?}: use non-empty parts separated by '/', without * $ ? #"
            ),
            NetError::Unreachable(s) => write!(f, "unreachable: {s}"),
            NetError::Protocol(e) => write!(f, "malformed message: {e}"),
            NetError::Stm(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for NetError {}

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
