//! The in-process runtime: zones, names, ids and the background collector.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::channel::{Channel, ChannelCore};
use crate::container::{ContainerOptions, Flavor, Named};
use crate::error::StmError;
use crate::gc::{GcStats, MarkListener, WatermarkReport, Zone};
use crate::ids::ConnId;
use crate::kind::Kind;
use crate::provider::Directory;
use crate::queue::{Queue, QueueCore};
use crate::register::{Register, RegisterCore};
use crate::report::TaskReport;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crate::task::{Task, TaskBuilder};
use crate::time::{Timestamp, ZoneId};

enum NamedWeak {
    Channel(Weak<ChannelCore>),
    Queue(Weak<QueueCore>),
    Register(Weak<RegisterCore>),
}

impl NamedWeak {
    fn upgrade(&self) -> Option<Named> {
        Some(match self {
            NamedWeak::Channel(w) => Named::Channel(Channel {
                flavor: Flavor::Local(w.upgrade()?),
            }),
            NamedWeak::Queue(w) => Named::Queue(Queue {
                flavor: Flavor::Local(w.upgrade()?),
            }),
            NamedWeak::Register(w) => Named::Register(Register {
                flavor: Flavor::Local(w.upgrade()?),
            }),
        })
    }
}

pub(crate) struct RtInner {
    zones: Mutex<BTreeMap<ZoneId, Arc<Zone>>>,
    names: Mutex<HashMap<String, NamedWeak>>,
    next_id: AtomicU64,
    mark_listener: Mutex<Option<MarkListener>>,
    /// Names across a distributed application, once the runtime joined one. Weak: the
    /// directory (an address space) holds the runtime.
    directory: Mutex<Option<Weak<dyn Directory>>>,
    spin_rounds: u32,
    #[cfg(not(loom))]
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Drop for RtInner {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        stop(&self.stop);
    }
}

#[cfg(not(loom))]
fn stop(flag: &(std::sync::Mutex<bool>, std::sync::Condvar)) {
    let (m, cv) = flag;
    *m.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    cv.notify_all();
}

/// An address space's Space-Time Memory: containers, tasks and their garbage collection.
///
/// Handles are cheap to clone and share one runtime. A background thread runs a collection
/// pass every `gc_interval` (see [`RuntimeBuilder`]); puts that find a bounded container full
/// run one themselves.
///
/// ```
/// use stampede_core::{ContainerOptions, Runtime, Selector, INFINITY};
/// let rt = Runtime::new();
/// let frames = rt.channel(ContainerOptions::bounded(4).name("frames")).unwrap();
///
/// // Attach before the producer starts: an input connection made at virtual time INFINITY
/// // starts with the items already present marked consumed (rule 3).
/// let tracker = rt.task(INFINITY).unwrap();
/// let input = tracker.attach_input(&frames).unwrap();
///
/// let producer = rt.spawn(0, {
///     let frames = frames.clone();
///     move |task| {
///         let out = task.attach_output(&frames).unwrap();
///         for n in 0..10 {
///             out.put(n, format!("frame {n}")).unwrap();
///             task.set_virtual_time(n + 1).unwrap();
///         }
///     }
/// }).unwrap();
///
/// for n in 0..10 {
///     let (ts, item) = input.get(Selector::NextUnseen).unwrap();
///     assert_eq!((ts, item.as_str().unwrap()), (n, format!("frame {n}").as_str()));
///     input.consume_until(ts).unwrap();
/// }
/// producer.join().unwrap();
/// ```
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RtInner>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Self::new()
    }
}

/// Configures a [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    gc_interval: Option<Duration>,
    spin_rounds: u32,
}

impl RuntimeBuilder {
    /// How often the background collector runs; `None` runs passes only on demand (full
    /// bounded containers and [`Runtime::collect`]). Default: 5 ms.
    pub fn gc_interval(mut self, interval: Option<Duration>) -> Self {
        self.gc_interval = interval;
        self
    }

    /// Busy-wait rounds a blocking get makes before it parks (default 64). Spinning saves
    /// two context switches when the item comes from a thread on another core within
    /// microseconds; when it comes from the network, or on two cores or fewer, it only
    /// takes the processor from whoever will deliver it, so use 0 there.
    pub fn spin_rounds(mut self, rounds: u32) -> Self {
        self.spin_rounds = rounds;
        self
    }

    /// Starts the runtime.
    pub fn build(self) -> Runtime {
        let inner = Arc::new(RtInner {
            zones: Mutex::new(BTreeMap::new()),
            names: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            mark_listener: Mutex::new(None),
            directory: Mutex::new(None),
            spin_rounds: self.spin_rounds,
            #[cfg(not(loom))]
            stop: Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new())),
        });
        #[cfg(not(loom))]
        if let Some(every) = self.gc_interval {
            let weak = Arc::downgrade(&inner);
            let stop = inner.stop.clone();
            // Without a collector thread passes still run on demand, so a failed start only
            // delays reclamation of unbounded containers.
            let _ = std::thread::Builder::new()
                .name("stampede-gc".into())
                .spawn(move || collector(weak, stop, every));
        }
        Runtime { inner }
    }
}

#[cfg(not(loom))]
fn collector(
    rt: Weak<RtInner>,
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    every: Duration,
) {
    let (m, cv) = &*stop;
    let mut stopped = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        stopped = cv
            .wait_timeout(stopped, every)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
        if *stopped {
            return;
        }
        let Some(inner) = rt.upgrade() else { return };
        let zones: Vec<_> = lock(&inner.zones).values().cloned().collect();
        drop(inner);
        drop(stopped);
        for z in zones {
            z.collect();
        }
        stopped = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

impl Runtime {
    /// A runtime with the default configuration.
    pub fn new() -> Runtime {
        Runtime::builder().build()
    }

    /// Configures a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            gc_interval: Some(Duration::from_millis(5)),
            spin_rounds: crate::wait::SPIN_ROUNDS,
        }
    }

    /// Stops the background collector; passes still run on demand. Bindings call this
    /// before their interpreter shuts down, so no collector pass calls into it afterwards.
    pub fn stop_collector(&self) {
        #[cfg(not(loom))]
        stop(&self.inner.stop);
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn next_conn(&self) -> ConnId {
        ConnId(self.next_id())
    }

    pub(crate) fn zone(&self, id: ZoneId) -> Arc<Zone> {
        lock(&self.inner.zones)
            .entry(id)
            .or_insert_with(|| {
                let z = Zone::new(id, self.inner.spin_rounds);
                z.set_listener(lock(&self.inner.mark_listener).clone());
                Arc::new(z)
            })
            .clone()
    }

    /// The zones this runtime has seen.
    pub fn zones(&self) -> Vec<ZoneId> {
        lock(&self.inner.zones).keys().copied().collect()
    }

    /// Calls `f(zone, mark, pass)` after every collection pass with the zone's *local mark*
    /// (the lowest of this runtime's own watermark terms, [`WatermarkReport::local`]) and the
    /// pass's number.
    ///
    /// Passes are numbered from 1 per zone. A pass numbered above the
    /// [`GcStats::passes`] read after an operation returned saw that operation's effect;
    /// passes running on two threads may report out of order, so keep the highest number.
    /// A distribution layer reports the mark to the other address spaces, which feed it to
    /// [`provider::set_external_term`](crate::provider::set_external_term). `f` runs on the
    /// thread of the pass and must not block.
    pub fn on_local_mark(&self, f: impl Fn(ZoneId, Timestamp, u64) + Send + Sync + 'static) {
        let f: MarkListener = Arc::new(f);
        *lock(&self.inner.mark_listener) = Some(f.clone());
        for z in lock(&self.inner.zones).values() {
            z.set_listener(Some(f.clone()));
        }
    }

    /// The local mark of `zone` as of the last collection pass (`INFINITY` before any).
    pub fn local_mark(&self, zone: ZoneId) -> Timestamp {
        self.zone(zone).local_mark()
    }

    pub(crate) fn set_directory(&self, d: Weak<dyn Directory>) {
        *lock(&self.inner.directory) = Some(d);
    }

    /// The application's directory, if the runtime joined one; an error once it left.
    fn directory(&self) -> Result<Option<Arc<dyn Directory>>, StmError> {
        match &*lock(&self.inner.directory) {
            None => Ok(None),
            Some(w) => w.upgrade().map(Some).ok_or_else(|| {
                StmError::Unreachable("the address space left its application".into())
            }),
        }
    }

    /// Tells the application's directory about a new root task (see [`Directory::root_task`]).
    pub(crate) fn root_task_created(&self, zone: ZoneId) {
        if let Ok(Some(d)) = self.directory() {
            d.root_task(zone);
        }
    }

    /// Publishes a new named container application-wide when the runtime joined an
    /// application; on failure the name is withdrawn here and the container closed.
    fn announce(&self, opts: &ContainerOptions, c: Named) -> Result<Named, StmError> {
        let Some(name) = &opts.name else {
            return Ok(c);
        };
        let published = self
            .directory()
            .and_then(|d| d.map_or(Ok(()), |d| d.announce(name, &c, opts)));
        if let Err(e) = published {
            lock(&self.inner.names).remove(name);
            let _ = c.close();
            return Err(e);
        }
        Ok(c)
    }

    /// The container called `name` of kind `kind`: here, or (in a joined runtime) anywhere
    /// in the application, waiting up to `timeout` for it to appear.
    fn find(&self, name: &str, kind: Kind, timeout: Duration) -> Result<Named, StmError> {
        let check = |n: Named| {
            if n.kind() == kind {
                Ok(n)
            } else {
                Err(StmError::WrongKind {
                    name: name.to_owned(),
                    is: n.kind(),
                })
            }
        };
        if let Some(n) = self.lookup(name) {
            return check(n);
        }
        if let Some(d) = self.directory()? {
            return d.find(name, timeout).and_then(check);
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(StmError::NotFound(name.to_owned()));
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
            if let Some(n) = self.lookup(name) {
                return check(n);
            }
        }
    }

    fn register_name(&self, name: &Option<String>, w: NamedWeak) -> Result<(), StmError> {
        let Some(name) = name else { return Ok(()) };
        let mut names = lock(&self.inner.names);
        if let Some(old) = names.get(name) {
            if old.upgrade().is_some() {
                return Err(StmError::NameTaken(name.clone()));
            }
        }
        names.insert(name.clone(), w);
        Ok(())
    }

    /// Creates a channel: at most one item per timestamp, random access by timestamp.
    pub fn channel(&self, opts: ContainerOptions) -> Result<Channel, StmError> {
        if opts.capacity == Some(0) {
            return Err(StmError::InvalidArgument(
                "capacity must be at least 1".into(),
            ));
        }
        let zone = self.zone(opts.zone);
        let core = Arc::new(ChannelCore::new(
            crate::ids::ContainerId(self.next_id()),
            opts.name.clone(),
            opts.capacity,
            zone.clone(),
        ));
        self.register_name(&opts.name, NamedWeak::Channel(Arc::downgrade(&core)))?;
        let weak: Weak<ChannelCore> = Arc::downgrade(&core);
        zone.add_container(weak);
        match self.announce(
            &opts,
            Named::Channel(Channel {
                flavor: Flavor::Local(core),
            }),
        )? {
            Named::Channel(c) => Ok(c),
            _ => unreachable!("announced a channel"),
        }
    }

    /// Creates a queue: FIFO, several items per timestamp, each delivered once.
    pub fn queue(&self, opts: ContainerOptions) -> Result<Queue, StmError> {
        if opts.capacity == Some(0) {
            return Err(StmError::InvalidArgument(
                "capacity must be at least 1".into(),
            ));
        }
        let zone = self.zone(opts.zone);
        let core = Arc::new(QueueCore::new(
            crate::ids::ContainerId(self.next_id()),
            opts.name.clone(),
            opts.capacity,
            zone.clone(),
        ));
        self.register_name(&opts.name, NamedWeak::Queue(Arc::downgrade(&core)))?;
        let weak: Weak<QueueCore> = Arc::downgrade(&core);
        zone.add_container(weak);
        match self.announce(
            &opts,
            Named::Queue(Queue {
                flavor: Flavor::Local(core),
            }),
        )? {
            Named::Queue(q) => Ok(q),
            _ => unreachable!("announced a queue"),
        }
    }

    /// Creates a register: one value, overwritten by each write.
    pub fn register(&self, opts: ContainerOptions) -> Result<Register, StmError> {
        let core = Arc::new(RegisterCore::new(
            crate::ids::ContainerId(self.next_id()),
            opts.name.clone(),
            opts.zone,
        ));
        self.register_name(&opts.name, NamedWeak::Register(Arc::downgrade(&core)))?;
        match self.announce(
            &opts,
            Named::Register(Register {
                flavor: Flavor::Local(core),
            }),
        )? {
            Named::Register(r) => Ok(r),
            _ => unreachable!("announced a register"),
        }
    }

    /// The container registered here under `name`, if any (no waiting, nothing asked of
    /// other address spaces).
    pub fn lookup(&self, name: &str) -> Option<Named> {
        lock(&self.inner.names).get(name)?.upgrade()
    }

    /// The channel called `name`, waiting up to `timeout` for it to appear: in this
    /// runtime, or anywhere in the application once the runtime joined one (an address
    /// space). Fails with [`StmError::NotFound`] or [`StmError::WrongKind`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use stampede_core::{ContainerOptions, Runtime, StmError};
    /// let rt = Runtime::new();
    /// // A name lives as long as its container: keep the handles.
    /// let _frames = rt.channel(ContainerOptions::default().name("frames")).unwrap();
    /// let _jobs = rt.queue(ContainerOptions::default().name("jobs")).unwrap();
    /// assert!(rt.lookup_channel("frames", Duration::ZERO).is_ok());
    /// assert!(matches!(rt.lookup_channel("jobs", Duration::ZERO), Err(StmError::WrongKind { .. })));
    /// assert!(matches!(
    ///     rt.lookup_channel("nothing", Duration::from_millis(20)),
    ///     Err(StmError::NotFound(_))
    /// ));
    /// ```
    pub fn lookup_channel(&self, name: &str, timeout: Duration) -> Result<Channel, StmError> {
        match self.find(name, Kind::Channel, timeout)? {
            Named::Channel(c) => Ok(c),
            _ => unreachable!("checked the kind"),
        }
    }

    /// The queue called `name` (see [`lookup_channel`](Runtime::lookup_channel)).
    pub fn lookup_queue(&self, name: &str, timeout: Duration) -> Result<Queue, StmError> {
        match self.find(name, Kind::Queue, timeout)? {
            Named::Queue(q) => Ok(q),
            _ => unreachable!("checked the kind"),
        }
    }

    /// The register called `name` (see [`lookup_channel`](Runtime::lookup_channel)).
    pub fn lookup_register(&self, name: &str, timeout: Duration) -> Result<Register, StmError> {
        match self.find(name, Kind::Register, timeout)? {
            Named::Register(r) => Ok(r),
            _ => unreachable!("checked the kind"),
        }
    }

    /// Names of the live registered containers, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names = lock(&self.inner.names);
        names.retain(|_, w| w.upgrade().is_some());
        let mut v: Vec<String> = names.keys().cloned().collect();
        v.sort();
        v
    }

    /// Whether `other` is a handle to this same runtime.
    pub fn same(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Starts building a task.
    pub fn task_builder(&self) -> TaskBuilder<'static> {
        TaskBuilder::new(self)
    }

    /// Creates a task at virtual time `vt` in the default zone, for use on this thread.
    pub fn task(&self, vt: Timestamp) -> Result<Task, StmError> {
        self.task_builder().virtual_time(vt).create()
    }

    /// Runs `f` as a new task at virtual time `vt` on its own thread.
    pub fn spawn<F, R>(&self, vt: Timestamp, f: F) -> Result<std::thread::JoinHandle<R>, StmError>
    where
        F: FnOnce(Task) -> R + Send + 'static,
        R: Send + 'static,
    {
        self.task_builder().virtual_time(vt).spawn(f)
    }

    /// Runs a collection pass in the default zone; returns the new floor.
    pub fn collect(&self) -> Timestamp {
        self.collect_zone(ZoneId::DEFAULT)
    }

    /// Runs a collection pass in `zone`; returns the new floor. When it returns, every item
    /// below that floor has been reclaimed and its garbage handler has returned, whichever
    /// pass reclaimed it (the background collector runs passes too), so a garbage handler
    /// must not wait for a thread that calls this. Called from inside a garbage handler, it
    /// does not wait for other passes.
    pub fn collect_zone(&self, zone: ZoneId) -> Timestamp {
        self.zone(zone).collect_for_caller()
    }

    /// Everything that holds `zone`'s watermark, lowest first.
    ///
    /// ```
    /// use stampede_core::{ContainerOptions, HoldCause, Runtime};
    /// let rt = Runtime::new();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// let slow = rt.task_builder().name("slow").virtual_time(3).create().unwrap();
    /// slow.attach_output(&ch).unwrap().put(10, "x").unwrap();
    /// let report = rt.explain(Default::default());
    /// assert_eq!(report.watermark, 3);
    /// let holder = report.holders().next().unwrap();
    /// assert!(matches!(&holder.cause, HoldCause::VirtualTime { task_name, .. } if task_name == "slow"));
    /// ```
    pub fn explain(&self, zone: ZoneId) -> WatermarkReport {
        self.zone(zone).explain()
    }

    /// Every live task of this runtime, in zone and then id order, with its times, blocked
    /// time and connections. Tasks that act here for another address space's tasks are left
    /// out: their own space reports them.
    ///
    /// ```
    /// use stampede_core::{ContainerOptions, Direction, Runtime};
    /// let rt = Runtime::new();
    /// let ch = rt.channel(ContainerOptions::default().name("frames")).unwrap();
    /// let camera = rt.task_builder().name("camera").virtual_time(0).create().unwrap();
    /// let out = camera.attach_output(&ch).unwrap();
    /// out.put(0, "x").unwrap();
    /// out.put(1, "y").unwrap();
    /// let report = rt.tasks();
    /// let c = &report[0].connections[0];
    /// assert_eq!((report[0].name.as_str(), c.container.as_deref()), ("camera", Some("frames")));
    /// assert_eq!((c.direction, c.operations), (Direction::Output, 2));
    /// ```
    pub fn tasks(&self) -> Vec<TaskReport> {
        let zones: Vec<Arc<Zone>> = lock(&self.inner.zones).values().cloned().collect();
        zones
            .iter()
            .flat_map(|z| z.tasks())
            .filter(|t| !t.is_proxy())
            .map(|t| t.report())
            .collect()
    }

    /// The collector's counters for `zone`.
    pub fn gc_stats(&self, zone: ZoneId) -> GcStats {
        self.zone(zone).stats()
    }
}
