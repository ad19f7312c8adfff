//! Errors. Each operation has its own error type; a failed put hands its item back.
//!
//! Every situation also has a stable [`ErrorCode`]: the one table that the wire format, the
//! C status codes and the Python exceptions map from, so an error crosses address spaces
//! and languages without losing what it says.

use std::borrow::Cow;
use std::fmt;

use crate::item::Item;
use crate::kind::Kind;
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
    /// The item is larger than the container's owner accepts from another address space
    /// (its quota).
    TooLarge {
        /// The owner's limit, in bytes.
        limit: i64,
    },
}

/// A put that failed; the item is handed back unchanged.
///
/// A put into another address space's channel returns once it is sent; a refusal only
/// its owner can see arrives later and is reported by the connection's next put (which is
/// then not made: [`take_unsent`](Self::take_unsent) hands its own item back) or its next
/// flush. Such an error is [`deferred`](Self::is_deferred), and names the earlier put.
pub struct PutError {
    kind: PutErrorKind,
    ts: Timestamp,
    item: Item,
    deferred: bool,
    unsent: Option<Box<(Timestamp, Item)>>,
}

impl PutError {
    /// A failed put of `item` at `ts` (for layers that forward puts).
    pub fn new(kind: PutErrorKind, ts: Timestamp, item: Item) -> Self {
        Self {
            kind,
            ts,
            item,
            deferred: false,
            unsent: None,
        }
    }
    /// The refusal of a put that had already returned, reported later.
    pub fn deferred(kind: PutErrorKind, ts: Timestamp, item: Item) -> Self {
        Self {
            deferred: true,
            ..Self::new(kind, ts, item)
        }
    }
    /// This error reported by a put of `item` at `ts` that was therefore not made.
    pub fn with_unsent(mut self, ts: Timestamp, item: Item) -> Self {
        self.unsent = Some(Box::new((ts, item)));
        self
    }
    /// Whether this is an earlier put's refusal, reported late (see [`PutError`]).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }
    /// The timestamp and item of the put that reported this deferred error instead of
    /// being made, once.
    pub fn take_unsent(&mut self) -> Option<(Timestamp, Item)> {
        self.unsent.take().map(|b| *b)
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
            .field("deferred", &self.deferred)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for PutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.deferred {
            write!(f, "an earlier ")?;
        }
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
            PutErrorKind::TooLarge { limit } => write!(
                f,
                "put at {ts}: the item is larger than the {limit} bytes the container's owner \
                 accepts from another address space"
            ),
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
    /// A channel accepts at most this many input connections, or an owner this many
    /// connections from one other address space (its quota).
    TooManyConnections(usize),
    /// A zero reference count or other invalid argument; says which.
    InvalidArgument(Cow<'static, str>),
    /// The container's address space left, died, or did not answer in time.
    Unreachable(String),
    /// The operation is not available on this container where it lives (say, a local-only
    /// hook on a container served by another address space); says which.
    Unsupported(Cow<'static, str>),
    /// A name that cannot be used across an application (empty, or containing `*`, `$`, `?`,
    /// `#` or empty parts).
    InvalidName(String),
    /// No container of this name appeared in time.
    NotFound(String),
    /// The name belongs to another kind of container or a service.
    WrongKind {
        /// The name.
        name: String,
        /// What it names.
        is: Kind,
    },
    /// The container's owner does not allow this address space's user `op` on it.
    Denied {
        /// The user the requesting space presented (`anonymous` without credentials).
        user: String,
        /// What was asked.
        op: Permission,
        /// The container's name, or `#id` for an unnamed one.
        container: String,
    },
}

/// What a user may do to a container, as an owner's access rules grant it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Create it (in the owner's space, for another space).
    Create,
    /// Attach an input connection to it, or follow its arrivals and garbage.
    Read,
    /// Attach an output connection to it.
    Write,
    /// Close it.
    Close,
}

impl Permission {
    /// Every permission, in code order.
    pub const ALL: [Permission; 4] = [
        Permission::Create,
        Permission::Read,
        Permission::Write,
        Permission::Close,
    ];

    /// Its name in access rules and messages (`"read"`).
    pub fn name(self) -> &'static str {
        match self {
            Permission::Create => "create",
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Close => "close",
        }
    }

    fn code(self) -> i64 {
        self as i64
    }

    fn from_code(n: i64) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.code() == n)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
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
                write!(
                    f,
                    "too many connections: at most {n} (a channel's input connections, or one \
                     address space's at the container's owner)"
                )
            }
            StmError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            StmError::Unreachable(what) => write!(f, "unreachable: {what}"),
            StmError::Unsupported(what) => write!(f, "not supported: {what}"),
            StmError::InvalidName(n) => write!(
                f,
                "invalid name {n:?}: use non-empty parts separated by '/', without * $ ? #"
            ),
            StmError::NotFound(n) => write!(f, "no container or service named {n:?}"),
            StmError::WrongKind { name, is } => write!(f, "{name:?} is a {is}"),
            StmError::Denied {
                user,
                op,
                container,
            } => write!(
                f,
                "denied: user {user:?} may not {op} container {container:?}"
            ),
        }
    }
}

impl std::error::Error for StmError {}

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $n:literal, $text:literal;)*) => {
        /// The stable code of every failure, shared by every face and the wire format.
        ///
        /// Numbers never change and are never reused; new situations get new numbers. The C
        /// API's `stp_status` values are these numbers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $name = $n,)*
        }

        impl ErrorCode {
            /// Every code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// The code with this number.
            pub fn from_u8(n: u8) -> Option<ErrorCode> {
                match n {
                    $($n => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }

            /// The code's name, in snake case (`"below_visibility"`).
            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $text,)*
                }
            }
        }
    };
}

error_codes! {
    /// An argument the operation cannot take.
    InvalidArgument = 1, "invalid_argument";
    /// A bounded container stayed full.
    Full = 2, "full";
    /// Nothing matched before the timeout.
    Timeout = 3, "timeout";
    /// Nothing matched now (a non-waiting get).
    Unavailable = 4, "unavailable";
    /// The requested item can never appear again.
    Gone = 5, "gone";
    /// The container was closed.
    Closed = 6, "closed";
    /// The connection was detached.
    Detached = 7, "detached";
    /// A channel already holds (or held) an item with this timestamp.
    DuplicateTimestamp = 8, "duplicate_timestamp";
    /// A timestamp or virtual time below the allowed minimum.
    BelowVisibility = 9, "below_visibility";
    /// Another address space left, died or did not answer in time.
    Unreachable = 10, "unreachable";
    /// A name is already registered.
    NameTaken = 11, "name_taken";
    /// No container or service of this name appeared in time.
    NotFound = 12, "not_found";
    /// The name belongs to another kind of container.
    WrongKind = 13, "wrong_kind";
    /// A name that cannot be used.
    InvalidName = 14, "invalid_name";
    /// An invalid configuration.
    Config = 15, "config";
    /// No router or peer could be reached.
    Connect = 16, "connect";
    /// The credentials or certificate were rejected.
    AuthRejected = 17, "auth_rejected";
    /// A malformed message.
    Protocol = 18, "protocol";
    /// An item of another type than the one asked for.
    WrongType = 19, "wrong_type";
    /// The task has exited.
    TaskExited = 20, "task_exited";
    /// An output connection to a container of another time zone.
    ZoneMismatch = 21, "zone_mismatch";
    /// A channel accepts no more input connections.
    TooManyConnections = 22, "too_many_connections";
    /// No item with this ticket is held on the connection.
    UnknownTicket = 23, "unknown_ticket";
    /// `INFINITY` used as an item's timestamp.
    InvalidTimestamp = 24, "invalid_timestamp";
    /// A reference count of zero consumers.
    ZeroConsumers = 25, "zero_consumers";
    /// The caller's interrupt check stopped a waiting operation.
    Interrupted = 26, "interrupted";
    /// The operation is not available on this container where it lives.
    Unsupported = 27, "unsupported";
    /// A cluster task ended by failing or panicking.
    TaskFailed = 28, "task_failed";
    /// A cluster task was cancelled, or a wait gave up because its task was.
    Cancelled = 29, "cancelled";
    /// The container's owner does not allow this user the operation.
    Denied = 30, "denied";
    /// An item larger than the container's owner accepts from another address space.
    TooLarge = 31, "too_large";
    /// A failure inside the runtime or at a language boundary.
    Internal = 99, "internal";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Two figures an error carries besides its code and text (a timestamp, a ticket, the
/// neighbours of a failed get); `i64::MIN` stands for "none" in neighbours.
pub type Figures = (i64, i64);

fn neighbors_to_figures(n: Neighbors) -> Figures {
    (n.below.unwrap_or(i64::MIN), n.above.unwrap_or(i64::MIN))
}

fn figures_to_neighbors((a, b): Figures) -> Neighbors {
    Neighbors {
        below: (a != i64::MIN).then_some(a),
        above: (b != i64::MIN).then_some(b),
    }
}

impl PutErrorKind {
    /// The stable code and the figure it carries (the visibility, for `BelowVisibility`).
    pub fn code(&self) -> (ErrorCode, i64) {
        match *self {
            PutErrorKind::Full => (ErrorCode::Full, 0),
            PutErrorKind::DuplicateTimestamp => (ErrorCode::DuplicateTimestamp, 0),
            PutErrorKind::BelowVisibility { visibility } => {
                (ErrorCode::BelowVisibility, visibility)
            }
            PutErrorKind::InvalidTimestamp => (ErrorCode::InvalidTimestamp, 0),
            PutErrorKind::ZeroConsumers => (ErrorCode::ZeroConsumers, 0),
            PutErrorKind::Closed => (ErrorCode::Closed, 0),
            PutErrorKind::Detached => (ErrorCode::Detached, 0),
            PutErrorKind::Unreachable => (ErrorCode::Unreachable, 0),
            PutErrorKind::Interrupted => (ErrorCode::Interrupted, 0),
            PutErrorKind::TooLarge { limit } => (ErrorCode::TooLarge, limit),
        }
    }

    /// The kind a code and figure stand for; `None` for a code no put fails with.
    pub fn from_code(code: ErrorCode, a: i64) -> Option<PutErrorKind> {
        Some(match code {
            ErrorCode::Full => PutErrorKind::Full,
            ErrorCode::DuplicateTimestamp => PutErrorKind::DuplicateTimestamp,
            ErrorCode::BelowVisibility => PutErrorKind::BelowVisibility { visibility: a },
            ErrorCode::InvalidTimestamp => PutErrorKind::InvalidTimestamp,
            ErrorCode::ZeroConsumers => PutErrorKind::ZeroConsumers,
            ErrorCode::Closed => PutErrorKind::Closed,
            ErrorCode::Detached => PutErrorKind::Detached,
            ErrorCode::Unreachable => PutErrorKind::Unreachable,
            ErrorCode::Interrupted => PutErrorKind::Interrupted,
            ErrorCode::TooLarge => PutErrorKind::TooLarge { limit: a },
            _ => return None,
        })
    }
}

impl GetError {
    /// The stable code and the figures it carries (neighbours, or the gone timestamp).
    ///
    /// ```
    /// use stampede_core::{GetError, Neighbors};
    /// for e in [
    ///     GetError::Timeout(Neighbors { below: Some(3), above: None }),
    ///     GetError::Gone(7),
    ///     GetError::Closed,
    /// ] {
    ///     let (code, figures) = e.code();
    ///     assert_eq!(GetError::from_code(code, figures), Some(e));
    /// }
    /// ```
    pub fn code(&self) -> (ErrorCode, Figures) {
        match *self {
            GetError::Unavailable(n) => (ErrorCode::Unavailable, neighbors_to_figures(n)),
            GetError::Timeout(n) => (ErrorCode::Timeout, neighbors_to_figures(n)),
            GetError::Gone(ts) => (ErrorCode::Gone, (ts, 0)),
            GetError::Closed => (ErrorCode::Closed, (0, 0)),
            GetError::Detached => (ErrorCode::Detached, (0, 0)),
            GetError::Unreachable => (ErrorCode::Unreachable, (0, 0)),
        }
    }

    /// The error a code and figures stand for; `None` for a code no get fails with.
    pub fn from_code(code: ErrorCode, figures: Figures) -> Option<GetError> {
        Some(match code {
            ErrorCode::Unavailable => GetError::Unavailable(figures_to_neighbors(figures)),
            ErrorCode::Timeout => GetError::Timeout(figures_to_neighbors(figures)),
            ErrorCode::Gone => GetError::Gone(figures.0),
            ErrorCode::Closed => GetError::Closed,
            ErrorCode::Detached => GetError::Detached,
            ErrorCode::Unreachable => GetError::Unreachable,
            _ => return None,
        })
    }
}

impl StmError {
    /// The stable code and the figures it carries.
    pub fn code(&self) -> (ErrorCode, Figures) {
        match self {
            StmError::BelowVisibility {
                requested,
                visibility,
            } => (ErrorCode::BelowVisibility, (*visibility, *requested)),
            StmError::ZoneMismatch { task, container } => (
                ErrorCode::ZoneMismatch,
                (i64::from(task.0), i64::from(container.0)),
            ),
            StmError::Detached => (ErrorCode::Detached, (0, 0)),
            StmError::TaskExited => (ErrorCode::TaskExited, (0, 0)),
            StmError::UnknownTicket(t) => (ErrorCode::UnknownTicket, (*t as i64, 0)),
            StmError::Closed => (ErrorCode::Closed, (0, 0)),
            StmError::NameTaken(_) => (ErrorCode::NameTaken, (0, 0)),
            StmError::TooManyConnections(n) => (ErrorCode::TooManyConnections, (*n as i64, 0)),
            StmError::InvalidArgument(_) => (ErrorCode::InvalidArgument, (0, 0)),
            StmError::Unreachable(_) => (ErrorCode::Unreachable, (0, 0)),
            StmError::Unsupported(_) => (ErrorCode::Unsupported, (0, 0)),
            StmError::InvalidName(_) => (ErrorCode::InvalidName, (0, 0)),
            StmError::NotFound(_) => (ErrorCode::NotFound, (0, 0)),
            StmError::WrongKind { is, .. } => (ErrorCode::WrongKind, (i64::from(is.code()), 0)),
            StmError::Denied { op, .. } => (ErrorCode::Denied, (op.code(), 0)),
        }
    }

    /// The error a code, figures and `detail` stand for (`detail` is the name or the
    /// argument's description where the error carries one); `None` for a code none of the
    /// operations without items fails with.
    ///
    /// ```
    /// use stampede_core::StmError;
    /// let e = StmError::InvalidArgument("capacity must be at least 1".into());
    /// let (code, figures) = e.code();
    /// assert_eq!(StmError::from_code(code, figures, "capacity must be at least 1"), Some(e));
    /// ```
    pub fn from_code(code: ErrorCode, (a, b): Figures, detail: &str) -> Option<StmError> {
        Some(match code {
            ErrorCode::BelowVisibility => StmError::BelowVisibility {
                requested: b,
                visibility: a,
            },
            ErrorCode::ZoneMismatch => StmError::ZoneMismatch {
                task: ZoneId(a as u32),
                container: ZoneId(b as u32),
            },
            ErrorCode::Detached => StmError::Detached,
            ErrorCode::TaskExited => StmError::TaskExited,
            ErrorCode::UnknownTicket => StmError::UnknownTicket(a as u64),
            ErrorCode::Closed => StmError::Closed,
            ErrorCode::NameTaken => StmError::NameTaken(detail.to_owned()),
            ErrorCode::TooManyConnections => StmError::TooManyConnections(a as usize),
            ErrorCode::InvalidArgument => StmError::InvalidArgument(detail.to_owned().into()),
            ErrorCode::Unreachable => StmError::Unreachable(detail.to_owned()),
            ErrorCode::Unsupported => StmError::Unsupported(detail.to_owned().into()),
            ErrorCode::InvalidName => StmError::InvalidName(detail.to_owned()),
            ErrorCode::NotFound => StmError::NotFound(detail.to_owned()),
            ErrorCode::WrongKind => StmError::WrongKind {
                name: detail.to_owned(),
                is: u8::try_from(a).ok().and_then(Kind::from_code)?,
            },
            // A user name has no '/' (it is a key chunk): the container's name follows it.
            ErrorCode::Denied => {
                let (user, container) = detail.split_once('/')?;
                StmError::Denied {
                    user: user.to_owned(),
                    op: Permission::from_code(a)?,
                    container: container.to_owned(),
                }
            }
            _ => return None,
        })
    }

    /// The name or description the error carries, for [`from_code`](Self::from_code).
    pub fn detail(&self) -> Cow<'_, str> {
        match self {
            StmError::NameTaken(s) | StmError::Unreachable(s) => s.into(),
            StmError::InvalidArgument(s) | StmError::Unsupported(s) => s.as_ref().into(),
            StmError::InvalidName(s) | StmError::NotFound(s) => s.into(),
            StmError::WrongKind { name, .. } => name.into(),
            StmError::Denied {
                user, container, ..
            } => format!("{user}/{container}").into(),
            _ => "".into(),
        }
    }
}
