//! Input and output connections: every operation on a container goes through one.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::channel::{Channel, Selector};
use crate::container::Container;
use crate::error::{GetError, PutError, PutErrorKind, StmError};
use crate::ids::ConnId;
use crate::item::{DType, Item};
use crate::loan::Loan;
use crate::provider::{Consume, Linked};
use crate::queue::{Queue, QueueItem};
use crate::register::Register;
use crate::report::{Direction, Link};
use crate::task::{Detach, TaskInner};
use crate::time::Timestamp;
use crate::wait::Wait;

/// A connection's way to its container: the container's own state, or the link to where it
/// is served.
pub(crate) enum Via<L> {
    Local(Arc<L>),
    Provided(Arc<Linked>),
}

/// A task's attachment to a container for getting. Dropping it detaches.
pub struct InputConnection<C: Container> {
    container: C,
    via: Via<C::Local>,
    task: Arc<TaskInner>,
    id: ConnId,
    link: Arc<Link>,
}

/// A task's attachment to a container for putting.
pub struct OutputConnection<C: Container> {
    container: C,
    via: Via<C::Local>,
    task: Arc<TaskInner>,
    id: ConnId,
    link: Arc<Link>,
}

impl<C: Container> fmt::Debug for InputConnection<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputConnection")
            .field("id", &self.id)
            .field("container", &self.container.id())
            .field("task", &self.task.id)
            .finish()
    }
}

impl<C: Container> fmt::Debug for OutputConnection<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputConnection")
            .field("id", &self.id)
            .field("container", &self.container.id())
            .field("task", &self.task.id)
            .finish()
    }
}

impl<C: Container> InputConnection<C> {
    pub(crate) fn new(container: C, via: Via<C::Local>, task: Arc<TaskInner>, id: ConnId) -> Self {
        let flavor = container.flavor();
        let link = Arc::new(Link::new(
            flavor.name(),
            C::KIND,
            flavor.owner(),
            Direction::Input,
        ));
        task.add_link(link.clone());
        Self {
            container,
            via,
            task,
            id,
            link,
        }
    }
    /// The connection's id.
    pub fn id(&self) -> ConnId {
        self.id
    }
    /// The container.
    pub fn container(&self) -> &C {
        &self.container
    }
    /// Detaches: open items close, and this connection no longer holds the watermark.
    pub fn detach(self) {}
}

impl<C: Container> Drop for InputConnection<C> {
    fn drop(&mut self) {
        self.task.remove_link(&self.link);
        match &self.via {
            Via::Local(l) => {
                l.detach(self.id, &self.task);
                self.task.unregister_conn(self.id);
            }
            Via::Provided(l) => l.drop_conn(self.id),
        }
    }
}

impl<C: Container> OutputConnection<C> {
    pub(crate) fn new(container: C, via: Via<C::Local>, task: Arc<TaskInner>, id: ConnId) -> Self {
        let flavor = container.flavor();
        let link = Arc::new(Link::new(
            flavor.name(),
            C::KIND,
            flavor.owner(),
            Direction::Output,
        ));
        task.add_link(link.clone());
        Self {
            container,
            via,
            task,
            id,
            link,
        }
    }
    /// The connection's id.
    pub fn id(&self) -> ConnId {
        self.id
    }
    /// The container.
    pub fn container(&self) -> &C {
        &self.container
    }
    /// Detaches the connection.
    pub fn detach(self) {}
}

impl<C: Container> Drop for OutputConnection<C> {
    fn drop(&mut self) {
        self.task.remove_link(&self.link);
        if let Via::Provided(l) = &self.via {
            l.drop_conn(self.id);
        }
    }
}

/// Runs a get from another address space, counting its whole time as the task's blocked
/// time when it may wait (the owner parks it there, out of this task's sight).
fn waiting<T>(task: &TaskInner, wait: Wait, get: impl FnOnce() -> T) -> T {
    if wait == Wait::Never {
        return get();
    }
    let start = Instant::now();
    let got = get();
    task.add_blocked(start);
    got
}

/// Options of a channel put beyond its timestamp and item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PutOptions {
    /// Reclaim the item as soon as this many connections consumed it.
    pub consumers: Option<u32>,
    /// Whether to wait for space in a full bounded channel.
    pub wait: Wait,
    /// Return only once the item is stored. A put into another address space's channel
    /// otherwise returns once sent, and a refusal only the owner can see comes later (see
    /// [`PutError`]); a local put always returns stored.
    pub sync: bool,
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            consumers: None,
            wait: Wait::Forever,
            sync: false,
        }
    }
}

impl PutOptions {
    /// Reclaim after `n` consumes.
    pub fn consumers(mut self, n: u32) -> Self {
        self.consumers = Some(n);
        self
    }
    /// How long to wait for space.
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }
    /// Whether to return only once the item is stored (see [`PutOptions::sync`]).
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }
}

impl OutputConnection<Channel> {
    /// Puts `item` at `ts`, waiting for space if the channel is bounded and full.
    pub fn put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default())
    }

    /// Puts, returning only once the item is stored: a refusal only the owner of a remote
    /// channel can see fails this call rather than a later one.
    pub fn put_sync(&self, ts: Timestamp, item: impl Into<Item>) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default().sync(true))
    }

    /// Lends `len` zeroed bytes to fill in place and put as a raw-bytes item (see [`Loan`]):
    /// for a channel of another address space on this host, shared memory, so the put
    /// copies nothing; otherwise plain memory.
    pub fn loan(&self, len: usize) -> Result<Loan, StmError> {
        Ok(Loan::bytes(self.lend(len)))
    }

    /// Lends an array of `dtype` and `shape` to fill in place and put (see [`Loan`]).
    pub fn loan_array(&self, dtype: DType, shape: &[usize]) -> Result<Loan, StmError> {
        let len = Loan::array_len(dtype, shape)
            .ok_or_else(|| StmError::InvalidArgument("the array is too large".into()))?;
        Ok(Loan::array(self.lend(len), dtype, shape))
    }

    fn lend(&self, len: usize) -> Box<dyn crate::loan::LoanBuffer> {
        match &self.via {
            Via::Local(_) => Loan::heap_buffer(len),
            Via::Provided(l) => l.lend(len).unwrap_or_else(|| Loan::heap_buffer(len)),
        }
    }

    /// Waits until every put made on this connection is stored or refused, and reports a
    /// refusal not reported yet ([`PutError::is_deferred`]). Puts into a local channel are
    /// stored when they return, so there is nothing to wait for.
    pub fn flush(&self) -> Result<(), PutError> {
        match &self.via {
            Via::Local(_) => Ok(()),
            Via::Provided(l) => l.flush(),
        }
    }

    /// Puts without waiting; a full channel gives [`PutErrorKind::Full`](crate::PutErrorKind::Full).
    pub fn try_put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default().wait(Wait::Never))
    }

    /// Puts, waiting at most `timeout` for space.
    pub fn put_timeout(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        timeout: Duration,
    ) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default().wait(Wait::For(timeout)))
    }

    /// Puts with a reference count and wait mode.
    ///
    /// ```
    /// use stampede_core::{ContainerOptions, PutOptions, Runtime, Selector, INFINITY};
    /// let rt = Runtime::builder().gc_interval(None).build();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// let (p, c) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    /// let (out, input) = (p.attach_output(&ch).unwrap(), c.attach_input(&ch).unwrap());
    /// out.put_with(0, "once", PutOptions::default().consumers(1)).unwrap();
    /// input.get(Selector::Exact(0)).unwrap();
    /// input.consume(0).unwrap();
    /// assert!(ch.is_empty()); // reclaimed at once, though the producer's vt is still 0
    /// ```
    pub fn put_with(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        opts: PutOptions,
    ) -> Result<(), PutError> {
        self.put_inner(ts, item.into(), opts, None)
    }

    fn put_inner(
        &self,
        ts: Timestamp,
        item: Item,
        opts: PutOptions,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<(), PutError> {
        match &self.via {
            Via::Local(c) => c.put(&self.task, ts, item, opts.consumers, opts.wait, interrupted),
            Via::Provided(l) => l
                .put(ts, item, opts.consumers, opts.wait, opts.sync, interrupted)
                .map(drop),
        }
        .inspect(|_| self.link.count())
    }

    /// Puts like [`put_with`](Self::put_with), asking `interrupted` (with no lock held)
    /// every 50 ms or so while the put waits for space; when it returns true the put gives
    /// up with [`PutErrorKind::Interrupted`](crate::PutErrorKind::Interrupted) and hands the
    /// item back. Until then the put stays one waiting put: it keeps holding the watermark at
    /// `ts` and its place among the puts waiting for space. Language bindings pass their
    /// pending-signal check (Python's Ctrl-C).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use stampede_core::{ContainerOptions, PutErrorKind, PutOptions, Runtime};
    /// let rt = Runtime::new();
    /// let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    /// let t = rt.task(0).unwrap();
    /// let out = t.attach_output(&ch).unwrap();
    /// out.put(0, "a").unwrap(); // full now, and the task's virtual time keeps it
    /// let stop = Instant::now() + Duration::from_millis(100);
    /// let e = out
    ///     .put_interruptible(1, "b", PutOptions::default(), &|| Instant::now() >= stop)
    ///     .unwrap_err();
    /// assert_eq!(e.kind(), PutErrorKind::Interrupted);
    /// assert_eq!(e.into_item().as_str(), Some("b"));
    /// ```
    pub fn put_interruptible(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        opts: PutOptions,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), PutError> {
        self.put_inner(ts, item.into(), opts, Some(interrupted))
    }
}

impl OutputConnection<Queue> {
    /// Puts `item` at `ts`, waiting for space if the queue is bounded and full; returns the
    /// item's ticket.
    pub fn put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::Forever)
    }
    /// Puts without waiting.
    pub fn try_put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::Never)
    }
    /// Puts, waiting at most `timeout` for space.
    pub fn put_timeout(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        timeout: Duration,
    ) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::For(timeout))
    }
    /// Puts with an explicit wait mode.
    pub fn put_with(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        wait: Wait,
    ) -> Result<u64, PutError> {
        self.put_inner(ts, item.into(), wait, None)
    }

    fn put_inner(
        &self,
        ts: Timestamp,
        item: Item,
        wait: Wait,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<u64, PutError> {
        match &self.via {
            Via::Local(q) => q.put(&self.task, ts, item, wait, interrupted),
            // Tickets come from the owner: a queue put returns once stored.
            Via::Provided(l) => l.put(ts, item, None, wait, true, interrupted),
        }
        .inspect(|_| self.link.count())
    }
    /// Puts like [`put_with`](Self::put_with), asking `interrupted` while the put waits for
    /// space, as [`OutputConnection::<Channel>::put_interruptible`] does.
    pub fn put_interruptible(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        wait: Wait,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<u64, PutError> {
        self.put_inner(ts, item.into(), wait, Some(interrupted))
    }
}

impl OutputConnection<Register> {
    /// Overwrites the register's value; returns the write's sequence number.
    pub fn write(&self, item: impl Into<Item>) -> Result<u64, StmError> {
        match &self.via {
            Via::Local(r) => r.write(&self.task, item.into()),
            Via::Provided(l) => l
                .put(0, item.into(), None, Wait::Never, true, None)
                .map_err(|e| match e.kind() {
                    PutErrorKind::Closed => StmError::Closed,
                    PutErrorKind::Detached => StmError::Detached,
                    k => StmError::Unreachable(format!("write failed: {k:?}")),
                }),
        }
        .inspect(|_| self.link.count())
    }
}

impl InputConnection<Channel> {
    /// Gets the selected item, blocking until one exists.
    ///
    /// ```
    /// use stampede_core::{ContainerOptions, GetError, Runtime, Selector, INFINITY};
    /// let rt = Runtime::new();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// let (p, c) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    /// let (out, input) = (p.attach_output(&ch).unwrap(), c.attach_input(&ch).unwrap());
    /// for ts in [3, 1, 2] { out.put(ts, ts.to_string()).unwrap(); }
    /// assert_eq!(input.get(Selector::NewestUnseen).unwrap().0, 3);
    /// assert_eq!(input.get(Selector::NewestUnseen).unwrap().0, 2);
    /// assert_eq!(input.get(Selector::Oldest).unwrap().0, 1);
    /// input.consume_until(2).unwrap();
    /// assert_eq!(input.try_get(Selector::Exact(1)).unwrap_err(), GetError::Gone(1));
    /// ```
    pub fn get(&self, sel: Selector) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::Forever)
    }
    /// Gets without waiting; on failure reports the neighbouring timestamps.
    pub fn try_get(&self, sel: Selector) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::Never)
    }
    /// Gets, waiting at most `timeout`.
    pub fn get_timeout(
        &self,
        sel: Selector,
        timeout: Duration,
    ) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::For(timeout))
    }
    /// Gets with an explicit wait mode.
    pub fn get_with(&self, sel: Selector, wait: Wait) -> Result<(Timestamp, Item), GetError> {
        match &self.via {
            Via::Local(c) => c.get(self.id, sel, wait),
            Via::Provided(l) => {
                let g = waiting(&self.task, wait, || l.get(sel, wait))?;
                l.opened(g.ts);
                Ok((g.ts, g.item))
            }
        }
        .inspect(|_| self.link.count())
    }
    /// Marks the item at `ts` consumed on this connection (it need not be open, or present).
    pub fn consume(&self, ts: Timestamp) -> Result<(), StmError> {
        match &self.via {
            Via::Local(c) => c.consume(self.id, ts),
            Via::Provided(l) => l.consume(Consume::Item(ts)),
        }
    }
    /// Marks every item at or below `ts` consumed, including ones that arrive later.
    pub fn consume_until(&self, ts: Timestamp) -> Result<(), StmError> {
        match &self.via {
            Via::Local(c) => c.consume_until(self.id, ts),
            Via::Provided(l) => l.consume(Consume::Until(ts)),
        }
    }
    /// Applies a get another address space answered from its view (see
    /// [`provider::replay_get`](crate::provider::replay_get)).
    pub(crate) fn replay_get(&self, sel: Selector, ts: Timestamp) -> Result<(), GetError> {
        match &self.via {
            Via::Local(c) => c.replay_get(self.id, sel, ts),
            Via::Provided(_) => Err(GetError::Detached),
        }
    }
    /// The timestamps visible on this connection above `after` and whether the channel is
    /// closed, for the correlator, wherever the channel lives.
    pub(crate) fn visible_after(
        &self,
        after: Option<Timestamp>,
    ) -> Result<(Vec<Timestamp>, bool), StmError> {
        match &self.via {
            Via::Local(c) => Ok(c.visible_after(self.id, after)),
            Via::Provided(l) => l.visible_after(after),
        }
    }
}

impl InputConnection<Queue> {
    /// Gets the oldest waiting item, blocking until one exists.
    pub fn get(&self) -> Result<QueueItem, GetError> {
        self.get_with(Wait::Forever)
    }
    /// Gets without waiting.
    pub fn try_get(&self) -> Result<QueueItem, GetError> {
        self.get_with(Wait::Never)
    }
    /// Gets, waiting at most `timeout`.
    pub fn get_timeout(&self, timeout: Duration) -> Result<QueueItem, GetError> {
        self.get_with(Wait::For(timeout))
    }
    /// Gets with an explicit wait mode.
    pub fn get_with(&self, wait: Wait) -> Result<QueueItem, GetError> {
        match &self.via {
            Via::Local(q) => q.get(self.id, &self.task, wait),
            Via::Provided(l) => {
                let g = waiting(&self.task, wait, || l.get(Selector::Oldest, wait))?;
                l.held(g.seq, g.ts);
                Ok(QueueItem {
                    ts: g.ts,
                    ticket: g.seq,
                    item: g.item,
                })
            }
        }
        .inspect(|_| self.link.count())
    }
    /// Consumes (frees) the item with this ticket, which this connection must hold.
    pub fn consume(&self, ticket: u64) -> Result<(), StmError> {
        match &self.via {
            Via::Local(q) => q.consume(self.id, ticket),
            Via::Provided(l) => l.consume(Consume::Ticket(ticket)),
        }
    }
}

impl InputConnection<Register> {
    /// Reads the value, blocking until a write newer than this connection's last read.
    pub fn read(&self) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::Forever)
    }
    /// Reads without waiting.
    pub fn try_read(&self) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::Never)
    }
    /// Reads, waiting at most `timeout`.
    pub fn read_timeout(&self, timeout: Duration) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::For(timeout))
    }
    /// Reads with an explicit wait mode.
    pub fn read_with(&self, wait: Wait) -> Result<(u64, Item), GetError> {
        match &self.via {
            Via::Local(r) => r.read(self.id, wait),
            Via::Provided(l) => {
                waiting(&self.task, wait, || l.get(Selector::Oldest, wait)).map(|g| (g.seq, g.item))
            }
        }
        .inspect(|_| self.link.count())
    }
    pub(crate) fn replay_read(&self, seq: u64) -> Result<(), GetError> {
        match &self.via {
            Via::Local(r) => r.replay_read(self.id, seq),
            Via::Provided(_) => Err(GetError::Detached),
        }
    }
}
