//! Why a mixer, participant or benchmark run could not go on.

use std::fmt;
use std::io;

use stampede_core::{GetError, PutError, StmError};
use stampede_net::NetError;

/// What went wrong, keeping the runtime's or the system's own error.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConferenceError {
    /// Joining, naming or looking up.
    Net(NetError),
    /// Attach, consume, virtual time and the other operations that move no item.
    Stm(StmError),
    /// A get that could not be retried.
    Get(GetError),
    /// A put that could not be retried.
    Put(PutError),
    /// A socket, pipe or file operation.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The other side broke the protocol (a bad hello, a frame of the wrong length).
    Protocol(String),
    /// The options cannot work (an id already taken, a size too small for the header).
    Setup(String),
    /// Something awaited did not happen in time.
    Timeout(String),
    /// A child process of the benchmark misbehaved.
    Child(String),
}

impl ConferenceError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        ConferenceError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for ConferenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Net(e) => e.fmt(f),
            Self::Stm(e) => e.fmt(f),
            Self::Get(e) => e.fmt(f),
            Self::Put(e) => e.fmt(f),
            Self::Io { context, source } => write!(f, "{context}: {source}"),
            Self::Protocol(s) => write!(f, "protocol error: {s}"),
            Self::Setup(s) => f.write_str(s),
            Self::Timeout(s) => write!(f, "timed out: {s}"),
            Self::Child(s) => write!(f, "child process: {s}"),
        }
    }
}

impl std::error::Error for ConferenceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Net(e) => Some(e),
            Self::Stm(e) => Some(e),
            Self::Get(e) => Some(e),
            Self::Put(e) => Some(e),
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

macro_rules! from_error {
    ($($variant:ident($error:ty)),*) => {$(
        impl From<$error> for ConferenceError {
            fn from(e: $error) -> Self {
                Self::$variant(e)
            }
        }
    )*};
}
from_error!(Net(NetError), Stm(StmError), Get(GetError), Put(PutError));

/// The result of a scoped camera or display thread; a panic there becomes an error.
pub(crate) fn joined(
    h: std::thread::ScopedJoinHandle<'_, Result<(), ConferenceError>>,
) -> Result<(), ConferenceError> {
    h.join()
        .unwrap_or_else(|_| Err(ConferenceError::Setup("a thread panicked".into())))
}
