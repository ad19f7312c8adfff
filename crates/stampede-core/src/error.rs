//! Errors. Each operation has its own error type; a failed put hands its item back.

use std::fmt;

use crate::item::Item;
use crate::time::{fmt_ts, Timestamp, ZoneId};

/// Why a put could not store its item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PutErrorKind {
    /// The bounded container stayed full (non-blocking put, or the timeout passed).
    Full,
    /// A channel already holds (or held) an item with this timestamp.
    DuplicateTimestamp,
    /// The timestamp is below the putting task's visibility (virtual-time rule 1).
    BelowVisibility {
        /// The task's visibility when the put was attempted.
        visibility: Timestamp,
    },
    /// `INFINITY` is never an item's timestamp.
    InvalidTimestamp,
    /// A reference count of zero consumers.
    ZeroConsumers,
    /// The container was closed.
    Closed,
    /// The connection was detached, or its task exited.
    Detached,
    /// The container's address space left, died, or did not answer in time; the put may not
    /// have been stored.
    Unreachable,
    /// The caller's interrupt check asked the waiting put to stop (see
    /// [`OutputConnection::put_interruptible`](crate::OutputConnection::put_interruptible)).
    Interrupted,
}

/// A put that failed; the item is handed back unchanged.
pub struct PutError {
    kind: PutErrorKind,
    ts: Timestamp,
    item: Item,
}

impl PutError {
    /// A failed put of `item` at `ts` (for layers that forward puts).
    pub fn new(kind: PutErrorKind, ts: Timestamp, item: Item) -> Self {
        Self { kind, ts, item }
    }
    /// The timestamp of the failed put.
    pub fn ts(&self) -> Timestamp {
        self.ts
    }
    /// What went wrong.
    pub fn kind(&self) -> PutErrorKind {
        self.kind
    }
    /// The timestamp of the rejected put.
    pub fn timestamp(&self) -> Timestamp {
        self.ts
    }
    /// Takes the item back.
    pub fn into_item(self) -> Item {
        self.item
    }
    /// Whether the container was full.
    pub fn is_full(&self) -> bool {
        self.kind == PutErrorKind::Full
    }
}

impl fmt::Debug for PutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PutError")
            .field("kind", &self.kind)
            .field("ts", &self.ts)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for PutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ts = fmt_ts(self.ts);
        match self.kind {
            PutErrorKind::Full => write!(f, "put at {ts}: container is full"),
            PutErrorKind::DuplicateTimestamp => {
                write!(
                    f,
                    "put at {ts}: the channel already has an item with this timestamp"
                )
            }
            PutErrorKind::BelowVisibility { visibility } => write!(
                f,
                "put at {ts}: below the task's visibility {}",
                fmt_ts(visibility)
            ),
            PutErrorKind::InvalidTimestamp => write!(f, "put at {ts}: INFINITY is not a timestamp"),
            PutErrorKind::ZeroConsumers => {
                write!(f, "put at {ts}: a reference count must be at least 1")
            }
            PutErrorKind::Closed => write!(f, "put at {ts}: container is closed"),
            PutErrorKind::Detached => write!(f, "put at {ts}: connection is detached"),
            PutErrorKind::Unreachable => write!(
                f,
                "put at {ts}: the container's address space is unreachable (left, died or timed out)"
            ),
            PutErrorKind::Interrupted => write!(f, "put at {ts}: interrupted while waiting"),
        }
    }
}

impl std::error::Error for PutError {}

/// The timestamps of the available items nearest to a request that could not be met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Neighbors {
    /// The nearest available timestamp below the request, if any.
    pub below: Option<Timestamp>,
    /// The nearest available timestamp above the request, if any.
    pub above: Option<Timestamp>,
}

/// Why a get returned no item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GetError {
    /// Nothing matched now (non-blocking get); the neighbouring available timestamps.
    Unavailable(Neighbors),
    /// Nothing matched before the timeout; the neighbouring available timestamps.
    Timeout(Neighbors),
    /// The requested timestamp can never appear again: it is below the watermark, was
    /// consumed on this connection, or was reclaimed by its reference count.
    Gone(Timestamp),
    /// The container was closed and holds nothing more for this connection.
    Closed,
    /// The connection was detached, or its task exited.
    Detached,
    /// The container's address space left, died, or did not answer in time.
    Unreachable,
}

impl fmt::Display for GetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nb = |n: &Neighbors| {
            format!(
                "nearest below: {}, above: {}",
                n.below.map_or("none".into(), fmt_ts),
                n.above.map_or("none".into(), fmt_ts)
            )
        };
        match self {
            GetError::Unavailable(n) => write!(f, "no matching item ({})", nb(n)),
            GetError::Timeout(n) => write!(f, "timed out waiting for an item ({})", nb(n)),
            GetError::Gone(ts) => write!(f, "item {} can never appear again", fmt_ts(*ts)),
            GetError::Closed => f.write_str("container is closed"),
            GetError::Detached => f.write_str("connection is detached"),
            GetError::Unreachable => f.write_str(
                "the container's address space is unreachable (left, died or timed out)",
            ),
        }
    }
}

impl std::error::Error for GetError {}

/// Errors of the operations that move no item: attach, consume, virtual time, spawn, naming.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StmError {
    /// A virtual time below the task's visibility (rules 2 and 4) or the zone's watermark.
    BelowVisibility {
        /// The virtual time asked for.
        requested: Timestamp,
        /// The lowest virtual time allowed.
        visibility: Timestamp,
    },
    /// An output connection to a container of another time zone.
    ZoneMismatch {
        /// The task's zone.
        task: ZoneId,
        /// The container's zone.
        container: ZoneId,
    },
    /// The connection was detached, or its task exited.
    Detached,
    /// The task has exited.
    TaskExited,
    /// No item with this ticket is held on this connection.
    UnknownTicket(u64),
    /// The container was closed.
    Closed,
    /// A container with this name is already registered.
    NameTaken(String),
    /// A channel accepts at most this many input connections.
    TooManyConnections(usize),
    /// A zero reference count or other invalid argument.
    InvalidArgument(&'static str),
    /// The container's address space left, died, or did not answer in time.
    Unreachable(String),
}

impl fmt::Display for StmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StmError::BelowVisibility {
                requested,
                visibility,
            } => write!(
                f,
                "virtual time {} is below the allowed minimum {}",
                fmt_ts(*requested),
                fmt_ts(*visibility)
            ),
            StmError::ZoneMismatch { task, container } => write!(
                f,
                "a task in {task} cannot put into a container in {container}"
            ),
            StmError::Detached => f.write_str("connection is detached"),
            StmError::TaskExited => f.write_str("task has exited"),
            StmError::UnknownTicket(t) => write!(f, "no item with ticket {t} is held here"),
            StmError::Closed => f.write_str("container is closed"),
            StmError::NameTaken(n) => write!(f, "name {n:?} is already registered"),
            StmError::TooManyConnections(n) => {
                write!(f, "a channel accepts at most {n} input connections")
            }
            StmError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            StmError::Unreachable(what) => write!(f, "unreachable: {what}"),
        }
    }
}

impl std::error::Error for StmError {}
