//! What channels, queues and registers share: identity, naming, options.

use std::sync::Arc;

use crate::channel::{Channel, ChannelCore};
use crate::error::StmError;
use crate::ids::{ConnId, ContainerId};
use crate::kind::Kind;
use crate::notify::{Arrivals, Callback, GarbageHandler, Hooked, StreamShared, SubscriptionId};
use crate::provider;
use crate::queue::{Queue, QueueCore};
use crate::register::{Register, RegisterCore};
use crate::task::{Detach, TaskInner};
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
    /// Free text published with the name across a distributed application (what a
    /// service or stream is, say); empty by default.
    pub meta: String,
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
    /// Publishes `meta` with the container's name.
    pub fn meta(mut self, meta: impl Into<String>) -> Self {
        self.meta = meta.into();
        self
    }
}

/// Where a container lives: here (statically dispatched, no virtual call on a put or get),
/// or served by a provider (another address space, or a future kind) behind
/// [`provider::Backend`].
#[allow(unreachable_pub, missing_debug_implementations)] // named only by the sealed `Container` trait
pub enum Flavor<L> {
    Local(Arc<L>),
    Provided(Arc<dyn provider::Backend>),
}

impl<L> Clone for Flavor<L> {
    fn clone(&self) -> Self {
        match self {
            Flavor::Local(l) => Flavor::Local(l.clone()),
            Flavor::Provided(b) => Flavor::Provided(b.clone()),
        }
    }
}

/// What the core needs of a container kind that lives here: identity, and attaching and
/// detaching input connections.
#[allow(unreachable_pub, missing_debug_implementations)]
pub trait LocalContainer: Detach + Send + Sync + 'static {
    fn id(&self) -> ContainerId;
    fn zone(&self) -> ZoneId;
    fn name(&self) -> Option<&str>;
    fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError>;
}

impl<L: LocalContainer> Flavor<L> {
    pub(crate) fn id(&self) -> ContainerId {
        match self {
            Flavor::Local(l) => l.id(),
            Flavor::Provided(b) => b.id(),
        }
    }
    pub(crate) fn zone(&self) -> ZoneId {
        match self {
            Flavor::Local(l) => l.zone(),
            Flavor::Provided(b) => b.zone(),
        }
    }
    pub(crate) fn name(&self) -> Option<&str> {
        match self {
            Flavor::Local(l) => l.name(),
            Flavor::Provided(b) => b.name(),
        }
    }
    pub(crate) fn owner(&self) -> Option<&str> {
        match self {
            Flavor::Local(_) => None,
            Flavor::Provided(b) => Some(b.owner()),
        }
    }
    pub(crate) fn debug(&self, kind: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct(kind);
        d.field("id", &self.id()).field("name", &self.name());
        if let Some(o) = self.owner() {
            d.field("owner", &o);
        }
        d.finish()
    }
}

/// The arrival and garbage hooks of channels and queues, written once for both flavors.
#[allow(private_bounds)] // `Flavor` is public only to name it in the sealed trait
impl<L: Hooked> Flavor<L> {
    pub(crate) fn on_garbage(&self, h: GarbageHandler) -> Result<(), StmError> {
        match self {
            Flavor::Local(c) => c.hooks(|hooks, _| hooks.set_garbage(h)),
            Flavor::Provided(b) => return b.on_garbage(h),
        }
        Ok(())
    }

    pub(crate) fn on_arrival(&self, f: Callback) -> Result<SubscriptionId, StmError> {
        match self {
            Flavor::Local(c) => Ok(c.hooks(|hooks, _| hooks.subscribers.add_callback(f))),
            Flavor::Provided(b) => b.on_arrival(f).map(SubscriptionId),
        }
    }

    pub(crate) fn arrivals(&self, capacity: usize) -> Result<Arrivals, StmError> {
        match self {
            Flavor::Local(c) => Ok(c.hooks(|hooks, closed| {
                let (_, shared) = hooks.subscribers.add_stream(capacity);
                if closed {
                    hooks.subscribers.close_all();
                }
                Arrivals {
                    shared,
                    cancel: None,
                }
            })),
            Flavor::Provided(b) => {
                let shared = StreamShared::new(capacity);
                let sink = shared.clone();
                let id = b.on_arrival(Arc::new(move |ts| sink.push(ts)))?;
                let b = b.clone();
                Ok(Arrivals {
                    shared,
                    cancel: Some(Box::new(move || {
                        b.unsubscribe(id);
                    })),
                })
            }
        }
    }

    pub(crate) fn unsubscribe(&self, id: SubscriptionId) -> bool {
        match self {
            Flavor::Local(c) => c.hooks(|hooks, _| hooks.subscribers.remove(id)),
            Flavor::Provided(b) => b.unsubscribe(id.0),
        }
    }
}

pub(crate) mod sealed {
    #![allow(unreachable_pub)]
    use super::{Flavor, LocalContainer};

    pub trait Sealed {
        type Local: LocalContainer;
        /// The kind, for reports.
        const KIND: crate::kind::Kind;
        /// Whether the kind is under garbage collection, so a put in flight holds the
        /// watermark (not registers).
        const HOLDS: bool = true;
        fn flavor(&self) -> &Flavor<Self::Local>;
    }
}

impl sealed::Sealed for Channel {
    type Local = ChannelCore;
    const KIND: crate::kind::Kind = crate::kind::Kind::Channel;
    fn flavor(&self) -> &Flavor<ChannelCore> {
        &self.flavor
    }
}
impl sealed::Sealed for Queue {
    type Local = QueueCore;
    const KIND: crate::kind::Kind = crate::kind::Kind::Queue;
    fn flavor(&self) -> &Flavor<QueueCore> {
        &self.flavor
    }
}
impl sealed::Sealed for Register {
    type Local = RegisterCore;
    const KIND: crate::kind::Kind = crate::kind::Kind::Register;
    const HOLDS: bool = false;
    fn flavor(&self) -> &Flavor<RegisterCore> {
        &self.flavor
    }
}

/// A channel, queue or register: anything a task can attach to, here or in another address
/// space.
pub trait Container: sealed::Sealed + Clone + Send + Sync + 'static {
    /// The container's id (in its owner's numbering when another address space serves it).
    fn id(&self) -> ContainerId {
        self.flavor().id()
    }
    /// The container's time zone.
    fn zone(&self) -> ZoneId {
        self.flavor().zone()
    }
    /// The address space serving the container, or `None` when it lives here.
    fn owner(&self) -> Option<&str> {
        self.flavor().owner()
    }
    /// Whether the container lives in this address space.
    fn is_local(&self) -> bool {
        matches!(self.flavor(), Flavor::Local(_))
    }
    /// Closes the container wherever it lives (see each kind's `close`).
    fn close(&self) -> Result<(), StmError>;
}

impl Container for Channel {
    fn close(&self) -> Result<(), StmError> {
        Channel::close(self)
    }
}
impl Container for Queue {
    fn close(&self) -> Result<(), StmError> {
        Queue::close(self)
    }
}
impl Container for Register {
    fn close(&self) -> Result<(), StmError> {
        Register::close(self)
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

impl Named {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Named::Channel(_) => Kind::Channel,
            Named::Queue(_) => Kind::Queue,
            Named::Register(_) => Kind::Register,
        }
    }
    /// The container's id.
    pub fn id(&self) -> ContainerId {
        match self {
            Named::Channel(c) => c.id(),
            Named::Queue(c) => c.id(),
            Named::Register(c) => c.id(),
        }
    }
    /// The container's zone.
    pub fn zone(&self) -> ZoneId {
        match self {
            Named::Channel(c) => c.zone(),
            Named::Queue(c) => c.zone(),
            Named::Register(c) => c.zone(),
        }
    }
    /// The container's capacity, if bounded.
    pub fn capacity(&self) -> Option<usize> {
        match self {
            Named::Channel(c) => c.capacity(),
            Named::Queue(c) => c.capacity(),
            Named::Register(_) => None,
        }
    }
    /// Closes the container wherever it lives.
    pub fn close(&self) -> Result<(), StmError> {
        match self {
            Named::Channel(c) => c.close(),
            Named::Queue(c) => c.close(),
            Named::Register(c) => c.close(),
        }
    }
}
