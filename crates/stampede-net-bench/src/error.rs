use std::fmt;
use std::io;
use std::time::Duration;

use stampede_core::{GetError, PutError, StmError, Timestamp};
use stampede_net::NetError;

/// A failed Stampede operation, keeping the runtime's own error.
#[derive(Debug)]
pub enum StampedeError {
    /// Joining, naming or looking up.
    Net(NetError),
    /// A put.
    Put(PutError),
    /// A get.
    Get(GetError),
    /// Attach, consume, virtual time and the other operations that move no item.
    Stm(StmError),
}

impl fmt::Display for StampedeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Net(e) => e.fmt(f),
            Self::Put(e) => e.fmt(f),
            Self::Get(e) => e.fmt(f),
            Self::Stm(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StampedeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Net(e) => Some(e),
            Self::Put(e) => Some(e),
            Self::Get(e) => Some(e),
            Self::Stm(e) => Some(e),
        }
    }
}

macro_rules! from_stampede {
    ($($variant:ident($error:ty)),*) => {$(
        impl From<$error> for StampedeError {
            fn from(e: $error) -> Self {
                Self::$variant(e)
            }
        }
    )*};
}
from_stampede!(Net(NetError), Put(PutError), Get(GetError), Stm(StmError));

/// Why a measurement could not be completed.
#[derive(Debug)]
pub enum BenchError {
    /// An I/O operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// Zenoh reported an error.
    Zenoh {
        /// What was being done.
        context: String,
        /// Zenoh's message (its error type is a boxed trait object).
        message: String,
    },
    /// The other side did not answer or make progress in time.
    Timeout {
        /// What was awaited or being done.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
    /// The child process misbehaved: unexpected output, early exit or failure status.
    Child(String),
    /// The consumer received fewer or more messages than the producer sent.
    Lost {
        /// Messages the producer reports having sent.
        sent: u64,
        /// Messages the consumer received.
        received: u64,
    },
    /// A message arrived with an unexpected size.
    BadPayload {
        /// The size both sides agreed on.
        expected: usize,
        /// The size that arrived.
        got: usize,
    },
    /// A Stampede operation failed.
    Stampede {
        /// What was being done.
        context: String,
        /// The runtime's error.
        source: StampedeError,
    },
    /// An in-order get returned another timestamp than the next one put.
    OutOfOrder {
        /// The timestamp expected.
        expected: Timestamp,
        /// The timestamp gotten.
        got: Timestamp,
    },
    /// Garbage collection fell behind: a container held more items than the run allows.
    GcBehind {
        /// Which container.
        container: String,
        /// The most items it held at once.
        resident: usize,
        /// The most it may hold.
        limit: usize,
        /// What held the watermark back, as its owner explains it (empty if not known).
        holds: String,
    },
    /// An item was reclaimed before its consumer had consumed it.
    ReclaimedEarly {
        /// The item's timestamp.
        ts: Timestamp,
    },
}

impl BenchError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    pub(crate) fn zenoh(context: impl Into<String>) -> impl FnOnce(zenoh::Error) -> Self {
        let context = context.into();
        move |e| Self::Zenoh {
            context,
            message: e.to_string(),
        }
    }

    pub(crate) fn stampede<E: Into<StampedeError>>(
        context: impl Into<String>,
    ) -> impl FnOnce(E) -> Self {
        let context = context.into();
        move |e| Self::Stampede {
            context,
            source: e.into(),
        }
    }

    pub(crate) fn timeout(what: impl Into<String>, after: Duration) -> Self {
        Self::Timeout {
            what: what.into(),
            after,
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { context, source } => write!(f, "{context}: {source}"),
            Self::Zenoh { context, message } => write!(f, "{context}: zenoh: {message}"),
            Self::Timeout { what, after } => write!(f, "{what}: timed out after {after:?}"),
            Self::Child(message) => write!(f, "child process: {message}"),
            Self::Lost { sent, received } => write!(
                f,
                "messages lost: producer sent {sent}, consumer received {received}"
            ),
            Self::BadPayload { expected, got } => {
                write!(f, "payload of {got} bytes where {expected} were expected")
            }
            Self::Stampede { context, source } => write!(f, "{context}: {source}"),
            Self::OutOfOrder { expected, got } => {
                write!(f, "got the item at {got} where {expected} was next")
            }
            Self::GcBehind {
                container,
                resident,
                limit,
                holds,
            } => write!(
                f,
                "garbage collection fell behind: {container} held {resident} items (limit {limit}){}{holds}",
                if holds.is_empty() { "" } else { "; " }
            ),
            Self::ReclaimedEarly { ts } => {
                write!(f, "the item at {ts} was reclaimed before it was consumed")
            }
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Stampede { source, .. } => Some(source),
            _ => None,
        }
    }
}
