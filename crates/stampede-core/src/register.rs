//! Registers: one value, overwritten by each write, with full/empty signalling.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::container::{Flavor, LocalContainer};
use crate::error::{GetError, Neighbors, StmError};
use crate::ids::{ConnId, ContainerId};
use crate::item::Item;
use crate::sync::{lock, wait, Condvar, Mutex, MutexGuard};
use crate::task::{Detach, TaskInner};
use crate::time::ZoneId;
use crate::wait::Wait;

struct State {
    value: Option<Item>,
    /// Number of writes so far.
    seq: u64,
    /// Per input connection, the `seq` of its last read.
    readers: Vec<(ConnId, u64)>,
    closed: bool,
    waiters: usize,
    /// Called with each write's number, after the write (see `provider::on_write`).
    watchers: Vec<Watcher>,
}

/// A function told of every write to a register, by its write number.
pub(crate) type Watcher = Arc<dyn Fn(u64) + Send + Sync>;

#[allow(unreachable_pub, missing_debug_implementations)] // named only by the sealed `Container` trait
pub struct RegisterCore {
    pub(crate) id: ContainerId,
    pub(crate) name: Option<String>,
    pub(crate) zone: ZoneId,
    state: Mutex<State>,
    readers: Condvar,
}

impl RegisterCore {
    pub(crate) fn new(id: ContainerId, name: Option<String>, zone: ZoneId) -> Self {
        RegisterCore {
            id,
            name,
            zone,
            state: Mutex::new(State {
                value: None,
                seq: 0,
                readers: Vec::new(),
                closed: false,
                waiters: 0,
                watchers: Vec::new(),
            }),
            readers: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError> {
        if !task.is_alive() {
            return Err(StmError::TaskExited);
        }
        // A new reader has seen nothing, so the current value (if any) counts as new.
        self.lock().readers.push((id, 0));
        Ok(())
    }

    pub(crate) fn write(&self, task: &TaskInner, item: Item) -> Result<u64, StmError> {
        if !task.is_alive() {
            return Err(StmError::Detached);
        }
        let mut st = self.lock();
        if st.closed {
            return Err(StmError::Closed);
        }
        st.value = Some(item);
        st.seq += 1;
        if st.waiters > 0 {
            self.readers.notify_all();
        }
        let seq = st.seq;
        if st.watchers.is_empty() {
            return Ok(seq);
        }
        let watchers = st.watchers.clone();
        drop(st);
        for w in &watchers {
            w(seq);
        }
        Ok(seq)
    }

    pub(crate) fn watch(&self, w: Watcher) {
        self.lock().watchers.push(w);
    }

    /// Records that connection `conn` read write `seq` elsewhere: its next read here waits
    /// for a newer one.
    pub(crate) fn replay_read(&self, conn: ConnId, seq: u64) -> Result<(), GetError> {
        let mut st = self.lock();
        let top = st.seq;
        let r = st
            .readers
            .iter_mut()
            .find(|r| r.0 == conn)
            .ok_or(GetError::Detached)?;
        r.1 = r.1.max(seq.min(top));
        Ok(())
    }

    pub(crate) fn read(&self, conn: ConnId, wait_mode: Wait) -> Result<(u64, Item), GetError> {
        let (may_wait, deadline) = wait_mode.deadline();
        let mut st = self.lock();
        loop {
            let i = st
                .readers
                .iter()
                .position(|r| r.0 == conn)
                .ok_or(GetError::Detached)?;
            if st.seq > st.readers[i].1 {
                let seq = st.seq;
                st.readers[i].1 = seq;
                let item = st.value.clone().expect("a write happened");
                return Ok((seq, item));
            }
            if st.closed {
                return Err(GetError::Closed);
            }
            if !may_wait {
                return Err(GetError::Unavailable(Neighbors::default()));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(GetError::Timeout(Neighbors::default()));
            }
            st.waiters += 1;
            let (g, _) = wait(&self.readers, st, deadline);
            st = g;
            st.waiters -= 1;
        }
    }
}

impl LocalContainer for RegisterCore {
    fn id(&self) -> ContainerId {
        self.id
    }
    fn zone(&self) -> ZoneId {
        self.zone
    }
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError> {
        RegisterCore::attach_input(self, task, id)
    }
}

impl Detach for RegisterCore {
    fn detach(&self, conn: ConnId, _task: &TaskInner) {
        let mut st = self.lock();
        st.readers.retain(|r| r.0 != conn);
        if st.waiters > 0 {
            self.readers.notify_all();
        }
    }
}

/// A register: a shared variable whose reads wait for a write newer than the reader's last
/// read.
///
/// ```
/// use stampede_core::{ContainerOptions, GetError, Runtime};
/// let rt = Runtime::new();
/// let mode = rt.register(ContainerOptions::default().name("mode")).unwrap();
/// let t = rt.task(0).unwrap();
/// let (w, r) = (t.attach_output(&mode).unwrap(), t.attach_input(&mode).unwrap());
/// w.write("idle").unwrap();
/// w.write("tracking").unwrap();             // overwrites
/// assert_eq!(r.read().unwrap().1.as_str(), Some("tracking"));
/// assert!(matches!(r.try_read(), Err(GetError::Unavailable(_)))); // nothing newer yet
/// ```
#[derive(Clone)]
pub struct Register {
    pub(crate) flavor: Flavor<RegisterCore>,
}

impl fmt::Debug for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.flavor.debug("Register", f)
    }
}

impl Register {
    /// The registered name, if any.
    pub fn name(&self) -> Option<&str> {
        self.flavor.name()
    }
    /// The current value and its write number, without waiting or marking it read (`None`
    /// for a register served by another address space: read it through a connection).
    pub fn peek(&self) -> Option<(u64, Item)> {
        let Flavor::Local(c) = &self.flavor else {
            return None;
        };
        let st = c.lock();
        st.value.clone().map(|v| (st.seq, v))
    }
    pub(crate) fn local(&self) -> Option<&Arc<RegisterCore>> {
        match &self.flavor {
            Flavor::Local(c) => Some(c),
            Flavor::Provided(_) => None,
        }
    }
    /// Closes the register: writes fail, waiting reads return `Closed`. A register served by
    /// another address space is closed there; that fails only when its owner cannot be
    /// reached.
    pub fn close(&self) -> Result<(), StmError> {
        match &self.flavor {
            Flavor::Local(c) => {
                let mut st = c.lock();
                st.closed = true;
                c.readers.notify_all();
                Ok(())
            }
            Flavor::Provided(b) => b.close(),
        }
    }
}
