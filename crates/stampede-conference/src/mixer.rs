//! The Stampede mixer: takes the frames of one slot from every participant's camera channel,
//! composes them into one image and puts it into the mix channel for every display.
//!
//! In the multi-threaded version (the paper's third) each participant has its own thread and
//! task, which fetches that participant's frames and hands them to a designated compositor
//! thread; the single-threaded version (the paper's second) fetches from one participant
//! after another in the compositor's own loop. Both follow the same rules:
//!
//! * **Slots.** The compositor composes slot `next`, then `next + 1`, and so on. Once it
//!   begins a slot, that slot's member set is fixed; a newcomer whose first frame is `f`
//!   joins at `max(f, first slot not begun)` and its older frames are consumed unused. A
//!   member that leaves (its name goes, or its channel fails) is out from the first slot not
//!   begun; in a slot already begun its tile is empty.
//! * **Holes.** A frame the camera skipped (a later one exists) or that can never appear
//!   (`Gone`) is an empty tile, counted `missing`; a frame that has not arrived `stall`
//!   after the slot began is an empty tile, counted `stalled`, and arrives `late` if ever.
//! * **Backpressure.** A member's thread runs at most [`AHEAD`] slots ahead of the
//!   compositor. It consumes a frame only once the compositor has it, so a camera channel
//!   (capacity 4) fills and blocks its camera when the mixer falls behind. The mix channel
//!   and the clock live in their own time zone ([`MIX_ZONE`]): a composite a display has not
//!   consumed yet holds back only the mix channel, and when that is full (capacity 8) the
//!   compositor's put waits, which stops the members' threads and then the cameras. In one
//!   zone, every camera would instead wait on the slowest display's consumes through the
//!   shared watermark, a feedback loop several network hops long for every frame.
//! * **Clock.** The register `conf/clock` holds the next slot to compose: cameras start a
//!   little ahead of it. With no members the compositor waits; when the only members start
//!   later than `next`, it moves on to the earliest start (counted `idle`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use stampede_core::{Channel, InputConnection, OutputConnection, Register, Task};
use stampede_core::{
    ContainerOptions, DType, GetError, Item, NdArray, Selector, StmError, Timestamp, INFINITY,
};
use stampede_net::{Kind, NameEvent, NameRecord, Space};

use crate::error::ConferenceError;
use crate::frame::{compose, FrameSize, Tile, HEADER_LEN};
use crate::join::{task_at_least, task_at_least_in, JoinOptions, SLICE};
use crate::protocol::{
    clock_item, parse_cam_name, CLOCK_REGISTER, MIX_CAPACITY, MIX_CHANNEL, MIX_ZONE,
};
use crate::report::{emit, rate, MixerReport};
use crate::stop::Stop;

/// How many slots a member's thread may fetch ahead of the slot being composed.
pub const AHEAD: Timestamp = 2;

/// How the mixer spreads its work over threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Threads {
    /// One thread per participant plus a compositor (the paper's third version).
    #[default]
    Multi,
    /// One thread fetching from each participant in turn (the paper's second version).
    Single,
}

/// What the mixer is told.
#[derive(Clone, Debug)]
pub struct MixerOptions {
    /// Application, endpoint to listen on, timeouts.
    pub join: JoinOptions,
    /// Threading.
    pub threads: Threads,
    /// How long a slot waits for its members' frames.
    pub stall: Duration,
    /// How long a composite waits for room in the mix channel before it is dropped.
    pub put_timeout: Duration,
    /// Cell size of a composite none of whose frames arrived, before any frame was seen.
    pub frame: FrameSize,
    /// How often to print the statistics.
    pub report_every: Duration,
}

impl Default for MixerOptions {
    fn default() -> Self {
        MixerOptions {
            join: JoinOptions::default(),
            threads: Threads::Multi,
            stall: Duration::from_secs(1),
            put_timeout: Duration::from_secs(1),
            frame: FrameSize::from_size_kb(74, crate::frame::DEFAULT_WIDTH),
            report_every: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    slots: AtomicU64,
    composites: AtomicU64,
    missing: AtomicU64,
    stalled: AtomicU64,
    dropped: AtomicU64,
    late: AtomicU64,
    malformed: AtomicU64,
    idle: AtomicU64,
}

impl Counters {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    fn report(&self, members: Vec<u32>, fps: f64) -> MixerReport {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MixerReport {
            event: "mixer".into(),
            slots: l(&self.slots),
            composites: l(&self.composites),
            missing: l(&self.missing),
            stalled: l(&self.stalled),
            dropped: l(&self.dropped),
            late: l(&self.late),
            malformed: l(&self.malformed),
            idle: l(&self.idle),
            fps,
            members,
        }
    }
}

/// A participant as the compositor knows it.
#[derive(Debug)]
struct Member {
    /// Tells this registration from an earlier one of the same id.
    gen: u64,
    /// The address space that owns its camera channel.
    space: String,
    /// The first slot it is in; `None` until its first frame is known.
    start: Option<Timestamp>,
    /// The first slot it is no longer in.
    end: Option<Timestamp>,
    /// Tells its thread to stop.
    quit: Arc<AtomicBool>,
}

/// Who is in which slot. Guarded by one lock, so that a slot's member set and a newcomer's
/// start are decided in one order.
#[derive(Debug, Default)]
struct Roster {
    /// The next slot to compose; while `begun`, the one being composed.
    next: Timestamp,
    begun: bool,
    members: BTreeMap<u32, Member>,
    next_gen: u64,
    stopping: bool,
}

impl Roster {
    fn first_not_begun(&self) -> Timestamp {
        if self.begun {
            self.next + 1
        } else {
            self.next
        }
    }

    fn active_at(&self, t: Timestamp) -> Vec<(u32, u64)> {
        self.members
            .iter()
            .filter(|(_, m)| m.start.is_some_and(|s| s <= t) && m.end.map_or(true, |e| t < e))
            .map(|(&id, m)| (id, m.gen))
            .collect()
    }

    fn earliest_start_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.members
            .values()
            .filter(|m| m.end.is_none())
            .filter_map(|m| m.start.filter(|&s| s > t))
            .min()
    }

    /// Forgets members that can never be in a slot again.
    fn prune(&mut self) {
        let next = self.next;
        self.members.retain(|_, m| match (m.start, m.end) {
            (_, None) => true,
            (Some(s), Some(e)) => e > next && e > s,
            (None, Some(_)) => false,
        });
    }

    fn end(&mut self, id: u32, gen: u64) -> bool {
        let at = self.first_not_begun();
        match self.members.get_mut(&id) {
            Some(m) if m.gen == gen => {
                m.quit.store(true, Ordering::SeqCst);
                m.end.get_or_insert(at);
                true
            }
            _ => false,
        }
    }
}

/// What the compositor and the members' threads share.
#[derive(Debug, Default)]
struct Hub {
    roster: Mutex<Roster>,
    changed: Condvar,
    counters: Counters,
    /// Members of the slot composed last, for the reports.
    in_composite: Mutex<Vec<u32>>,
    /// Set with the roster's `stopping`, for waits that do not hold the roster's lock.
    quit: AtomicBool,
}

enum Pace {
    Go,
    /// The compositor has passed this member's slot: go on from this one.
    Skip(Timestamp),
    Quit,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Roster> {
        self.roster
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, Roster>, d: Duration) -> MutexGuard<'a, Roster> {
        match self.changed.wait_timeout(g, d) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }

    /// A new registration of `id` by `space`; `None` if it is the one already followed.
    fn add(&self, id: u32, space: &str) -> Option<(u64, Arc<AtomicBool>)> {
        let mut r = self.lock();
        if r.stopping {
            return None;
        }
        if let Some(m) = r.members.get(&id) {
            if m.space == space && m.end.is_none() {
                return None;
            }
            // A newer registration of the id replaces the old one, whose thread stops.
            m.quit.store(true, Ordering::SeqCst);
        }
        let gen = r.next_gen;
        r.next_gen += 1;
        let quit = Arc::new(AtomicBool::new(false));
        r.members.insert(
            id,
            Member {
                gen,
                space: space.to_owned(),
                start: None,
                end: None,
                quit: quit.clone(),
            },
        );
        self.changed.notify_all();
        Some((gen, quit))
    }

    /// `id`'s name went away from `space`: it leaves. Returns its generation.
    fn remove(&self, id: u32, space: &str) -> Option<u64> {
        let mut r = self.lock();
        let gen = r.members.get(&id).filter(|m| m.space == space)?.gen;
        r.end(id, gen);
        self.changed.notify_all();
        Some(gen)
    }

    fn leave(&self, id: u32, gen: u64) {
        if self.lock().end(id, gen) {
            self.changed.notify_all();
        }
    }

    /// Decides the first slot of a member whose first frame is `first`.
    fn join(&self, id: u32, gen: u64, first: Timestamp) -> Option<Timestamp> {
        let mut r = self.lock();
        let not_begun = r.first_not_begun();
        let m = r
            .members
            .get_mut(&id)
            .filter(|m| m.gen == gen && m.end.is_none())?;
        let start = first.max(not_begun);
        m.start = Some(start);
        self.changed.notify_all();
        Some(start)
    }

    fn pace(&self, t: Timestamp, quit: &AtomicBool) -> Pace {
        let mut r = self.lock();
        loop {
            if r.stopping || quit.load(Ordering::SeqCst) {
                return Pace::Quit;
            }
            if t < r.next {
                return Pace::Skip(r.next);
            }
            if t <= r.next + AHEAD {
                return Pace::Go;
            }
            r = self.wait(r, SLICE);
        }
    }

    /// The next slot to compose and its members, waiting while there are none; `None` once
    /// stopping.
    fn begin_slot(&self) -> Option<(Timestamp, Vec<(u32, u64)>)> {
        let mut r = self.lock();
        loop {
            if r.stopping {
                return None;
            }
            r.prune();
            let active = r.active_at(r.next);
            if !active.is_empty() {
                r.begun = true;
                return Some((r.next, active));
            }
            match r.earliest_start_after(r.next) {
                Some(s) => {
                    Counters::add(&self.counters.idle, (s - r.next) as u64);
                    r.next = s;
                }
                None => {
                    self.set_in_composite(Vec::new());
                    r = self.wait(r, SLICE);
                }
            }
        }
    }

    fn finish_slot(&self, slot: Timestamp) {
        let mut r = self.lock();
        r.next = slot + 1;
        r.begun = false;
        self.changed.notify_all();
    }

    fn stop(&self) {
        let mut r = self.lock();
        r.stopping = true;
        self.quit.store(true, Ordering::SeqCst);
        for m in r.members.values() {
            m.quit.store(true, Ordering::SeqCst);
        }
        self.changed.notify_all();
    }

    fn set_in_composite(&self, ids: Vec<u32>) {
        *self
            .in_composite
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ids;
    }

    fn in_composite(&self) -> Vec<u32> {
        self.in_composite
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The outcome of one attempt to fetch a member's frame.
enum Fetch {
    Frame(Item),
    /// The camera skipped the slot, or the frame can never appear.
    Missing,
    NotYet,
    Lost(GetError),
}

/// An input connection to one participant's camera channel, with the task that holds it.
struct Link {
    input: InputConnection<Channel>,
    _task: Task,
}

impl Link {
    fn open(
        space: &Space,
        name: &str,
        wait: Duration,
        quit: &AtomicBool,
    ) -> Result<Link, ConferenceError> {
        let deadline = Instant::now() + wait;
        let ch = loop {
            match space.lookup_channel(name, SLICE) {
                Ok(ch) => break ch,
                Err(e) if Instant::now() >= deadline || quit.load(Ordering::SeqCst) => {
                    return Err(e.into())
                }
                Err(_) => {}
            }
        };
        // At the zone's floor the connection sees every frame not yet reclaimed (rule 3).
        let task = task_at_least(space, 0)?;
        let input = loop {
            match task.attach_input(&ch) {
                Ok(input) => break input,
                // A name can be seen a moment before its owner serves the channel.
                Err(StmError::Closed)
                    if Instant::now() < deadline && !quit.load(Ordering::SeqCst) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e.into()),
            }
        };
        // The task only reads: what its connection has not consumed holds the frames, so
        // its virtual time need not hold anything back.
        task.set_virtual_time(INFINITY)?;
        Ok(Link { input, _task: task })
    }

    /// The oldest frame's slot, waiting at most `wait` for one.
    fn first(&self, wait: Duration) -> Result<Option<Timestamp>, GetError> {
        let r = if wait.is_zero() {
            self.input.try_get(Selector::Oldest)
        } else {
            self.input.get_timeout(Selector::Oldest, wait)
        };
        match r {
            Ok((ts, _)) => Ok(Some(ts)),
            Err(GetError::Timeout(_) | GetError::Unavailable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn fetch(&self, t: Timestamp, wait: Duration) -> Fetch {
        let r = if wait.is_zero() {
            self.input.try_get(Selector::Exact(t))
        } else {
            self.input.get_timeout(Selector::Exact(t), wait)
        };
        match r {
            Ok((_, item)) => Fetch::Frame(item),
            // Cameras put in slot order, so a later frame means this one was skipped.
            Err(GetError::Timeout(n) | GetError::Unavailable(n)) if n.above.is_some() => {
                Fetch::Missing
            }
            Err(GetError::Gone(_)) => Fetch::Missing,
            Err(GetError::Timeout(_) | GetError::Unavailable(_)) => Fetch::NotYet,
            Err(e) => Fetch::Lost(e),
        }
    }

    fn release_until(&self, t: Timestamp) -> Result<(), ConferenceError> {
        Ok(self.input.consume_until(t)?)
    }
}

/// The compositor's side of the mixer: the mix channel, the clock, and the task that puts.
struct Output {
    task: Task,
    mix: OutputConnection<Channel>,
    clock: OutputConnection<Register>,
    /// Cell size of the last composite, for one whose frames are all missing.
    tile: FrameSize,
    put_timeout: Duration,
}

impl Output {
    /// Moves the clock and the task's virtual time (below which the mix channel may
    /// reclaim composites) to `next`.
    fn advance_to(&mut self, next: Timestamp) {
        if next > self.task.virtual_time() {
            if let Err(e) = self.task.set_virtual_time(next) {
                eprintln!("mixer: cannot move to slot {next}: {e}");
            }
        }
        if let Err(e) = self.clock.write(clock_item(next)) {
            eprintln!("mixer: cannot write the clock: {e}");
        }
    }

    /// Composes slot `slot` from the members' frames (ascending ids) and puts it.
    fn publish(&mut self, slot: Timestamp, frames: &[Option<Item>], counters: &Counters) {
        let arrays: Vec<Option<NdArray>> = frames
            .iter()
            .map(|f| {
                let item = f.as_ref()?;
                let a = item.decode::<NdArray>().ok().filter(is_frame);
                if a.is_none() {
                    Counters::add(&counters.malformed, 1);
                }
                a
            })
            .collect();
        let tiles: Vec<Option<Tile<'_>>> = arrays
            .iter()
            .map(|a| {
                a.as_ref().map(|a| Tile {
                    size: FrameSize {
                        height: a.shape()[0],
                        width: a.shape()[1],
                    },
                    data: a.data(),
                })
            })
            .collect();
        let composite = compose(&tiles, self.tile);
        self.tile = composite.tile;
        Counters::add(&counters.slots, 1);
        match self
            .mix
            .put_timeout(slot, composite.into_item(), self.put_timeout)
        {
            Ok(()) => Counters::add(&counters.composites, 1),
            Err(e) => {
                Counters::add(&counters.dropped, 1);
                if !e.is_full() {
                    eprintln!("mixer: composite dropped: {e}");
                }
            }
        }
        self.advance_to(slot + 1);
    }
}

/// Whether an array is a camera frame: `U8` of shape `[H, W, 3]` with room for the header.
fn is_frame(a: &NdArray) -> bool {
    a.dtype() == DType::U8 && matches!(*a.shape(), [h, w, 3] if h > 0 && w * 3 >= HEADER_LEN)
}

enum ToCompositor {
    Frame {
        slot: Timestamp,
        id: u32,
        gen: u64,
        frame: Option<Item>,
    },
    Left {
        id: u32,
        gen: u64,
    },
}

/// The designated thread of the multi-threaded mixer.
fn compositor(hub: &Hub, rx: &Receiver<ToCompositor>, mut out: Output, stall: Duration) {
    let c = &hub.counters;
    let mut ahead: HashMap<(Timestamp, u32, u64), Option<Item>> = HashMap::new();
    while let Some((slot, active)) = hub.begin_slot() {
        if slot > out.task.virtual_time() {
            out.advance_to(slot);
        }
        let mut got: BTreeMap<u32, Option<Item>> = BTreeMap::new();
        ahead.retain(|&(s, id, gen), frame| {
            if s == slot && active.contains(&(id, gen)) {
                if frame.is_none() {
                    Counters::add(&c.missing, 1);
                }
                got.insert(id, frame.take());
            }
            s > slot
        });
        let deadline = Instant::now() + stall;
        while got.len() < active.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                Counters::add(&c.stalled, (active.len() - got.len()) as u64);
                break;
            }
            match rx.recv_timeout(left.min(SLICE)) {
                Ok(ToCompositor::Frame {
                    slot: s,
                    id,
                    gen,
                    frame,
                }) => {
                    if s < slot {
                        Counters::add(&c.late, 1);
                    } else if s > slot {
                        ahead.insert((s, id, gen), frame);
                    } else if active.contains(&(id, gen)) && !got.contains_key(&id) {
                        if frame.is_none() {
                            Counters::add(&c.missing, 1);
                        }
                        got.insert(id, frame);
                    }
                }
                Ok(ToCompositor::Left { id, gen }) => {
                    if active.contains(&(id, gen)) && !got.contains_key(&id) {
                        Counters::add(&c.missing, 1);
                        got.insert(id, None);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    if hub.lock().stopping {
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let frames: Vec<Option<Item>> = active
            .iter()
            .map(|(id, _)| got.remove(id).flatten())
            .collect();
        hub.set_in_composite(active.iter().map(|&(id, _)| id).collect());
        out.publish(slot, &frames, c);
        hub.finish_slot(slot);
    }
}

/// A member's thread: fetches its frames slot by slot and hands them to the compositor.
struct Follower {
    space: Space,
    hub: Arc<Hub>,
    tx: Sender<ToCompositor>,
    id: u32,
    gen: u64,
    /// The address space owning the followed channel.
    owner: String,
    name: String,
    quit: Arc<AtomicBool>,
    wait: Duration,
}

impl Follower {
    fn run(mut self) {
        loop {
            let outcome = self.follow();
            self.hub.leave(self.id, self.gen);
            let _ = self.tx.send(ToCompositor::Left {
                id: self.id,
                gen: self.gen,
            });
            // A departure also fails the operation in progress. A failure while the
            // participant's name is still registered (an owner that did not answer in time,
            // a session that expired and came back) is not one: it rejoins, from a later
            // slot, after a pause that keeps a persistent failure from spinning.
            let Err(e) = outcome else { return };
            if self
                .space
                .record(&self.name)
                .map_or(true, |r| r.space != self.owner)
            {
                return;
            }
            eprintln!(
                "mixer: participant {} dropped ({e}); following it again",
                self.id
            );
            std::thread::sleep(Duration::from_secs(1));
            match self.hub.add(self.id, &self.owner) {
                Some((gen, quit)) => {
                    self.gen = gen;
                    self.quit = quit;
                }
                None => return,
            }
        }
    }

    fn quitting(&self) -> bool {
        self.quit.load(Ordering::SeqCst)
    }

    fn follow(&self) -> Result<(), ConferenceError> {
        let link = Link::open(&self.space, &self.name, self.wait, &self.quit)?;
        let first = loop {
            if self.quitting() {
                return Ok(());
            }
            if let Some(f) = link.first(SLICE)? {
                break f;
            }
        };
        let Some(start) = self.hub.join(self.id, self.gen, first) else {
            return Ok(());
        };
        if start > first {
            link.release_until(start - 1)?;
        }
        let c = &self.hub.counters;
        let mut t = start;
        loop {
            match self.hub.pace(t, &self.quit) {
                Pace::Go => {}
                Pace::Skip(to) => {
                    Counters::add(&c.late, (to - t) as u64);
                    link.release_until(to - 1)?;
                    t = to;
                }
                Pace::Quit => return Ok(()),
            }
            let frame = match link.fetch(t, SLICE) {
                Fetch::Frame(item) => Some(item),
                Fetch::Missing => None,
                Fetch::NotYet => continue,
                Fetch::Lost(e) => return Err(e.into()),
            };
            let msg = ToCompositor::Frame {
                slot: t,
                id: self.id,
                gen: self.gen,
                frame,
            };
            if self.tx.send(msg).is_err() {
                return Ok(());
            }
            link.release_until(t)?;
            t += 1;
        }
    }
}

/// A participant the single-threaded loop follows.
struct Joined {
    /// The address space owning its camera channel.
    owner: String,
    name: String,
    /// `None` until connected, and again after a failure, until `retry_at`.
    link: Option<Link>,
    start: Option<Timestamp>,
    retry_at: Instant,
}

enum Membership {
    Added {
        id: u32,
        space: String,
        name: String,
    },
    Removed {
        id: u32,
        space: String,
    },
}

/// How long a member whose connection failed waits before it is connected again.
const RETRY: Duration = Duration::from_secs(1);

/// The single-threaded mixer: one loop fetches from every member in turn.
struct Single<'a> {
    space: &'a Space,
    hub: &'a Hub,
    members: BTreeMap<u32, Joined>,
}

impl Single<'_> {
    fn membership(&mut self, m: Membership) {
        match m {
            Membership::Added { id, space, name } => {
                self.members.insert(
                    id,
                    Joined {
                        owner: space,
                        name,
                        link: None,
                        start: None,
                        retry_at: Instant::now(),
                    },
                );
            }
            Membership::Removed { id, space } => {
                if self.members.get(&id).is_some_and(|j| j.owner == space) {
                    self.members.remove(&id);
                }
            }
        }
    }

    /// Connects the members due, and learns where newcomers start: at their first frame,
    /// or at `next` if that is later.
    fn connect(&mut self, next: Timestamp) {
        let now = Instant::now();
        let mut failed = Vec::new();
        for (&id, j) in &mut self.members {
            if j.link.is_none() && j.retry_at <= now {
                match Link::open(self.space, &j.name, SLICE, &self.hub.quit) {
                    Ok(link) => j.link = Some(link),
                    Err(e) => failed.push((id, e)),
                }
            }
            let Some(link) = j.link.as_ref().filter(|_| j.start.is_none()) else {
                continue;
            };
            match link.first(Duration::ZERO) {
                Ok(Some(f)) => {
                    let start = f.max(next);
                    match (start > f).then(|| link.release_until(start - 1)) {
                        Some(Err(e)) => failed.push((id, e)),
                        _ => j.start = Some(start),
                    }
                }
                Ok(None) => {}
                Err(e) => failed.push((id, e.into())),
            }
        }
        for (id, e) in failed {
            self.lose(id, &e);
        }
    }

    /// A member's connection failed. One that left is forgotten (its name's removal would
    /// say so too); any other is connected again a little later, from a later slot.
    fn lose(&mut self, id: u32, e: &ConferenceError) {
        let Some(j) = self.members.get_mut(&id) else {
            return;
        };
        let present = self
            .space
            .record(&j.name)
            .is_some_and(|r| r.space == j.owner);
        if !present {
            self.members.remove(&id);
            return;
        }
        eprintln!("mixer: participant {id} dropped ({e}); following it again");
        j.link = None;
        j.start = None;
        j.retry_at = Instant::now() + RETRY;
    }

    fn active_at(&self, t: Timestamp) -> Vec<u32> {
        self.members
            .iter()
            .filter(|(_, j)| j.link.is_some() && j.start.is_some_and(|s| s <= t))
            .map(|(&id, _)| id)
            .collect()
    }

    fn run(&mut self, rx: &Receiver<Membership>, mut out: Output, opts: &MixerOptions) {
        let c = &self.hub.counters;
        let mut next = out.task.virtual_time();
        while !self.hub.lock().stopping {
            while let Ok(m) = rx.try_recv() {
                self.membership(m);
            }
            self.connect(next);
            let active = self.active_at(next);
            if active.is_empty() {
                let first = self
                    .members
                    .values()
                    .filter(|j| j.link.is_some())
                    .filter_map(|j| j.start)
                    .filter(|&s| s > next)
                    .min();
                if let Some(s) = first {
                    Counters::add(&c.idle, (s - next) as u64);
                    next = s;
                    out.advance_to(next);
                    continue;
                }
                self.hub.set_in_composite(Vec::new());
                // Waits for a membership change; newcomers without a frame yet are polled.
                let wait = if self.members.is_empty() {
                    SLICE
                } else {
                    Duration::from_millis(10)
                };
                if let Ok(m) = rx.recv_timeout(wait) {
                    self.membership(m);
                }
                continue;
            }
            let deadline = Instant::now() + opts.stall;
            let mut frames = Vec::with_capacity(active.len());
            let mut failed = Vec::new();
            for &id in &active {
                let Some(link) = self.members[&id].link.as_ref() else {
                    frames.push(None);
                    continue;
                };
                let frame = loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match link.fetch(next, left.min(SLICE)) {
                        Fetch::Frame(item) => break Some(item),
                        Fetch::Missing => {
                            Counters::add(&c.missing, 1);
                            break None;
                        }
                        Fetch::NotYet if left.is_zero() => {
                            Counters::add(&c.stalled, 1);
                            break None;
                        }
                        Fetch::NotYet => {}
                        Fetch::Lost(e) => {
                            Counters::add(&c.missing, 1);
                            failed.push((id, e.into()));
                            break None;
                        }
                    }
                };
                frames.push(frame);
            }
            self.hub.set_in_composite(active.clone());
            out.publish(next, &frames, c);
            for &id in &active {
                let released = match self.members[&id].link.as_ref() {
                    Some(link) if !failed.iter().any(|(f, _)| *f == id) => link.release_until(next),
                    _ => Ok(()),
                };
                if let Err(e) = released {
                    failed.push((id, e));
                }
            }
            for (id, e) in failed {
                self.lose(id, &e);
            }
            next += 1;
        }
    }
}

/// Turns name-server events into members. Names are first come, first served: a second
/// registration of an id (a rival about to withdraw, or a newcomer while the old owner's
/// departure is not known yet) is ignored, and when the followed owner's name goes, the
/// current owner of the name, if any, is followed instead.
struct Names {
    space: Space,
    hub: Arc<Hub>,
    tiles: Sender<ToCompositor>,
    members: Sender<Membership>,
    threads: Threads,
    wait: Duration,
    /// The address space followed for each id.
    owners: HashMap<u32, String>,
    followers: Vec<JoinHandle<()>>,
}

impl Names {
    fn added(&mut self, rec: NameRecord) {
        let Some(id) = parse_cam_name(&rec.name) else {
            return;
        };
        if rec.kind != Kind::Channel || self.owners.contains_key(&id) {
            return;
        }
        self.owners.insert(id, rec.space.clone());
        if self.threads == Threads::Single {
            let _ = self.members.send(Membership::Added {
                id,
                space: rec.space,
                name: rec.name,
            });
            return;
        }
        let Some((gen, quit)) = self.hub.add(id, &rec.space) else {
            return;
        };
        let f = Follower {
            space: self.space.clone(),
            hub: self.hub.clone(),
            tx: self.tiles.clone(),
            id,
            gen,
            owner: rec.space,
            name: rec.name,
            quit,
            wait: self.wait,
        };
        match std::thread::Builder::new()
            .name(format!("member-{id}"))
            .spawn(move || f.run())
        {
            Ok(h) => self.followers.push(h),
            Err(e) => {
                eprintln!("mixer: cannot start a thread for participant {id}: {e}");
                self.hub.leave(id, gen);
            }
        }
        self.followers.retain(|h| !h.is_finished());
    }

    fn removed(&mut self, name: &str, owner: &str) {
        let Some(id) = parse_cam_name(name) else {
            return;
        };
        if self.owners.get(&id).map_or(true, |o| o != owner) {
            return;
        }
        self.owners.remove(&id);
        if self.threads == Threads::Single {
            let _ = self.members.send(Membership::Removed {
                id,
                space: owner.to_owned(),
            });
        } else if let Some(gen) = self.hub.remove(id, owner) {
            let _ = self.tiles.send(ToCompositor::Left { id, gen });
        }
        if let Some(rec) = self.space.record(name).filter(|r| r.space != owner) {
            self.added(rec);
        }
    }

    fn into_followers(self) -> Vec<JoinHandle<()>> {
        self.followers
    }
}

/// Runs the mixer until `stop`; returns the last statistics.
pub fn run_mixer(opts: &MixerOptions, stop: &Stop) -> Result<MixerReport, ConferenceError> {
    let space = Space::join(&opts.join.app, opts.join.mixer_config())?;
    let result = mix(&space, opts, stop);
    space.leave();
    result
}

fn mix(space: &Space, opts: &MixerOptions, stop: &Stop) -> Result<MixerReport, ConferenceError> {
    let mix = space.channel(
        ContainerOptions::bounded(MIX_CAPACITY)
            .name(MIX_CHANNEL)
            .zone(MIX_ZONE),
    )?;
    let clock = space.register(
        ContainerOptions::unbounded()
            .name(CLOCK_REGISTER)
            .zone(MIX_ZONE),
    )?;
    let task = task_at_least_in(space, 0, MIX_ZONE)?;
    let first = task.virtual_time();
    let mut out = Output {
        mix: task.attach_output(&mix)?,
        clock: task.attach_output(&clock)?,
        task,
        tile: opts.frame,
        put_timeout: opts.put_timeout,
    };
    out.advance_to(first);
    let hub = Arc::new(Hub::default());
    hub.lock().next = first;
    let watch = space.watch()?;
    emit(&serde_json::json!({
        "event": "ready",
        "app": space.app(),
        "listen": opts.join.endpoint,
        "threads": match opts.threads { Threads::Multi => "multi", Threads::Single => "single" },
        "clock": first,
    }));

    let (tile_tx, tile_rx) = crossbeam_channel::unbounded();
    let (member_tx, member_rx) = crossbeam_channel::unbounded();
    let worker = {
        let hub = hub.clone();
        let space = space.clone();
        let opts = opts.clone();
        std::thread::Builder::new()
            .name("compositor".into())
            .spawn(move || match opts.threads {
                Threads::Multi => compositor(&hub, &tile_rx, out, opts.stall),
                Threads::Single => Single {
                    space: &space,
                    hub: &hub,
                    members: BTreeMap::new(),
                }
                .run(&member_rx, out, &opts),
            })
            .map_err(|e| ConferenceError::io("starting the compositor", e))?
    };

    let mut names = Names {
        space: space.clone(),
        hub: hub.clone(),
        tiles: tile_tx,
        members: member_tx,
        threads: opts.threads,
        wait: opts.join.wait,
        owners: HashMap::new(),
        followers: Vec::new(),
    };
    let started = Instant::now();
    // Composites and when they were counted, at the previous report.
    let mut mark = (started, 0);
    let mut next_report = started + opts.report_every;
    while !stop.is_set() && !worker.is_finished() {
        let left = next_report.saturating_duration_since(Instant::now());
        match watch.recv_timeout(left.min(SLICE)) {
            Some(NameEvent::Added(rec)) => names.added(rec),
            Some(NameEvent::Removed { name, space }) => names.removed(&name, &space),
            None => {}
        }
        let now = Instant::now();
        if now >= next_report {
            let composites = hub.counters.composites.load(Ordering::Relaxed);
            let fps = rate(composites - mark.1, now - mark.0);
            mark = (now, composites);
            emit(&hub.counters.report(hub.in_composite(), fps));
            next_report += opts.report_every;
            if next_report < now {
                next_report = now + opts.report_every;
            }
        }
    }
    hub.stop();
    let followers = names.into_followers();
    let _ = worker.join();
    for h in followers {
        let _ = h.join();
    }
    let composites = hub.counters.composites.load(Ordering::Relaxed);
    let last = hub
        .counters
        .report(hub.in_composite(), rate(composites, started.elapsed()));
    emit(&last);
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(start: Option<Timestamp>, end: Option<Timestamp>) -> Member {
        Member {
            gen: 0,
            space: "s".into(),
            start,
            end,
            quit: Arc::default(),
        }
    }

    #[test]
    fn slots_have_the_members_whose_span_covers_them() {
        let mut r = Roster::default();
        r.members.insert(1, member(Some(3), None));
        r.members.insert(2, member(Some(5), Some(7)));
        r.members.insert(3, member(None, None));
        assert_eq!(r.active_at(2), []);
        assert_eq!(r.active_at(3), [(1, 0)]);
        assert_eq!(r.active_at(6), [(1, 0), (2, 0)]);
        assert_eq!(r.active_at(7), [(1, 0)]);
        assert_eq!(r.earliest_start_after(2), Some(3));
        assert_eq!(r.earliest_start_after(3), None);
        r.next = 7;
        r.prune();
        assert_eq!(r.members.keys().copied().collect::<Vec<_>>(), [1, 3]);
    }

    #[test]
    fn newcomers_join_at_the_first_slot_not_begun() {
        let hub = Hub::default();
        let (gen, _) = hub.add(4, "a").unwrap();
        assert!(hub.add(4, "a").is_none(), "the same registration twice");
        hub.lock().next = 10;
        assert_eq!(hub.join(4, gen, 12), Some(12));
        let (gen9, _) = hub.add(9, "b").unwrap();
        hub.lock().begun = true;
        assert_eq!(hub.join(9, gen9, 3), Some(11));
        // Leaving while slot 10 is being composed: out from slot 11.
        assert_eq!(hub.remove(9, "b"), Some(gen9));
        assert_eq!(hub.lock().members[&9].end, Some(11));
        assert_eq!(hub.remove(4, "other"), None);
    }

    #[test]
    fn an_idle_compositor_moves_on_to_the_earliest_start() {
        let hub = Hub::default();
        let (gen, _) = hub.add(1, "a").unwrap();
        hub.join(1, gen, 5);
        assert_eq!(hub.begin_slot(), Some((5, vec![(1, gen)])));
        assert_eq!(hub.counters.idle.load(Ordering::Relaxed), 5);
        hub.finish_slot(5);
        hub.stop();
        assert_eq!(hub.begin_slot(), None);
    }

    #[test]
    fn members_pace_to_the_compositor() {
        let hub = Hub::default();
        let quit = AtomicBool::new(false);
        hub.lock().next = 10;
        assert!(matches!(hub.pace(12, &quit), Pace::Go));
        assert!(matches!(hub.pace(8, &quit), Pace::Skip(10)));
        quit.store(true, Ordering::SeqCst);
        assert!(matches!(hub.pace(20, &quit), Pace::Quit));
    }
}
