//! A graph spread over the address spaces of a Stampede application (`net` feature).
//!
//! Every participant builds the same graph (the same collections, step code and tuners) and
//! joins it under one name with its rank ([`Graph::distribute`]); rank 0, the
//! *environment*, puts the initial items and tags, waits, and releases the others, which
//! serve until then. Messages between them are named code of `stampede-net` (`cnc/<graph>`
//! for work, `cnc/<graph>/control` for the rest), so one caller's messages reach a space in
//! the order they were sent.
//!
//! **Steps** run where `compute_on` places them: a prescribed instance for another rank is
//! sent there (`Run`). When the tag collection is a set, each space starts a placed
//! instance once, whichever spaces put its tag.
//!
//! **Items** live at their *home* rank (`home` tuner, a hash of the tag by default). A put
//! elsewhere is sent home (`Put`), and the putter keeps a copy for its own gets. A get
//! that finds nothing in a space that is not the item's home asks the home once (`Want`),
//! which answers at once or when the item is put (`Copy`, or `Gone` for a freed item); the
//! getter keeps the copy. Get-counts are kept at the home: a completed step's get of a
//! copy of a counted item is reported there (`Got`), and when the count runs out the home
//! frees the item and tells every space holding a copy (`Free`). The order of events keeps
//! the counts exact: a putter's `Put` reaches the home before its `Got`s (named code keeps
//! one caller's order); a home records a space as holding a copy before the item can be got
//! at home (the putter) or before sending it the copy (a space that asked); and a space
//! reports a get only after counting it itself, since the home's answer may free its copy
//! at once. A copy that comes back from the home after the putter stored its own is
//! dropped: the home detects a second put.
//!
//! **Quiescence** (the environment's `wait`): each space counts the work messages it sent
//! and those it finished applying; an instance scheduled or running, or a message being
//! applied, makes a space busy. Only a message makes an idle space busy again. The
//! environment, once idle itself, asks every space for `(idle, sent, received)` in a *wave*,
//! and the graph is quiet when two consecutive waves find every space idle, the sums of
//! sent and received equal, and nothing changed between them: then at the moment between
//! the two waves no space was busy and no message was on its way. A probed space that is
//! busy tells the environment when it becomes idle (`Idle`), so waves follow the work
//! rather than a clock; the environment also waves at least every [`WAVE_EVERY`], which
//! is how a space that died without a failing call is noticed. Then each space reports
//! its unmet gets, and any left make the wait a `Deadlock`.
//!
//! **Failures**: the first failure in a space goes to every other space (`Failed`), where
//! it becomes the graph's failure as [`GraphError::Remote`] naming the space, and steps
//! stop starting; the environment's `wait` returns it as soon as its own instances are
//! done. A participant that leaves or dies fails the environment's `wait` with
//! [`GraphError::SpaceLost`], and the environment's loss fails the others' `serve` alike;
//! a message that cannot be sent or read fails the graph with [`GraphError::Network`].

mod message;
#[cfg(feature = "fuzzing")]
pub(crate) use message::fuzz;

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use stampede_core::Item;
use stampede_net::{Call, InvokeError, Space};

use crate::error::{GraphError, Unmet};
use crate::executor::Pool;
use crate::graph::{start, Graph, GraphInner, Sched};
use crate::items::{ItemCollection, ItemsInner, Slot, Waiter};
use crate::placement::{hashed_home, rank_of, Spread};
use crate::steps::{PendingPut, StepCollection, TagCollection};
use crate::tag::Tag;

use message::{Control, Reply, Work};

/// The rank of the environment: it puts the initial items and tags, waits and releases.
const ENVIRONMENT: usize = 0;

/// How long a participant waits for the others to join.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest the environment waits between two waves while the graph runs.
const WAVE_EVERY: Duration = Duration::from_millis(100);

/// How often `serve` looks for lost participants (besides being released).
const SERVE_CHECK: Duration = Duration::from_millis(50);

/// An item, named across spaces.
type Key = (Arc<str>, Tag);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One space's share of a distributed graph.
pub(crate) struct Cluster {
    space: Space,
    graph: Weak<GraphInner>,
    name: String,
    /// Named code for work messages and for control.
    work: String,
    control: String,
    rank: usize,
    ranks: usize,
    /// The address space of each rank, once all joined (or why they did not).
    ids: Mutex<Option<Result<Arc<[String]>, GraphError>>>,
    joined: Condvar,
    /// Work messages sent, and applied here (quiescence).
    sent: AtomicU64,
    received: AtomicU64,
    /// Work messages being applied here now.
    handling: AtomicUsize,
    /// The rank to tell when this space is next idle (set by a probe).
    notify: Mutex<Option<usize>>,
    /// Idle notices received (at the environment).
    notices: Mutex<u64>,
    noticed: Condvar,
    released: Mutex<bool>,
    release: Condvar,
    /// At a home: the ranks waiting for an item not put yet.
    wanters: Mutex<HashMap<Key, Vec<usize>>>,
    /// At a home: the ranks holding a copy of a counted item.
    holders: Mutex<HashMap<Key, Vec<usize>>>,
    /// Items asked of their homes and not received yet.
    asked: Mutex<HashSet<Key>>,
    /// Copies here of counted items, whose gets are reported home.
    counted: Mutex<HashSet<Key>>,
    /// Placed instances started here, per step collection (for memoizing tag collections).
    ran: Mutex<HashMap<Arc<str>, HashSet<Tag>>>,
    /// What this space set up for the graph, undone when it leaves.
    held: Mutex<Vec<Held>>,
}

/// Something a space sets up for a distributed graph.
enum Held {
    /// Named code served.
    Code(String),
    /// The failure listener of one-way messages.
    Listener(u64),
    /// The rank's name.
    Name(String),
}

/// Every space's `(idle, sent, received)`, by rank.
type Wave = Vec<(bool, u64, u64)>;

impl Graph {
    /// Spreads the graph over address spaces of a Stampede application: this process is
    /// participant `rank` (from 0) of `ranks`, in graph `name`. Every participant builds
    /// the same graph (the same collection names, step code and tuners) and then calls
    /// this; it returns once all `ranks` have joined (within 30 s). Then rank 0, the
    /// *environment*, puts the initial items and tags and calls [`wait`](Graph::wait),
    /// reads its results (an item homed elsewhere is fetched by [`get`](Graph::get)) and
    /// calls [`release`](Graph::release); the others call [`serve`](Graph::serve) until
    /// released. A graph name serves one run: the next run of the same graph joins under
    /// another.
    ///
    /// Placement tuners say where work and items go: [`StepCollection::compute_on`] (an
    /// instance runs where its tag is put without it) and [`ItemCollection::home`] (a
    /// hash of the tag without it). Item and step collection names must be unique.
    ///
    /// ```no_run
    /// use stampede_coord::{Executor, Graph};
    /// use stampede_net::{Config, Space};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rank: usize = std::env::var("RANK")?.parse()?;
    /// let space = Space::join("squares", Config::peer().connect("tcp/127.0.0.1:7447"))?;
    /// let g = Graph::new(Executor::default());
    /// let (sq, n) = (g.items("sq"), g.tags("n"));
    /// let out = sq.clone();
    /// let square = g.steps("square", move |ctx, tag| {
    ///     let v = tag.int(0);
    ///     ctx.put(&out, tag.clone(), (v * v).to_le_bytes().to_vec());
    ///     Ok(())
    /// });
    /// square.compute_on(|tag| tag.int(0) as usize % 2); // odd numbers on rank 1
    /// sq.home(|tag| tag.int(0) as usize % 2); // stored where they are computed
    /// n.prescribes(&square);
    /// g.distribute(&space, "squares", rank, 2)?;
    /// if rank == 0 {
    ///     for i in 0..100 {
    ///         g.put_tag(&n, i);
    ///     }
    ///     g.wait()?;
    ///     let nine = g.get(&sq, 3)?.expect("fetched from rank 1");
    ///     assert_eq!(nine.as_bytes().unwrap().as_ref(), &9i64.to_le_bytes());
    ///     g.release()?;
    /// } else {
    ///     g.serve()?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Fails with [`GraphError::Distribution`] for a rank not below `ranks`, a graph
    /// distributed already, a collection name used twice, a graph name this space or
    /// another already uses for this rank, or participants that did not join in time (30 s),
    /// and with [`GraphError::SpaceLost`] as soon as one that announced itself is seen
    /// leaving or dying first; a graph whose distribution failed after these checks stays
    /// unusable (its waits fail with the same error).
    pub fn distribute(
        &self,
        space: &Space,
        name: &str,
        rank: usize,
        ranks: usize,
    ) -> Result<(), GraphError> {
        let bad = |why: String| Err(GraphError::Distribution(why));
        if rank >= ranks {
            return bad(format!("rank {rank} of {ranks}: ranks count from 0"));
        }
        if name.is_empty() || name.contains(['/', '*', '$', '?', '#']) {
            return bad(format!(
                "{name:?} cannot name a graph (empty, or with one of /*$?#)"
            ));
        }
        let g = &self.inner;
        let mut names = HashSet::new();
        for c in lock(&g.items).iter() {
            if !names.insert(c.name().to_owned()) {
                return bad(format!("two item collections are named {}", c.name()));
            }
        }
        names.clear();
        for s in lock(&g.steps).iter() {
            if !names.insert(s.name().to_owned()) {
                return bad(format!("two step collections are named {}", s.name()));
            }
        }
        let cluster = Arc::new(Cluster {
            space: space.clone(),
            graph: Arc::downgrade(g),
            name: name.to_owned(),
            work: format!("cnc/{name}"),
            control: format!("cnc/{name}/control"),
            rank,
            ranks,
            ids: Mutex::new(None),
            joined: Condvar::new(),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            handling: AtomicUsize::new(0),
            notify: Mutex::new(None),
            notices: Mutex::new(0),
            noticed: Condvar::new(),
            released: Mutex::new(false),
            release: Condvar::new(),
            wanters: Mutex::default(),
            holders: Mutex::default(),
            asked: Mutex::default(),
            counted: Mutex::default(),
            ran: Mutex::default(),
            held: Mutex::default(),
        });
        let spread: Arc<dyn Spread> = cluster.clone();
        if g.sched.spread.set(spread).is_err() {
            return bad("the graph is distributed already".into());
        }
        // The executor's counters show in the space's metrics (and its dashboard).
        space
            .metrics()
            .add(self.executor().metrics_source(&format!("cnc/{name}")));
        // From here on messages may arrive: they wait for the ranks' addresses below.
        let joined = cluster.join();
        let mut ids = lock(&cluster.ids);
        *ids = Some(joined.clone().map(Arc::from));
        cluster.joined.notify_all();
        drop(ids);
        if joined.is_err() {
            cluster.leave();
        }
        joined.map(|_| ())
    }

    /// Serves this participant's share of a distributed graph until the environment
    /// releases it ([`release`](Graph::release)): steps placed here run, items homed here
    /// are stored and handed out. Fails with [`GraphError::SpaceLost`] when the environment
    /// leaves or dies first (the loss of another participant is the environment's to
    /// report, and it releases the others), and with [`GraphError::Distribution`] on the
    /// environment itself or a graph that is not distributed.
    pub fn serve(&self) -> Result<(), GraphError> {
        self.serve_until(None).map(drop)
    }

    /// As [`serve`](Graph::serve), for at most `timeout`: `Ok(false)` if the graph is
    /// still being served then (call again to go on), so that a caller can also heed
    /// signals or a shutdown of its own.
    pub fn serve_timeout(&self, timeout: Duration) -> Result<bool, GraphError> {
        self.serve_until(Some(Instant::now() + timeout))
    }

    fn serve_until(&self, deadline: Option<Instant>) -> Result<bool, GraphError> {
        let c = self.cluster()?;
        if c.rank == ENVIRONMENT {
            return Err(GraphError::Distribution(
                "rank 0 is the environment: it waits and releases the others".into(),
            ));
        }
        let ids = c.ids()?;
        let mut released = lock(&c.released);
        loop {
            if *released {
                drop(released);
                c.leave();
                return Ok(true);
            }
            if !c.space.spaces().contains(&ids[ENVIRONMENT]) {
                drop(released);
                c.leave();
                return Err(GraphError::SpaceLost {
                    space: ids[ENVIRONMENT].clone(),
                    rank: ENVIRONMENT,
                });
            }
            let slice = match deadline {
                None => SERVE_CHECK,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(SERVE_CHECK),
                    _ => return Ok(false),
                },
            };
            released = c
                .release
                .wait_timeout(released, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Ends the run of a distributed graph, from the environment: every other
    /// participant's [`serve`](Graph::serve) returns, and items homed there can no longer
    /// be fetched. A participant that left by then needs no telling; fails with
    /// [`GraphError::Network`] for one that is alive and could not be told (the others
    /// are).
    pub fn release(&self) -> Result<(), GraphError> {
        let c = self.cluster()?;
        c.environment()?;
        let ids = c.ids()?;
        let calls: Vec<(usize, Result<Call, InvokeError>)> = c
            .others()
            .map(|r| {
                let call = c.space.call(&ids[r], &c.control, Control::Release.encode());
                (r, call)
            })
            .collect();
        let mut first = None;
        for (r, call) in calls {
            match call.and_then(Call::wait) {
                // Stopped serving the graph already: its environment was lost meanwhile.
                Ok(_) | Err(InvokeError::Unknown { .. }) => {}
                Err(e) => match c.lost_or_network(r, &e) {
                    // Released, it may leave before its answer does.
                    GraphError::SpaceLost { .. } => {}
                    e => {
                        first.get_or_insert(e);
                    }
                },
            }
        }
        *lock(&c.released) = true;
        c.release.notify_all();
        c.leave();
        first.map_or(Ok(()), Err)
    }

    /// This participant's rank and the graph's number of ranks, once distributed.
    pub fn rank(&self) -> Option<(usize, usize)> {
        self.cluster().ok().map(|c| (c.rank, c.ranks))
    }

    fn cluster(&self) -> Result<&Cluster, GraphError> {
        self.inner
            .sched
            .spread
            .get()
            .and_then(|s| s.as_any().downcast_ref::<Cluster>())
            .ok_or_else(|| GraphError::Distribution("the graph is not distributed".into()))
    }
}

impl Cluster {
    /// Serves the graph's named code, announces this rank and waits for the others.
    fn join(self: &Arc<Self>) -> Result<Vec<String>, GraphError> {
        let bad = |why: String| GraphError::Distribution(why);
        let weak = Arc::downgrade(self);
        self.space
            .serve(&self.work, move |caller, arg| match weak.upgrade() {
                Some(c) => c.on_work(caller, &arg),
                None => Err("the graph is gone".into()),
            })
            .map_err(|e| bad(format!("cannot serve {}: {e}", self.work)))?;
        lock(&self.held).push(Held::Code(self.work.clone()));
        let weak = Arc::downgrade(self);
        self.space
            .serve(&self.control, move |caller, arg| match weak.upgrade() {
                Some(c) => c.on_control(caller, &arg),
                None => Err("the graph is gone".into()),
            })
            .map_err(|e| bad(format!("cannot serve {}: {e}", self.control)))?;
        lock(&self.held).push(Held::Code(self.control.clone()));
        let weak = Arc::downgrade(self);
        let id = self.space.on_invoke_failure(move |e| {
            if let Some(c) = weak.upgrade() {
                c.invoke_failed(e);
            }
        });
        lock(&self.held).push(Held::Listener(id));
        let name = self.rank_name(self.rank);
        self.space.register_service(&name, "").map_err(|e| {
            bad(format!(
                "cannot announce rank {} of graph {}: {e}",
                self.rank, self.name
            ))
        })?;
        lock(&self.held).push(Held::Name(name));
        // Waits for every rank's announcement, then until each is known alive (messages go
        // only to spaces known alive). A participant that announced itself and has left
        // since will not serve this run: that fails it now, not at the deadline.
        let deadline = Instant::now() + JOIN_TIMEOUT;
        let mut ids: Vec<Option<String>> = vec![None; self.ranks];
        loop {
            for (r, id) in ids.iter().enumerate() {
                if let Some(id) = id.as_ref().filter(|id| self.space.has_left(id)) {
                    return Err(GraphError::SpaceLost {
                        space: id.clone(),
                        rank: r,
                    });
                }
            }
            for (r, id) in ids.iter_mut().enumerate() {
                if id.is_none() {
                    *id = self.space.record(&self.rank_name(r)).map(|rec| rec.space);
                }
            }
            let live = self.space.spaces();
            let waiting = ids
                .iter()
                .position(|id| !id.as_ref().is_some_and(|id| live.contains(id)));
            let Some(r) = waiting else {
                return Ok(ids.into_iter().flatten().collect());
            };
            if Instant::now() >= deadline {
                return Err(bad(if ids[r].is_none() {
                    format!(
                        "rank {r} of graph {} did not join within {JOIN_TIMEOUT:?}",
                        self.name
                    )
                } else {
                    format!(
                        "rank {r} of graph {} joined but is not seen alive",
                        self.name
                    )
                }));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops serving the graph and withdraws this rank's name: what it set up, and no more
    /// (another graph of this process may hold the same names).
    fn leave(&self) {
        for held in std::mem::take(&mut *lock(&self.held)) {
            match held {
                Held::Code(name) => {
                    self.space.unserve(&name);
                }
                Held::Listener(id) => {
                    self.space.remove_invoke_failure(id);
                }
                Held::Name(name) => {
                    self.space.unregister(&name);
                }
            }
        }
    }

    fn environment(&self) -> Result<(), GraphError> {
        if self.rank == ENVIRONMENT {
            Ok(())
        } else {
            Err(GraphError::Distribution(format!(
                "rank {} serves; rank 0, the environment, waits and releases",
                self.rank
            )))
        }
    }

    fn rank_name(&self, rank: usize) -> String {
        format!("cnc/{}/rank/{rank}", self.name)
    }

    fn others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.ranks).filter(move |&r| r != self.rank)
    }

    /// The address spaces by rank, waiting for the join to end.
    fn ids(&self) -> Result<Arc<[String]>, GraphError> {
        let mut ids = lock(&self.ids);
        loop {
            if let Some(r) = ids.as_ref() {
                return r.clone();
            }
            ids = self
                .joined
                .wait(ids)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn rank_of_space(&self, space: &str) -> Result<usize, String> {
        let ids = self.ids().map_err(|e| e.to_string())?;
        ids.iter()
            .position(|id| id == space)
            .ok_or_else(|| format!("address space {space} is no participant of this graph"))
    }

    fn fail(&self, e: GraphError) {
        if let Some(g) = self.graph.upgrade() {
            g.sched.fail(e);
        }
    }

    fn lost_or_network(&self, rank: usize, e: &InvokeError) -> GraphError {
        let space = e.space().unwrap_or_default().to_owned();
        if self.space.spaces().contains(&space) {
            GraphError::Network {
                space,
                rank,
                reason: e.to_string(),
            }
        } else {
            GraphError::SpaceLost { space, rank }
        }
    }

    /// Sends a work message to `rank` (never this one).
    fn send(&self, rank: usize, m: &Work) {
        let ids = match self.ids() {
            Ok(ids) => ids,
            Err(e) => return self.fail(e),
        };
        self.sent.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = self.space.invoke(&ids[rank], &self.work, m.encode()) {
            let e = self.lost_or_network(rank, &e);
            self.fail(e);
        }
    }

    /// A one-way message of this graph failed where it was sent.
    fn invoke_failed(&self, e: &InvokeError) {
        let name = match e {
            InvokeError::Unknown { name, .. } | InvokeError::Failed { name, .. } => name,
            _ => return,
        };
        if *name != self.work && *name != self.control {
            return;
        }
        let space = e.space().unwrap_or_default();
        let rank = self.rank_of_space(space).unwrap_or(usize::MAX);
        self.fail(GraphError::Network {
            space: space.to_owned(),
            rank,
            reason: e.to_string(),
        });
    }

    fn home(&self, items: &ItemsInner, tag: &Tag) -> Result<usize, GraphError> {
        let rank = rank_of(&items.home, tag).unwrap_or_else(|| hashed_home(tag, self.ranks));
        if rank < self.ranks {
            Ok(rank)
        } else {
            Err(GraphError::NoSuchRank {
                tuner: items.name.to_string(),
                tag: tag.clone(),
                rank,
                ranks: self.ranks,
            })
        }
    }

    fn items_named(g: &GraphInner, name: &str) -> Result<ItemCollection, String> {
        lock(&g.items)
            .iter()
            .find(|c| c.name() == name)
            .cloned()
            .ok_or_else(|| format!("no item collection is named {name} here"))
    }

    fn steps_named(g: &GraphInner, name: &str) -> Result<StepCollection, String> {
        lock(&g.steps)
            .iter()
            .find(|s| s.name() == name)
            .cloned()
            .ok_or_else(|| format!("no step collection is named {name} here"))
    }

    /// Whether this space starts the placed instance of `steps` for `tag` for the first
    /// time.
    fn first_run(&self, steps: &StepCollection, tag: &Tag) -> bool {
        lock(&self.ran)
            .entry(steps.inner.name.clone())
            .or_default()
            .insert(tag.clone())
    }

    /// A put at its home: stored, then sent to the spaces that asked for it.
    fn put_home(&self, sched: &Sched, put: PendingPut, by: &str, from: Option<usize>) {
        let key = (put.items.name.clone(), put.tag.clone());
        let counted = put.gets.is_some();
        let value = put.value.clone();
        let items = put.items.clone();
        // The putter holds a copy: recorded before the item can be got here, so that its
        // last get here frees that copy too.
        if let (true, Some(r)) = (counted, from) {
            lock(&self.holders).entry(key.clone()).or_default().push(r);
        }
        if !sched.store_here(put, by) {
            return;
        }
        let wanting = lock(&self.wanters).remove(&key).unwrap_or_default();
        if counted && !wanting.is_empty() {
            // Before the copies leave: a copy's last get may come back at once. (The item
            // cannot be freed before then: the spaces that asked for it get it.)
            lock(&self.holders)
                .entry(key.clone())
                .or_default()
                .extend(wanting.iter().copied());
        }
        for r in wanting {
            self.send(
                r,
                &Work::Copy {
                    items: items.name.to_string(),
                    tag: key.1.clone(),
                    counted,
                    value: value.clone(),
                },
            );
        }
    }

    /// `from` asks for an item homed here.
    fn want(&self, from: usize, items: &ItemsInner, tag: Tag) {
        let key = (items.name.clone(), tag.clone());
        let slots = items.slots();
        let here = match slots.get(&tag) {
            Some(Slot::Present { value, gets_left }) => {
                Some(Some((value.clone(), gets_left.is_some())))
            }
            Some(Slot::Freed) => Some(None),
            _ => None,
        };
        let Some(here) = here else {
            // Under the slots' lock, so that a put stored after this finds the wanter.
            lock(&self.wanters).entry(key).or_default().push(from);
            return;
        };
        drop(slots);
        let name = items.name.to_string();
        let reply = match here {
            Some((value, counted)) => {
                if counted {
                    lock(&self.holders).entry(key).or_default().push(from);
                }
                Work::Copy {
                    items: name,
                    tag,
                    counted,
                    value,
                }
            }
            None => Work::Gone { items: name, tag },
        };
        self.send(from, &reply);
    }

    /// The copy of an item this space asked for.
    fn copy(&self, via: &Pool, items: &ItemCollection, tag: Tag, counted: bool, value: Item) {
        let key = (items.inner.name.clone(), tag.clone());
        if counted {
            lock(&self.counted).insert(key.clone());
        }
        lock(&self.asked).remove(&key);
        store_copy(via, &items.inner, tag, value);
    }

    /// The item this space asked for was freed at its home: its waiters run again and
    /// find it freed.
    fn gone(&self, via: &Pool, items: &ItemsInner, tag: Tag) {
        lock(&self.asked).remove(&(items.name.clone(), tag.clone()));
        let waiters = match items.slots().insert(tag, Slot::Freed) {
            Some(Slot::Waiting(w)) => w,
            _ => Vec::new(),
        };
        wake(via, waiters);
    }

    /// A get of a copy of a counted item homed here completed.
    fn got(&self, sched: &Sched, items: &ItemsInner, tag: Tag, step: String) {
        let mut slots = items.slots();
        let last = match slots.get_mut(&tag) {
            Some(Slot::Present {
                gets_left: Some(n), ..
            }) => {
                *n = n.saturating_sub(1);
                *n == 0
            }
            Some(Slot::Freed) => {
                drop(slots);
                return sched.fail(GraphError::Freed {
                    collection: items.name.to_string(),
                    tag,
                    step,
                });
            }
            _ => false,
        };
        if last {
            slots.insert(tag.clone(), Slot::Freed);
            drop(slots);
            self.freed(items, &tag);
        }
    }

    /// The home freed an item this space holds a copy of.
    fn free(&self, items: &ItemsInner, tag: Tag) {
        lock(&self.counted).remove(&(items.name.clone(), tag.clone()));
        let mut slots = items.slots();
        if matches!(slots.get(&tag), Some(Slot::Present { .. })) {
            slots.insert(tag, Slot::Freed);
        }
    }

    fn on_work(&self, caller: &str, arg: &Item) -> Result<Item, String> {
        self.handling.fetch_add(1, Ordering::SeqCst);
        let r = self.apply(caller, arg);
        self.received.fetch_add(1, Ordering::SeqCst);
        self.handling.fetch_sub(1, Ordering::SeqCst);
        if let Some(g) = self.graph.upgrade() {
            if let Err(e) = &r {
                let rank = self.rank_of_space(caller).unwrap_or(usize::MAX);
                g.sched.fail(GraphError::Network {
                    space: caller.to_owned(),
                    rank,
                    reason: format!("a message from there: {e}"),
                });
            }
            self.quiet(&g.sched);
        }
        r.map(|()| Item::from(Vec::new()))
    }

    fn apply(&self, caller: &str, arg: &Item) -> Result<(), String> {
        let from = self.rank_of_space(caller)?;
        let g = self.graph.upgrade().ok_or("the graph is gone")?;
        let sched = &g.sched;
        match Work::decode(arg)? {
            Work::Run { steps, tag, memo } => {
                let s = Self::steps_named(&g, &steps)?;
                if !memo || self.first_run(&s, &tag) {
                    start(&sched.pool, s, tag);
                }
            }
            Work::Put {
                items,
                tag,
                gets,
                by,
                value,
            } => {
                let c = Self::items_named(&g, &items)?;
                let put = PendingPut {
                    items: c.inner.clone(),
                    tag,
                    value,
                    gets,
                };
                self.put_home(sched, put, &by, Some(from));
            }
            Work::Want { items, tag } => {
                self.want(from, &Self::items_named(&g, &items)?.inner, tag);
            }
            Work::Copy {
                items,
                tag,
                counted,
                value,
            } => {
                let c = Self::items_named(&g, &items)?;
                self.copy(&sched.pool, &c, tag, counted, value);
            }
            Work::Gone { items, tag } => {
                self.gone(&sched.pool, &Self::items_named(&g, &items)?.inner, tag);
            }
            Work::Got { items, tag, step } => {
                self.got(sched, &Self::items_named(&g, &items)?.inner, tag, step);
            }
            Work::Free { items, tag } => self.free(&Self::items_named(&g, &items)?.inner, tag),
        }
        Ok(())
    }

    fn on_control(&self, caller: &str, arg: &Item) -> Result<Item, String> {
        let g = self.graph.upgrade().ok_or("the graph is gone")?;
        let reply = match Control::decode(arg)? {
            Control::Probe => {
                // Armed before the state is read: a space that goes idle in between says so.
                *lock(&self.notify) = Some(self.rank_of_space(caller)?);
                self.status(&g.sched)
            }
            Control::Idle => {
                *lock(&self.notices) += 1;
                self.noticed.notify_all();
                Reply::Done
            }
            Control::Failed(e) => {
                g.sched.fail(GraphError::Remote {
                    space: caller.to_owned(),
                    rank: self.rank_of_space(caller)?,
                    error: Box::new(e),
                });
                Reply::Done
            }
            Control::Report => Reply::Unmet(Self::unmet_here(&g)),
            Control::Fetch { items, tag } => {
                let c = Self::items_named(&g, &items)?;
                let slots = c.inner.slots();
                Reply::Fetched(match slots.get(&tag) {
                    Some(Slot::Present { value, .. }) => Some(value.clone()),
                    _ => None,
                })
            }
            Control::Release => {
                *lock(&self.released) = true;
                self.release.notify_all();
                Reply::Done
            }
        };
        Ok(reply.encode())
    }

    fn status(&self, sched: &Sched) -> Reply {
        let received = self.received.load(Ordering::SeqCst);
        let sent = self.sent.load(Ordering::SeqCst);
        let quiet = sched.outstanding.load(Ordering::SeqCst) == 0
            && self.handling.load(Ordering::SeqCst) == 0;
        Reply::Status {
            quiet,
            sent,
            received,
        }
    }

    fn unmet_here(g: &GraphInner) -> Vec<Unmet> {
        lock(&g.items)
            .iter()
            .flat_map(|c| c.inner.unmet())
            .collect()
    }

    /// Every space's state, this one's read here.
    fn wave(&self, sched: &Sched) -> Result<Wave, GraphError> {
        let ids = self.ids()?;
        let mut calls = Vec::new();
        for r in self.others() {
            match self
                .space
                .call(&ids[r], &self.control, Control::Probe.encode())
            {
                Ok(c) => calls.push((r, c)),
                Err(e) => return Err(self.lost_or_network(r, &e)),
            }
        }
        let mut wave = vec![(false, 0, 0); self.ranks];
        *lock(&self.notify) = Some(self.rank);
        if let Reply::Status {
            quiet,
            sent,
            received,
        } = self.status(sched)
        {
            wave[self.rank] = (quiet, sent, received);
        }
        for (r, call) in calls {
            let answer = call.wait().map_err(|e| self.lost_or_network(r, &e))?;
            match Reply::decode(&answer) {
                Ok(Reply::Status {
                    quiet,
                    sent,
                    received,
                }) => wave[r] = (quiet, sent, received),
                other => {
                    return Err(GraphError::Network {
                        space: ids[r].clone(),
                        rank: r,
                        reason: format!("a probe answered with {other:?}"),
                    })
                }
            }
        }
        Ok(wave)
    }

    /// Every space's unmet gets, merged.
    fn unmet_everywhere(&self, g: &GraphInner) -> Result<Vec<Unmet>, GraphError> {
        let ids = self.ids()?;
        let mut all = Self::unmet_here(g);
        for r in self.others() {
            let answer = self
                .space
                .call(&ids[r], &self.control, Control::Report.encode())
                .and_then(Call::wait)
                .map_err(|e| self.lost_or_network(r, &e))?;
            match Reply::decode(&answer) {
                Ok(Reply::Unmet(u)) => all.extend(u),
                other => {
                    return Err(GraphError::Network {
                        space: ids[r].clone(),
                        rank: r,
                        reason: format!("a report answered with {other:?}"),
                    })
                }
            }
        }
        let order: HashMap<String, usize> = lock(&g.items)
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name().to_owned(), i))
            .collect();
        let mut merged: BTreeMap<(usize, String, Tag), Vec<(String, Tag)>> = BTreeMap::new();
        for u in all {
            let at = order.get(&u.collection).copied().unwrap_or(usize::MAX);
            merged
                .entry((at, u.collection, u.tag))
                .or_default()
                .extend(u.waiting);
        }
        Ok(merged
            .into_iter()
            .map(|((_, collection, tag), mut waiting)| {
                waiting.sort();
                Unmet {
                    collection,
                    tag,
                    waiting,
                }
            })
            .collect())
    }
}

/// Stores a copy of an item homed elsewhere, unless one is here already (or was freed),
/// and wakes what waits for it.
fn store_copy(via: &Pool, items: &ItemsInner, tag: Tag, value: Item) {
    let waiters = {
        let mut slots = items.slots();
        match slots.get_mut(&tag) {
            Some(Slot::Present { .. } | Slot::Freed) => return,
            Some(slot) => match std::mem::replace(
                slot,
                Slot::Present {
                    value,
                    gets_left: None,
                },
            ) {
                Slot::Waiting(w) => w,
                _ => Vec::new(),
            },
            None => {
                slots.insert(
                    tag,
                    Slot::Present {
                        value,
                        gets_left: None,
                    },
                );
                Vec::new()
            }
        }
    };
    wake(via, waiters);
}

fn wake(via: &Pool, waiters: Vec<Waiter>) {
    for w in waiters {
        match w {
            Waiter::Rerun(i) => i.arrived(false, via),
            Waiter::Input(i) => i.arrived(true, via),
        }
    }
}

impl Spread for Cluster {
    fn put(&self, sched: &Sched, put: PendingPut, by: &str) {
        let home = match self.home(&put.items, &put.tag) {
            Ok(r) => r,
            Err(e) => return sched.fail(e),
        };
        if home == self.rank {
            return self.put_home(sched, put, by, None);
        }
        let key = (put.items.name.clone(), put.tag.clone());
        // Sent before the putter's own gets of its copy can report to the home.
        self.send(
            home,
            &Work::Put {
                items: put.items.name.to_string(),
                tag: put.tag.clone(),
                gets: put.gets,
                by: by.to_owned(),
                value: put.value.clone(),
            },
        );
        if put.gets.is_some() {
            lock(&self.counted).insert(key);
        }
        // A second put is found at the home; the copy here may already have come back
        // from there, for a get here that asked first.
        store_copy(&sched.pool, &put.items, put.tag, put.value);
    }

    fn place(&self, tags: &TagCollection, steps: &StepCollection, tag: &Tag) -> bool {
        let Some(rank) = rank_of(&steps.inner.compute_on, tag) else {
            return false;
        };
        if rank >= self.ranks {
            steps.inner.sched.fail(GraphError::NoSuchRank {
                tuner: steps.name().to_owned(),
                tag: tag.clone(),
                rank,
                ranks: self.ranks,
            });
            return true;
        }
        let memo = tags.inner.memoizes();
        if rank == self.rank {
            return memo && !self.first_run(steps, tag);
        }
        self.send(
            rank,
            &Work::Run {
                steps: steps.name().to_owned(),
                tag: tag.clone(),
                memo,
            },
        );
        true
    }

    fn wanted(&self, items: &Arc<ItemsInner>, tag: &Tag) {
        let home = match self.home(items, tag) {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        if home == self.rank {
            return;
        }
        let waiting = matches!(items.slots().get(tag), Some(Slot::Waiting(w)) if !w.is_empty());
        if waiting && lock(&self.asked).insert((items.name.clone(), tag.clone())) {
            self.send(
                home,
                &Work::Want {
                    items: items.name.to_string(),
                    tag: tag.clone(),
                },
            );
        }
    }

    fn committed(&self, gets: &[(Arc<ItemsInner>, Tag)], step: &str) {
        for (items, tag) in gets {
            if !lock(&self.counted).contains(&(items.name.clone(), tag.clone())) {
                continue;
            }
            match self.home(items, tag) {
                Ok(home) => self.send(
                    home,
                    &Work::Got {
                        items: items.name.to_string(),
                        tag: tag.clone(),
                        step: step.to_owned(),
                    },
                ),
                Err(e) => self.fail(e),
            }
        }
    }

    fn freed(&self, items: &ItemsInner, tag: &Tag) {
        let holders = lock(&self.holders)
            .remove(&(items.name.clone(), tag.clone()))
            .unwrap_or_default();
        for r in holders {
            self.send(
                r,
                &Work::Free {
                    items: items.name.to_string(),
                    tag: tag.clone(),
                },
            );
        }
    }

    fn failed(&self, e: &GraphError) {
        if matches!(e, GraphError::Remote { .. }) {
            return;
        }
        let Some(Ok(ids)) = lock(&self.ids).clone() else {
            return;
        };
        let told = Control::Failed(e.clone()).encode();
        for r in self.others() {
            // A space that cannot be told is lost or unreachable: its own wait says so.
            let _ = self.space.invoke(&ids[r], &self.control, told.clone());
        }
    }

    fn quiet(&self, sched: &Sched) {
        if sched.outstanding.load(Ordering::SeqCst) != 0
            || self.handling.load(Ordering::SeqCst) != 0
        {
            return;
        }
        let Some(r) = lock(&self.notify).take() else {
            return;
        };
        if r == self.rank {
            *lock(&self.notices) += 1;
            self.noticed.notify_all();
            return;
        }
        if let Ok(ids) = self.ids() {
            // A lost environment is noticed by its own side; nothing to tell.
            let _ = self
                .space
                .invoke(&ids[r], &self.control, Control::Idle.encode());
        }
    }

    fn wait(&self, g: &Arc<GraphInner>, deadline: Option<Instant>) -> Result<bool, GraphError> {
        self.environment()?;
        let sched = &g.sched;
        let failure = || lock(&sched.failure).clone();
        let mut last: Option<Wave> = None;
        loop {
            if !sched.wait_quiet(deadline) {
                return Ok(false);
            }
            if let Some(e) = failure() {
                return Err(e);
            }
            let seen = *lock(&self.notices);
            let wave = self.wave(sched)?;
            if let Some(e) = failure() {
                return Err(e);
            }
            let idle = wave.iter().all(|w| w.0);
            let balanced =
                wave.iter().map(|w| w.1).sum::<u64>() == wave.iter().map(|w| w.2).sum::<u64>();
            if idle && balanced {
                if last.as_ref() == Some(&wave) {
                    break;
                }
                last = Some(wave);
                continue;
            }
            last = None;
            // Until a probed space says it is idle, or the next wave is due.
            let mut notices = lock(&self.notices);
            let until = Instant::now() + WAVE_EVERY;
            while *notices == seen {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return Ok(false);
                }
                let end = deadline.map_or(until, |d| d.min(until));
                if now >= end {
                    break;
                }
                notices = self
                    .noticed
                    .wait_timeout(notices, end - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        if let Some(e) = failure() {
            return Err(e);
        }
        let unmet = self.unmet_everywhere(g)?;
        if unmet.is_empty() {
            Ok(true)
        } else {
            Err(GraphError::Deadlock(unmet))
        }
    }

    fn fetch(&self, items: &ItemsInner, tag: &Tag) -> Result<Option<Item>, GraphError> {
        let home = self.home(items, tag)?;
        if home == self.rank {
            return Ok(None);
        }
        let ids = self.ids()?;
        let fetch = Control::Fetch {
            items: items.name.to_string(),
            tag: tag.clone(),
        };
        // A home that cannot be asked is an error, never an absent item.
        let answer = self
            .space
            .call(&ids[home], &self.control, fetch.encode())
            .and_then(Call::wait)
            .map_err(|e| self.lost_or_network(home, &e))?;
        let wrong = |reason: String| GraphError::Network {
            space: ids[home].to_string(),
            rank: home,
            reason,
        };
        match Reply::decode(&answer) {
            Ok(Reply::Fetched(item)) => Ok(item),
            Ok(other) => Err(wrong(format!("a fetch was answered with {other:?}"))),
            Err(e) => Err(wrong(format!("a fetch's answer: {e}"))),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
