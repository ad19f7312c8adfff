//! What each live task is doing, for observability: its times, how long it has waited, and
//! its connections with the operations done through each. Read on demand; the operations
//! count is one relaxed increment per successful operation, in the connection itself.

use std::time::Duration;

use crate::ids::TaskId;
use crate::kind::Kind;
use crate::sync::{AtomicU64, Ordering};
use crate::time::{Timestamp, ZoneId};

/// Which way a connection moves items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Gets (or reads) from the container.
    Input,
    /// Puts (or writes) into the container.
    Output,
}

impl Direction {
    /// `"input"` or `"output"`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Input => "input",
            Direction::Output => "output",
        }
    }
}

/// One of a task's connections: [`TaskReport::connections`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionReport {
    /// The container's name, if it has one.
    pub container: Option<String>,
    /// The container's kind.
    pub kind: Kind,
    /// The address space serving the container, or `None` when it lives here.
    pub owner: Option<String>,
    /// Which way items move.
    pub direction: Direction,
    /// Successful operations through it: puts, gets, writes or reads.
    pub operations: u64,
}

/// A live task: [`Runtime::tasks`](crate::Runtime::tasks).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskReport {
    /// The task's id.
    pub id: TaskId,
    /// The task's name.
    pub name: String,
    /// Its zone.
    pub zone: ZoneId,
    /// Its virtual time.
    pub virtual_time: Timestamp,
    /// The lowest timestamp it may put now.
    pub visibility: Timestamp,
    /// Time spent waiting: parked in this address space's channels and queues for an item
    /// or for space (spinning before parking is not counted), and the whole of each waiting
    /// get from a container another address space serves.
    pub blocked: Duration,
    /// Its connections now.
    pub connections: Vec<ConnectionReport>,
}

/// A connection's identity and operation count, shared by the connection (which counts) and
/// its task (which reports).
#[derive(Debug)]
pub(crate) struct Link {
    container: Option<String>,
    kind: Kind,
    owner: Option<String>,
    direction: Direction,
    ops: AtomicU64,
}

impl Link {
    pub(crate) fn new(
        container: Option<&str>,
        kind: Kind,
        owner: Option<&str>,
        direction: Direction,
    ) -> Link {
        Link {
            container: container.map(str::to_owned),
            kind,
            owner: owner.map(str::to_owned),
            direction,
            ops: AtomicU64::new(0),
        }
    }

    /// Counts one successful operation.
    pub(crate) fn count(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn report(&self) -> ConnectionReport {
        ConnectionReport {
            container: self.container.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            direction: self.direction,
            operations: self.ops.load(Ordering::Relaxed),
        }
    }
}
