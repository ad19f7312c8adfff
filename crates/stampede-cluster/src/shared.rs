//! What one address space's cluster shares between its handles, its tasks and the code it
//! serves: the registry, the objects it is home to, the requests and handles waiting for
//! answers, the tasks it runs, and the cluster's other spaces. The operations the handles
//! make live with the handles (`thread`, `sync`, `barrier`); what every one of them needs
//! (sending, finding an object's home, running a task, a space's departure) is here.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede_core::{StmError, Task};
use stampede_net::{NetError, Space};

use crate::error::{ClusterError, TaskError};
use crate::home::{Action, Homes, Kind};
use crate::waits::Slots;
use crate::wire::{decode_fetched, Msg, Outcome, SERVICE};

/// A task body: runs with its context and argument bytes, returns result bytes.
pub type TaskBody = dyn Fn(&TaskContext, Bytes) -> Result<Bytes, TaskError> + Send + Sync;

/// Finds the body of a task name no registration names (a face that loads code by name,
/// such as Python's `"package.module:function"`).
pub type Resolver = dyn Fn(&str) -> Option<Arc<TaskBody>> + Send + Sync;

/// The tasks an address space can run, by name. Every space of a cluster that runs a
/// task must register it under the same name: code does not travel, names do.
#[derive(Clone, Default)]
pub struct Registry {
    tasks: HashMap<String, Arc<TaskBody>>,
    resolver: Option<Arc<Resolver>>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `body` as task `name` (replacing one registered before).
    pub fn task(
        mut self,
        name: &str,
        body: impl Fn(&TaskContext, Bytes) -> Result<Bytes, TaskError> + Send + Sync + 'static,
    ) -> Registry {
        self.tasks.insert(name.to_owned(), Arc::new(body));
        self
    }

    /// Registers a body already shared (a face's).
    pub fn task_body(mut self, name: &str, body: Arc<TaskBody>) -> Registry {
        self.tasks.insert(name.to_owned(), body);
        self
    }

    /// Asks `resolver` for the body of a name nothing registered, each time it is spawned.
    pub fn resolver(
        mut self,
        resolver: impl Fn(&str) -> Option<Arc<TaskBody>> + Send + Sync + 'static,
    ) -> Registry {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// The names registered.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tasks.keys().cloned().collect();
        v.sort();
        v
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<TaskBody>> {
        self.tasks
            .get(name)
            .cloned()
            .or_else(|| self.resolver.as_ref().and_then(|r| r(name)))
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tasks", &self.names())
            .finish()
    }
}

/// Settings of an address space's cluster.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ClusterOptions {
    /// How long a lock, condition, semaphore or barrier wait may last; `None` waits for as
    /// long as the objects' homes and the other members live.
    pub timeout: Option<Duration>,
    /// Attach address spaces when the members are full, and detach idle ones.
    pub attach: Option<AttachPolicy>,
}

/// When a cluster attaches and detaches address spaces through the node agents.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AttachPolicy {
    /// What a node agent runs (program and arguments); it must run
    /// [`Worker::from_env`](crate::Worker::from_env).
    pub command: Vec<String>,
    /// A round-robin or least-loaded spawn attaches a space when every member runs this
    /// many of this space's tasks (its own count in this space).
    pub task_limit: usize,
    /// A space this one attached is detached after running none of its tasks this long.
    pub idle: Option<Duration>,
    /// How long an attach may take.
    pub timeout: Duration,
}

impl AttachPolicy {
    /// Runs `command`, attaching at `task_limit` tasks per space; no idle detaching.
    pub fn new(command: Vec<String>, task_limit: usize) -> AttachPolicy {
        AttachPolicy {
            command,
            task_limit: task_limit.max(1),
            idle: None,
            timeout: Duration::from_secs(30),
        }
    }
    /// Detaches a space attached by this one after `idle` without its tasks.
    pub fn idle(mut self, idle: Option<Duration>) -> Self {
        self.idle = idle;
        self
    }
    /// How long an attach may take.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
}

impl ClusterOptions {
    /// How long a synchronisation wait may last.
    pub fn timeout(mut self, t: Option<Duration>) -> Self {
        self.timeout = t;
        self
    }
    /// Attaches and detaches address spaces by `policy`.
    pub fn attach(mut self, policy: Option<AttachPolicy>) -> Self {
        self.attach = policy;
        self
    }
}

/// A task's identity: the address space that spawned it and that space's number for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId {
    pub origin: String,
    pub seq: u64,
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.origin, self.seq)
    }
}

/// What a running task sees of itself.
pub struct TaskContext {
    pub(crate) cluster: Cluster,
    pub(crate) id: ThreadId,
    pub(crate) name: String,
    pub(crate) cancel: Arc<AtomicBool>,
    pub(crate) task: Task,
}

impl TaskContext {
    /// This task's identity.
    pub fn id(&self) -> &ThreadId {
        &self.id
    }
    /// The name it was spawned under.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The cluster of the address space running it, to spawn, lock and wait.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
    /// The Stampede task it is: its virtual time, its connections to channels and queues.
    pub fn task(&self) -> &Task {
        &self.task
    }
    /// The address space running it.
    pub fn space(&self) -> &Space {
        &self.cluster.sh.space
    }
    /// Whether its joiner asked it to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }
    /// A handle on its cancellation flag, for code that outlives the borrow of the
    /// context (a face's task object).
    pub fn cancellation(&self) -> Cancellation {
        Cancellation(self.cancel.clone())
    }
    /// [`ClusterError::Cancelled`] once its joiner asked it to stop: a cancellation point.
    pub fn check(&self) -> Result<(), ClusterError> {
        if self.is_cancelled() {
            Err(ClusterError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Whether a task was asked to stop ([`TaskContext::cancellation`]).
#[derive(Clone, Debug)]
pub struct Cancellation(Arc<AtomicBool>);

impl Cancellation {
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The cancellation flag of the task this thread runs, if any: its waits give up when
    /// it is raised.
    static CANCEL: std::cell::RefCell<Option<Arc<AtomicBool>>> = const { std::cell::RefCell::new(None) };
}

/// Marks this thread as running the task with cancellation flag `flag` (or none).
pub(crate) fn set_cancel(flag: Option<Arc<AtomicBool>>) {
    CANCEL.with(|c| *c.borrow_mut() = flag);
}

/// Whether the task running on this thread was cancelled.
pub(crate) fn cancelled_here() -> bool {
    CANCEL.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    })
}

/// The answer a request gets from an object's home.
#[derive(Debug)]
pub(crate) enum Answer {
    Granted {
        owner_died: bool,
    },
    Woken,
    Refused(String),
    /// The home left or died.
    Lost(String),
}

/// How a spawned task ended, as its handle learns it.
#[derive(Debug)]
pub(crate) enum Ended {
    Outcome(Outcome),
    /// The space running it left or died.
    Lost(String),
}

/// A task this space spawned and has not heard the end of.
pub(crate) struct Placed {
    pub space: String,
}

/// A task this space runs.
pub(crate) struct Running {
    pub task: String,
    pub cancel: Arc<AtomicBool>,
    pub started: Instant,
}

/// A request waiting at a home.
pub(crate) struct Pending {
    pub home: String,
}

/// The operations whose calls and times are counted (CableS' Table 5 columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClusterOp {
    /// A spawn (`pthread_create`).
    Create,
    /// A join, waiting included.
    Join,
    /// A mutex lock, waiting included.
    Lock,
    /// A mutex unlock.
    Unlock,
    /// A condition wait, the wake-up and the relock included.
    Wait,
    /// A condition signal.
    Signal,
    /// A condition broadcast.
    Broadcast,
    /// A semaphore wait, waiting included.
    SemWait,
    /// A semaphore post.
    Post,
    /// A barrier wait.
    Barrier,
}

impl ClusterOp {
    /// Every operation, in the order of the counters.
    pub const ALL: [ClusterOp; 10] = [
        ClusterOp::Create,
        ClusterOp::Join,
        ClusterOp::Lock,
        ClusterOp::Unlock,
        ClusterOp::Wait,
        ClusterOp::Signal,
        ClusterOp::Broadcast,
        ClusterOp::SemWait,
        ClusterOp::Post,
        ClusterOp::Barrier,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            ClusterOp::Create => "create",
            ClusterOp::Join => "join",
            ClusterOp::Lock => "lock",
            ClusterOp::Unlock => "unlock",
            ClusterOp::Wait => "wait",
            ClusterOp::Signal => "signal",
            ClusterOp::Broadcast => "broadcast",
            ClusterOp::SemWait => "sem_wait",
            ClusterOp::Post => "post",
            ClusterOp::Barrier => "barrier",
        }
    }

    pub(crate) fn index(self) -> usize {
        ClusterOp::ALL
            .iter()
            .position(|&o| o == self)
            .expect("every operation is in ALL")
    }
}

/// Counters of what this space's cluster did.
#[derive(Default)]
pub(crate) struct Counters {
    /// Per [`ClusterOp`]: calls made here, and their nanoseconds.
    pub op_calls: [AtomicU64; 10],
    pub op_nanos: [AtomicU64; 10],
    pub spawned: AtomicU64,
    pub ran: AtomicU64,
    pub malformed: AtomicU64,
    pub unclaimed: AtomicU64,
    /// Spaces attached and detached by this one.
    pub attached: AtomicU64,
    pub detached: AtomicU64,
    pub stale_unlocks: AtomicU64,
    /// Segment copies brought up to date, and releases sent.
    pub fetches: AtomicU64,
    pub releases: AtomicU64,
}

pub(crate) struct Shared {
    pub space: Space,
    pub id: String,
    pub registry: Registry,
    pub opts: ClusterOptions,
    next: AtomicU64,
    pub homes: Mutex<Homes>,
    /// The objects this space is home to.
    pub claimed: Mutex<HashMap<String, Kind>>,
    /// Held while this space claims an object.
    claiming: Mutex<()>,
    /// Object name → its home space and kind.
    pub home_of: Mutex<HashMap<String, (String, Kind)>>,
    pub answers: Slots<Answer>,
    pub pending: Mutex<HashMap<u64, Pending>>,
    pub ends: Slots<Ended>,
    pub placed: Mutex<HashMap<u64, Placed>>,
    pub running: Mutex<HashMap<ThreadId, Running>>,
    /// The cluster's spaces, sorted (this one included).
    pub members: Mutex<Vec<String>>,
    /// This space's copies of the segments it has named.
    pub segments: Mutex<HashMap<String, Arc<crate::cache::SegmentCache>>>,
    pub turn: AtomicUsize,
    pub stopped: AtomicBool,
    pub counters: Counters,
    /// Whether another member told this space to detach.
    pub detach: crate::waits::Detach,
    /// Spaces this one attached, by when it last gave one a task.
    pub attached: Mutex<HashMap<String, Instant>>,
}

impl Counters {
    /// Counts a call of `op` that started at `started`.
    pub fn timed(&self, op: ClusterOp, started: Instant) {
        let i = op.index();
        self.op_calls[i].fetch_add(1, Ordering::Relaxed);
        self.op_nanos[i].fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// A home that cannot be reached is a lost object.
pub(crate) fn gone(e: ClusterError, home: &str) -> ClusterError {
    match e {
        ClusterError::Invoke(stampede_net::InvokeError::Unreachable { .. }) => ClusterError::Lost {
            space: home.to_owned(),
        },
        e => e,
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The name-server name of space `id`'s membership.
pub(crate) fn member_name(id: &str) -> String {
    format!("cluster/space/{id}")
}

/// The name-server name of object `name`.
pub(crate) fn object_name(name: &str) -> String {
    format!("cluster/object/{name}")
}

/// The cluster of one address space: spawn tasks anywhere in it, and make its mutexes,
/// conditions, semaphores and barriers. Cheap to clone; the space stays a member while a
/// handle or a task of it lives.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) sh: Arc<Shared>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("space", &self.sh.id)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub fn new(space: &Space, registry: Registry, opts: ClusterOptions) -> Shared {
        Shared {
            id: space.id().to_owned(),
            space: space.clone(),
            registry,
            opts,
            // Numbers differ between starts of a cluster in one space, so a late answer
            // meant for an earlier start never fills a slot of this one.
            next: AtomicU64::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64 | 1),
            ),
            homes: Mutex::new(Homes::default()),
            claimed: Mutex::new(HashMap::new()),
            claiming: Mutex::new(()),
            home_of: Mutex::new(HashMap::new()),
            answers: Slots::default(),
            pending: Mutex::new(HashMap::new()),
            ends: Slots::default(),
            placed: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            members: Mutex::new(vec![space.id().to_owned()]),
            segments: Mutex::new(HashMap::new()),
            turn: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            counters: Counters::default(),
            detach: crate::waits::Detach::default(),
            attached: Mutex::new(HashMap::new()),
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `msg` one way to space `to`'s cluster.
    pub fn send(&self, to: &str, msg: &Msg) -> Result<(), ClusterError> {
        self.space.invoke(to, SERVICE, msg.encode())?;
        Ok(())
    }

    /// Calls space `to`'s cluster with `msg` and waits for the answer's bytes.
    pub fn call(&self, to: &str, msg: &Msg) -> Result<Bytes, ClusterError> {
        let item = self.space.call(to, SERVICE, msg.encode())?.wait()?;
        Ok(item.as_bytes().cloned().unwrap_or_default())
    }

    /// Delivers a home's actions about `object`: to this space's waiting requests
    /// directly, to others' by message.
    pub fn apply(&self, object: &str, actions: Vec<Action>) {
        for a in actions {
            let to = a.to().clone();
            if to.space == self.id {
                self.answer(object, to.seq, action_answer(a));
            } else {
                let msg = match a {
                    Action::Grant { owner_died, .. } => Msg::Grant {
                        object: object.to_owned(),
                        seq: to.seq,
                        owner_died,
                    },
                    Action::Wake { .. } => Msg::Wake {
                        object: object.to_owned(),
                        seq: to.seq,
                    },
                    Action::Refuse { why, .. } => Msg::Refused { seq: to.seq, why },
                };
                // A waiter whose space is gone needs nothing; its departure releases what
                // it was granted.
                let _ = self.send(&to.space, &msg);
            }
        }
    }

    /// Gives this space's request `seq` its answer about `object`. A request that gave
    /// up meanwhile does not take it: a grant goes back to the home, a wake goes on to
    /// another waiter.
    pub fn answer(&self, object: &str, seq: u64, answer: Answer) {
        lock(&self.pending).remove(&seq);
        if let Err(a) = self.answers.fill(seq, answer) {
            self.counters.unclaimed.fetch_add(1, Ordering::Relaxed);
            match a {
                Answer::Woken => {
                    if let Ok(home) = self.known_home(object) {
                        let _ = self.signal(object, &home, false);
                    }
                }
                Answer::Granted { .. } => {
                    let _ = self.give_back(object, seq);
                }
                Answer::Refused(_) | Answer::Lost(_) => {}
            }
        }
    }

    /// Returns to its home a grant that request `seq` no longer wants.
    fn give_back(&self, object: &str, seq: u64) -> Result<(), ClusterError> {
        let home = self.known_home(object)?;
        if home == self.id {
            let w = crate::home::Waiter {
                space: self.id.clone(),
                seq,
            };
            let acts = lock(&self.homes).returned(object, &w);
            self.apply(object, acts);
            Ok(())
        } else {
            self.send(
                &home,
                &Msg::Return {
                    object: object.to_owned(),
                    seq,
                },
            )
        }
    }

    /// Signals condition `object` at its home `home`.
    pub fn signal(&self, object: &str, home: &str, all: bool) -> Result<(), ClusterError> {
        if home == self.id {
            let acts = lock(&self.homes).signal(object, all);
            self.apply(object, acts);
            Ok(())
        } else {
            self.send(
                home,
                &Msg::Signal {
                    cond: object.to_owned(),
                    all,
                },
            )
        }
    }

    /// The home of an object this space has used.
    pub fn known_home(&self, object: &str) -> Result<String, ClusterError> {
        lock(&self.home_of)
            .get(object)
            .map(|(h, _)| h.clone())
            .ok_or_else(|| ClusterError::InvalidArgument(format!("no object {object:?} known")))
    }

    /// The home of object `name` of `kind`: the space that first made it, found through
    /// the name server, or this space if none has (`initial`: a semaphore's count, a
    /// barrier's size).
    pub fn home(&self, name: &str, kind: Kind, initial: u64) -> Result<String, ClusterError> {
        if name.is_empty() {
            return Err(ClusterError::InvalidArgument(
                "an object needs a name".into(),
            ));
        }
        let wrong = |k: &str| {
            ClusterError::InvalidArgument(format!("{name:?} is a {k}, not a {}", kind.name()))
        };
        if let Some((h, k)) = lock(&self.home_of).get(name) {
            return if *k == kind {
                Ok(h.clone())
            } else {
                Err(wrong(k.name()))
            };
        }
        let meta = format!("{}:{initial}", kind.name());
        let key = object_name(name);
        let started = Instant::now();
        let found = |home: &str| {
            lock(&self.home_of).insert(name.to_owned(), (home.to_owned(), kind));
            Ok(home.to_owned())
        };
        loop {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(ClusterError::Timeout {
                    operation: "finding an object's home",
                    waited: started.elapsed(),
                });
            }
            if let Some(k) = lock(&self.claimed).get(name).copied() {
                return if k == kind {
                    found(&self.id)
                } else {
                    Err(wrong(k.name()))
                };
            }
            if let Some(rec) = self.space.record(&key) {
                let k = rec.meta.split(':').next().unwrap_or("");
                if k != kind.name() {
                    return Err(wrong(k));
                }
                // A record can be one its space is withdrawing (it lost a race for the
                // name): only the space that holds the name answers yes.
                if rec.space != self.id && self.confirm(&rec.space, name, kind) {
                    return found(&rec.space);
                }
            } else {
                // One claim at a time in this space; the name server settles races
                // between spaces (both racers withdraw, so neither is home).
                let _one = lock(&self.claiming);
                if lock(&self.claimed).contains_key(name) {
                    continue;
                }
                match self.space.register_service(&key, &meta) {
                    Ok(()) => {
                        lock(&self.homes)
                            .create(name, kind, initial)
                            .map_err(ClusterError::InvalidArgument)?;
                        lock(&self.claimed).insert(name.to_owned(), kind);
                        return found(&self.id);
                    }
                    Err(NetError::Stm(StmError::NameTaken(_))) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // Look again after a pause that differs between spaces.
            let jitter = (self.next_seq() % 7 + 1) * 2;
            std::thread::sleep(Duration::from_millis(jitter));
        }
    }

    /// Segment `name`'s version at `home`, with its bytes when they are newer than `have`.
    pub fn fetch_segment(
        &self,
        home: &str,
        name: &str,
        have: u64,
    ) -> Result<(u64, Option<Bytes>), ClusterError> {
        let r = if home == self.id {
            let (v, d) = lock(&self.homes)
                .fetch(name, have)
                .map_err(ClusterError::InvalidArgument)?;
            (v, d.map(Bytes::from))
        } else {
            let b = self
                .call(
                    home,
                    &Msg::Fetch {
                        segment: name.to_owned(),
                        have,
                    },
                )
                .map_err(|e| gone(e, home))?;
            decode_fetched(b).map_err(ClusterError::InvalidArgument)?
        };
        self.counters.fetches.fetch_add(1, Ordering::Relaxed);
        Ok(r)
    }

    /// Applies one release's `writes` (offset, bytes) to segment `name` at `home`, all at
    /// once; returns the new version.
    pub fn store_segment(
        &self,
        home: &str,
        name: &str,
        writes: &[(u64, &[u8])],
    ) -> Result<u64, ClusterError> {
        let version = if home == self.id {
            lock(&self.homes)
                .store(name, writes)
                .map_err(ClusterError::InvalidArgument)?
        } else {
            let writes = writes
                .iter()
                .map(|(at, b)| (*at, Bytes::copy_from_slice(b)))
                .collect();
            let b = self
                .call(
                    home,
                    &Msg::Store {
                        segment: name.to_owned(),
                        writes,
                    },
                )
                .map_err(|e| gone(e, home))?;
            let a: [u8; 8] = b[..]
                .try_into()
                .map_err(|_| ClusterError::InvalidArgument("a malformed store answer".into()))?;
            u64::from_le_bytes(a)
        };
        self.counters.releases.fetch_add(1, Ordering::Relaxed);
        Ok(version)
    }

    /// Whether space `home` holds object `name` of `kind`.
    fn confirm(&self, home: &str, name: &str, kind: Kind) -> bool {
        self.call(
            home,
            &Msg::Claim {
                object: name.to_owned(),
                kind: kind.code(),
            },
        )
        .is_ok_and(|b| b[..] == [1])
    }

    /// Whether this space holds object `name` of `kind` (a [`Msg::Claim`]'s answer).
    pub fn holds(&self, name: &str, kind: u8) -> bool {
        lock(&self.claimed)
            .get(name)
            .is_some_and(|k| k.code() == kind)
    }

    /// This space's task `seq` ended.
    pub fn ended(&self, seq: u64, how: Ended) {
        lock(&self.placed).remove(&seq);
        let _ = self.ends.fill(seq, how);
    }

    /// Space `space` left the cluster or died: what it held at homes here is released, the
    /// tasks it ran for this space are lost, the requests waiting at its homes fail, and
    /// the objects it was home to are forgotten.
    pub fn space_left(&self, space: &str) {
        lock(&self.members).retain(|m| m != space);
        let acts = lock(&self.homes).space_left(space);
        for (object, a) in acts {
            self.apply(&object, vec![a]);
        }
        let lost: Vec<u64> = lock(&self.placed)
            .iter()
            .filter(|(_, p)| p.space == space)
            .map(|(&s, _)| s)
            .collect();
        for seq in lost {
            self.ended(seq, Ended::Lost(space.to_owned()));
        }
        let waiting: Vec<u64> = lock(&self.pending)
            .iter()
            .filter(|(_, p)| p.home == space)
            .map(|(&s, _)| s)
            .collect();
        for seq in waiting {
            lock(&self.pending).remove(&seq);
            let _ = self.answers.fill(seq, Answer::Lost(space.to_owned()));
        }
        lock(&self.home_of).retain(|_, (h, _)| h != space);
        for c in lock(&self.segments).values() {
            let mut st = lock(&c.state);
            if st.home.as_deref() == Some(space) {
                st.lost = Some(space.to_owned());
            }
        }
        // Tasks it started here are cancelled: nobody will join them.
        for (id, r) in lock(&self.running).iter() {
            if id.origin == space {
                r.cancel.store(true, Ordering::Release);
            }
        }
    }

    /// Tells the spaces this one attached that have run none of its tasks for the idle
    /// time to detach.
    pub fn detach_idle(&self) {
        let Some(idle) = self.opts.attach.as_ref().and_then(|p| p.idle) else {
            return;
        };
        let busy: std::collections::HashSet<String> = lock(&self.placed)
            .values()
            .map(|p| p.space.clone())
            .collect();
        let mut attached = lock(&self.attached);
        let now = Instant::now();
        for (space, last) in attached.iter_mut() {
            if busy.contains(space) {
                *last = now;
            }
        }
        let idle_ones: Vec<String> = attached
            .iter()
            .filter(|(_, &last)| now.duration_since(last) >= idle)
            .map(|(s, _)| s.clone())
            .collect();
        for s in idle_ones {
            attached.remove(&s);
            let _ = self.send(&s, &Msg::Detach);
            self.counters.detached.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A space joined the cluster.
    pub fn space_joined(&self, space: &str) {
        let mut m = lock(&self.members);
        if let Err(at) = m.binary_search_by(|x| x.as_str().cmp(space)) {
            m.insert(at, space.to_owned());
        }
    }
}

fn action_answer(a: Action) -> Answer {
    match a {
        Action::Grant { owner_died, .. } => Answer::Granted { owner_died },
        Action::Wake { .. } => Answer::Woken,
        Action::Refuse { why, .. } => Answer::Refused(why),
    }
}
