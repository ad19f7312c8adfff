//! What channels, queues and registers share: identity, naming, options.

use std::sync::Arc;

use crate::channel::{Channel, ChannelCore};
use crate::ids::ContainerId;
use crate::queue::{Queue, QueueCore};
use crate::register::{Register, RegisterCore};
use crate::time::ZoneId;

/// Options for a new channel, queue or register.
///
/// ```
/// use stampede_core::{ContainerOptions, ZoneId};
/// let opts = ContainerOptions::bounded(30).name("video/frames").zone(ZoneId(1));
/// assert_eq!(opts.capacity, Some(30));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContainerOptions {
    /// Name registered with the runtime's name service, if any.
    pub name: Option<String>,
    /// Maximum number of stored items (`None`: unbounded). Registers ignore it.
    pub capacity: Option<usize>,
    /// Time zone for garbage collection.
    pub zone: ZoneId,
}

impl ContainerOptions {
    /// Unbounded, unnamed, default zone.
    pub fn unbounded() -> Self {
        Self::default()
    }
    /// Holding at most `capacity` items.
    pub fn bounded(capacity: usize) -> Self {
        Self {
            capacity: Some(capacity),
            ..Self::default()
        }
    }
    /// Registers the container under `name`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Places the container in a time zone.
    pub fn zone(mut self, zone: ZoneId) -> Self {
        self.zone = zone;
        self
    }
}

pub(crate) enum Kind {
    Channel(Arc<ChannelCore>),
    Queue(Arc<QueueCore>),
    Register(Arc<RegisterCore>),
}

/// An opaque reference to any container, used by generic code.
pub struct ContainerHandle {
    pub(crate) kind: Kind,
}

impl std::fmt::Debug for ContainerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerHandle")
            .field("id", &self.id())
            .finish()
    }
}

impl ContainerHandle {
    pub(crate) fn id(&self) -> ContainerId {
        match &self.kind {
            Kind::Channel(c) => c.id,
            Kind::Queue(c) => c.id,
            Kind::Register(c) => c.id,
        }
    }
    pub(crate) fn zone(&self) -> ZoneId {
        match &self.kind {
            Kind::Channel(c) => c.zone.id,
            Kind::Queue(c) => c.zone.id,
            Kind::Register(c) => c.zone,
        }
    }
}

mod sealed {
    #![allow(unreachable_pub)]
    pub trait Sealed {}
}
impl sealed::Sealed for Channel {}
impl sealed::Sealed for Queue {}
impl sealed::Sealed for Register {}

/// A channel, queue or register: anything a task can attach to.
pub trait Container: sealed::Sealed + Clone + Send + Sync + 'static {
    /// The runtime-internal reference behind this handle.
    #[doc(hidden)]
    fn handle(&self) -> ContainerHandle;
    /// The container's id.
    fn id(&self) -> ContainerId {
        self.handle().id()
    }
    /// The container's time zone.
    fn zone(&self) -> ZoneId {
        self.handle().zone()
    }
}

impl Container for Channel {
    fn handle(&self) -> ContainerHandle {
        ContainerHandle {
            kind: Kind::Channel(self.core.clone()),
        }
    }
}
impl Container for Queue {
    fn handle(&self) -> ContainerHandle {
        ContainerHandle {
            kind: Kind::Queue(self.core.clone()),
        }
    }
}
impl Container for Register {
    fn handle(&self) -> ContainerHandle {
        ContainerHandle {
            kind: Kind::Register(self.core.clone()),
        }
    }
}

/// A container found by name.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Named {
    /// A channel.
    Channel(Channel),
    /// A queue.
    Queue(Queue),
    /// A register.
    Register(Register),
}
