use std::fmt;
use std::io;
use std::time::Duration;

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
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
