//! Stampede itself between two processes: two address spaces of one application, joined over
//! Zenoh with the same settings as the pub/sub baseline (the child listens on loopback TCP,
//! the parent connects, shared memory on). As in the paper's micro-measurements (D-Stampede,
//! §5.1, experiments 1 and 2), a channel lives in its consumer's address space, so an item
//! crosses the processes once, as a remote put, and is gotten locally.
//!
//! * **Ping-pong**: each side owns an unbounded channel, puts into the other's and gets
//!   (blocking, `NextUnseen`) and consumes from its own; one-way latency is half the round
//!   trip, which includes the consume and the virtual-time advance that let the collector
//!   reclaim the item. Both sides track how many items their channel holds, so a collector
//!   that falls behind fails the run instead of going unnoticed.
//! * **Bandwidth**: the consumer (parent) owns a bounded channel, the producer (child) puts
//!   items into it as fast as the owner accepts them; MB/s between first and last arrival,
//!   like the baselines.
//! * **Reclaim lag**: the parent owns a channel that the child gets and consumes remotely;
//!   the lag is the time from the consume call to the owner's garbage handler running for
//!   that item. The two processes read one clock, the host's real-time clock (`SystemTime`),
//!   which is shared by all processes; a step of that clock during a run (NTP) would show as
//!   an outlier. In the same run a local consumer of a second channel, in a time zone of its
//!   own so the remote consumer cannot hold it back, gives the owner's local lag.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use stampede_core::{Channel, InputConnection, OutputConnection, Task};
use stampede_core::{ContainerOptions, GetError, Item, Selector, Timestamp, ZoneId, INFINITY};
use stampede_net::Space;

use crate::child::{self, ChildArgs, ChildProcess, Role, IO_TIMEOUT, STARTUP_TIMEOUT};
use crate::stats::Throughput;
use crate::tcp::parse_count;
use crate::zconfig::space_config;
use crate::{stream, warmup_for, BenchError, RoundTrips};

/// The ping-pong channel the parent owns (the child puts into it).
const PARENT_CHANNEL: &str = "pingpong/parent";
/// The ping-pong channel the child owns (the parent puts into it).
const CHILD_CHANNEL: &str = "pingpong/child";
/// The bandwidth run's channel, owned by the consuming parent.
const DATA_CHANNEL: &str = "bandwidth/data";
/// The reclaim-lag run's channel, owned by the parent and consumed by the child.
const LAG_CHANNEL: &str = "reclaim/remote";
/// The time zone of the reclaim-lag run's local channel.
const LOCAL_ZONE: ZoneId = ZoneId(1);

/// Bytes the bandwidth channel may hold: enough that the producer rarely waits for the
/// collector (whose passes run every few milliseconds), as a socket buffer would be.
const BANDWIDTH_WINDOW: usize = 32 << 20;
/// The most items a ping-pong channel may hold at once. A collector that keeps up holds
/// what arrives within a few passes (tens of items at the fastest round trips); one that
/// does not holds every item of the run.
pub const RESIDENT_LIMIT: usize = 512;

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A fresh application name per run: a child from an earlier run can never answer.
fn app_name() -> String {
    format!(
        "stampede-net-bench-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Ping-pong of `size`-byte items with a child process; returns the one-way latency in µs of
/// each of `round_trips` round trips (after a warm-up), noting how many items each
/// channel held at most.
pub fn pingpong(size: usize, round_trips: usize) -> Result<RoundTrips, BenchError> {
    let warmup = warmup_for(round_trips);
    let total = warmup + round_trips;
    let app = app_name();
    let mut child = ChildProcess::spawn(&ChildArgs {
        count: total,
        app: app.clone(),
        ..ChildArgs::new(Role::StampedeEcho, size)
    })?;
    let endpoint = child.expect("READY", STARTUP_TIMEOUT)?;
    let space = join(&app, None, Some(&endpoint))?;
    let side = Side::open(&space, PARENT_CHANNEL, CHILD_CHANNEL)?;
    child.expect("LINKED", STARTUP_TIMEOUT)?;

    let ping = Item::from(Bytes::from(stream::payload(size)));
    let mut one_way_us = Vec::with_capacity(round_trips);
    // Where the parent's time goes: the put's call, the wait for the pong, the consume.
    let mut stages: [Vec<f64>; 3] = Default::default();
    let mut resident = 0;
    for ts in 0..total as Timestamp {
        let start = Instant::now();
        side.output
            .put(ts, ping.clone())
            .map_err(BenchError::stampede("putting a ping"))?;
        let put = start.elapsed();
        side.next(ts, size, "getting a pong")?;
        let got = start.elapsed();
        side.done_with(ts)?;
        let round_trip = start.elapsed();
        if ts >= warmup as Timestamp {
            one_way_us.push(round_trip.as_secs_f64() * 1e6 / 2.0);
            for (v, d) in stages.iter_mut().zip([put, got - put, round_trip - got]) {
                v.push(d.as_secs_f64() * 1e6);
            }
        }
        resident = resident.max(side.resident());
    }
    let [put_us, wait_us, consume_us] = stages.map(|v| crate::stats::median(&v));
    let child_resident = parse_count(&child.expect("RESIDENT", IO_TIMEOUT)?)? as usize;
    check_resident(PARENT_CHANNEL, resident, || {
        space.runtime().explain(ZoneId::DEFAULT).to_string()
    })?;
    check_resident(CHILD_CHANNEL, child_resident, String::new)?;
    child.finish()?;
    drop(side);
    space.leave();
    Ok(RoundTrips {
        one_way_us,
        note: Some(format!(
            "at most {resident} + {child_resident} items held by the two channels; \
             round trip: put returns {put_us:.1} us, pong after {wait_us:.1} us, \
             consume and advance {consume_us:.1} us (medians)"
        )),
    })
}

/// A child process puts `size`-byte items into a channel owned here for `duration`;
/// measures them arriving and fails with [`BenchError::Lost`] unless every one arrived.
///
/// The consumer owns the channel, as in the paper's experiment 2 (configuration 1): the
/// producer's puts cross the processes, the consumer's gets and consumes stay local.
pub fn bandwidth(size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    bandwidth_of(Role::StampedeProducer, size, duration)
}

/// [`bandwidth`] with a producer that writes each item into memory its connection lends
/// (shared memory: the put copies nothing).
pub fn bandwidth_loaned(size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    bandwidth_of(Role::StampedeLoanProducer, size, duration)
}

fn bandwidth_of(role: Role, size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    let app = app_name();
    let mut child = ChildProcess::spawn(&ChildArgs {
        seconds: duration.as_secs_f64(),
        app: app.clone(),
        ..ChildArgs::new(role, size)
    })?;
    let endpoint = child.expect("READY", STARTUP_TIMEOUT)?;
    let space = join(&app, None, Some(&endpoint))?;
    let capacity = (BANDWIDTH_WINDOW / size.max(1)).max(2);
    let data = space
        .channel(ContainerOptions::bounded(capacity).name(DATA_CHANNEL))
        .map_err(BenchError::stampede("creating the data channel"))?;
    let (task, input) = consumer(&space, &data)?;
    child.expect("LINKED", STARTUP_TIMEOUT)?;

    let mut received = 0u64;
    let mut first = None;
    let mut last = Instant::now();
    loop {
        match input.get_timeout(Selector::NextUnseen, IO_TIMEOUT) {
            Ok((ts, item)) => {
                check_item(ts, received as Timestamp, &item, size)?;
                last = Instant::now();
                first.get_or_insert(last);
                received += 1;
                input
                    .consume(ts)
                    .map_err(BenchError::stampede("consuming data"))?;
            }
            // The producer closes the channel after its last acknowledged put.
            Err(GetError::Closed) => break,
            Err(e) => return Err(BenchError::stampede("getting data")(e)),
        }
    }
    let sent = parse_count(&child.expect("SENT", IO_TIMEOUT)?)?;
    if sent != received {
        return Err(BenchError::Lost { sent, received });
    }
    child.finish()?;
    drop((input, task));
    space.leave();
    let first = first.unwrap_or(last);
    Ok(Throughput::from_arrivals(received, size, last - first))
}

/// Consume→reclaim lags of one run, in ms, one per item.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReclaimLags {
    /// Items consumed by the child, reclaimed by their owner (the parent).
    pub remote_ms: Vec<f64>,
    /// Items consumed by a task of their owner, in the same run.
    pub local_ms: Vec<f64>,
}

/// Size of the items of a reclaim-lag run: small, so the lag is the collector's alone.
pub const LAG_PAYLOAD: usize = 64;

/// The parent puts `items` items, one every `period`, into a channel the child consumes and
/// into a channel a local task consumes; returns the consume→reclaim lag of every item.
pub fn reclaim_lag(items: usize, period: Duration) -> Result<ReclaimLags, BenchError> {
    let app = app_name();
    let mut child = ChildProcess::spawn(&ChildArgs {
        count: items,
        app: app.clone(),
        ..ChildArgs::new(Role::StampedeConsumer, LAG_PAYLOAD)
    })?;
    let endpoint = child.expect("READY", STARTUP_TIMEOUT)?;
    let space = join(&app, None, Some(&endpoint))?;

    let remote = space
        .channel(ContainerOptions::unbounded().name(LAG_CHANNEL))
        .map_err(BenchError::stampede(
            "creating the remotely consumed channel",
        ))?;
    let local = space
        .channel(ContainerOptions::unbounded().zone(LOCAL_ZONE))
        .map_err(BenchError::stampede(
            "creating the locally consumed channel",
        ))?;
    let remote_reclaims = Reclaims::watch(&remote);
    let local_reclaims = Reclaims::watch(&local);

    let local_consumer = {
        let task = space
            .task_builder()
            .virtual_time(0)
            .zone(LOCAL_ZONE)
            .name("local-consumer")
            .create()
            .map_err(BenchError::stampede("creating the local consumer"))?;
        let input = task
            .attach_input(&local)
            .map_err(BenchError::stampede("attaching the local consumer"))?;
        task.set_virtual_time(INFINITY)
            .map_err(BenchError::stampede("releasing the local consumer's time"))?;
        thread::Builder::new()
            .name("local-consumer".into())
            .spawn(move || {
                let consumed = consume_all(&input, items, LAG_PAYLOAD);
                drop((input, task));
                consumed
            })
            .map_err(BenchError::io("starting the local consumer"))?
    };
    let remote_producer = producer(&space, &remote, ZoneId::DEFAULT)?;
    let local_producer = producer(&space, &local, LOCAL_ZONE)?;
    child.expect("LINKED", STARTUP_TIMEOUT)?;

    let item = Item::from(Bytes::from(stream::payload(LAG_PAYLOAD)));
    let start = Instant::now();
    for (i, ts) in (0..items as Timestamp).enumerate() {
        for (task, out) in [&remote_producer, &local_producer] {
            out.put(ts, item.clone())
                .map_err(BenchError::stampede("putting an item"))?;
            task.set_virtual_time(ts + 1)
                .map_err(BenchError::stampede("advancing the producer's time"))?;
        }
        let next = start + period * (i as u32 + 1);
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let remote_consumed = parse_consumed(&child.expect("CONSUMED", IO_TIMEOUT)?)?;
    let local_consumed = local_consumer
        .join()
        .map_err(|_| BenchError::Child("the local consumer panicked".into()))??;
    let remote_reclaimed = remote_reclaims.wait_for(items, "the remotely consumed channel")?;
    let local_reclaimed = local_reclaims.wait_for(items, "the locally consumed channel")?;
    child.finish()?;
    drop((remote_producer, local_producer));
    space.leave();
    Ok(ReclaimLags {
        remote_ms: lags(&remote_consumed, &remote_reclaimed)?,
        local_ms: lags(&local_consumed, &local_reclaimed)?,
    })
}

/// Child side of [`pingpong`]: echoes `count` items from its channel into the parent's.
pub fn serve_echo(app: &str, size: usize, count: usize) -> Result<(), BenchError> {
    let (space, endpoint) = join_listening(app)?;
    child::announce(&format!("READY {endpoint}"))?;
    let side = Side::open(&space, CHILD_CHANNEL, PARENT_CHANNEL)?;
    child::announce("LINKED")?;
    let mut resident = 0;
    for ts in 0..count as Timestamp {
        let ping = side.next(ts, size, "getting a ping")?;
        // Sends the received item back as it is, like the baselines echo their buffers.
        side.output
            .put(ts, ping)
            .map_err(BenchError::stampede("putting a pong"))?;
        side.done_with(ts)?;
        resident = resident.max(side.resident());
    }
    child::announce(&format!("RESIDENT {resident}"))?;
    child::await_done()?;
    drop(side);
    space.leave();
    Ok(())
}

/// Child side of [`bandwidth`] (and, `loaned`, of [`bandwidth_loaned`]): puts `size`-byte
/// items for `duration`, then closes the channel so the consumer knows the end.
pub fn serve_producer(
    app: &str,
    size: usize,
    duration: Duration,
    loaned: bool,
) -> Result<(), BenchError> {
    let (space, endpoint) = join_listening(app)?;
    child::announce(&format!("READY {endpoint}"))?;
    let data = space
        .lookup_channel(DATA_CHANNEL, STARTUP_TIMEOUT)
        .map_err(BenchError::stampede("looking up the data channel"))?;
    let (task, out) = producer(&space, &data, ZoneId::DEFAULT)?;
    child::announce("LINKED")?;
    let pattern = stream::payload(size);
    let item = Item::from(Bytes::from(pattern.clone()));
    let mut sent = 0u64;
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        let ts = sent as Timestamp;
        let next = if loaned {
            let mut l = out
                .loan(size)
                .map_err(BenchError::stampede("borrowing memory"))?;
            l.copy_from_slice(&pattern);
            Item::from(l)
        } else {
            item.clone()
        };
        out.put(ts, next)
            .map_err(BenchError::stampede("putting data"))?;
        task.set_virtual_time(ts + 1)
            .map_err(BenchError::stampede("advancing the producer's time"))?;
        sent += 1;
    }
    // Every put is stored once a flush returns; a close from this space waits for them too.
    out.flush()
        .map_err(BenchError::stampede("flushing the data"))?;
    data.close()
        .map_err(BenchError::stampede("closing the data channel"))?;
    child::announce(&format!("SENT {sent}"))?;
    child::await_done()?;
    drop((out, task));
    space.leave();
    Ok(())
}

/// Child side of [`reclaim_lag`]: gets and consumes `count` items of the parent's channel,
/// then reports when it consumed each.
pub fn serve_consumer(app: &str, size: usize, count: usize) -> Result<(), BenchError> {
    let (space, endpoint) = join_listening(app)?;
    child::announce(&format!("READY {endpoint}"))?;
    let channel = space
        .lookup_channel(LAG_CHANNEL, STARTUP_TIMEOUT)
        .map_err(BenchError::stampede("looking up the channel"))?;
    let (task, input) = consumer(&space, &channel)?;
    child::announce("LINKED")?;
    let consumed = consume_all(&input, count, size)?;
    let line: Vec<String> = consumed
        .iter()
        .map(|(ts, ns)| format!("{ts}:{ns}"))
        .collect();
    child::announce(&format!("CONSUMED {}", line.join(" ")))?;
    child::await_done()?;
    drop((input, task));
    space.leave();
    Ok(())
}

fn join(app: &str, listen: Option<&str>, connect: Option<&str>) -> Result<Space, BenchError> {
    Space::join(app, space_config(listen, connect))
        .map_err(BenchError::stampede("joining the application"))
}

/// Joins listening on a free loopback port; returns the space and its endpoint. The port is
/// found by binding port 0 and released before Zenoh binds it, so another process may take
/// it in between: then the next one is tried.
fn join_listening(app: &str) -> Result<(Space, String), BenchError> {
    const ATTEMPTS: usize = 5;
    let mut attempt = 1;
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(BenchError::io("finding a free port"))?
            .port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        match join(app, Some(&endpoint), None) {
            Ok(space) => return Ok((space, endpoint)),
            Err(_) if attempt < ATTEMPTS => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// One side of the ping-pong: a task that gets from the channel its space owns and puts
/// into the other side's.
struct Side {
    task: Task,
    own: stampede_core::Channel,
    input: InputConnection<Channel>,
    output: OutputConnection<Channel>,
}

impl Side {
    /// Creates the side's channel `own`, waits for the other side's channel `other`, then
    /// attaches a task at virtual time 0 to both (so nothing the other side puts can fall
    /// below it).
    ///
    /// The task comes last on purpose: a space that joins while another one already reports
    /// a watermark mark receives that mark under the name `*` (stampede-net's marks
    /// queryable answers on the query's key expression), and such a term is never updated,
    /// so it would hold the joiner's watermark forever. Finding the other side's channel
    /// proves both spaces joined.
    fn open(space: &Space, own: &str, other: &str) -> Result<Self, BenchError> {
        let channel = space
            .channel(ContainerOptions::unbounded().name(own))
            .map_err(BenchError::stampede(format!("creating {own}")))?;
        let other_channel = space
            .lookup_channel(other, STARTUP_TIMEOUT)
            .map_err(BenchError::stampede(format!("looking up {other}")))?;
        let task = space
            .task(0)
            .map_err(BenchError::stampede("creating a task"))?;
        let input = task
            .attach_input(&channel)
            .map_err(BenchError::stampede(format!("attaching to {own}")))?;
        let output = task
            .attach_output(&other_channel)
            .map_err(BenchError::stampede(format!("attaching to {other}")))?;
        Ok(Side {
            task,
            own: channel.clone(),
            input,
            output,
        })
    }

    /// Gets the item at `ts`, the next one in order.
    fn next(&self, ts: Timestamp, size: usize, what: &str) -> Result<Item, BenchError> {
        let (got, item) = self
            .input
            .get_timeout(Selector::NextUnseen, IO_TIMEOUT)
            .map_err(BenchError::stampede(what))?;
        check_item(got, ts, &item, size)?;
        Ok(item)
    }

    /// Consumes the item at `ts` and moves past it, so it can be reclaimed.
    fn done_with(&self, ts: Timestamp) -> Result<(), BenchError> {
        self.input
            .consume(ts)
            .map_err(BenchError::stampede("consuming"))?;
        self.task
            .set_virtual_time(ts + 1)
            .map_err(BenchError::stampede("advancing virtual time"))
    }

    /// Items the side's channel holds now.
    fn resident(&self) -> usize {
        self.own.len()
    }
}

/// A task that consumes `channel` from time 0 on. It attaches at virtual time 0, so no item
/// already put is marked consumed (rule 3), then gives up its time so only its connection
/// holds the watermark.
fn consumer(
    space: &Space,
    channel: &Channel,
) -> Result<(Task, InputConnection<Channel>), BenchError> {
    let task = space
        .task(0)
        .map_err(BenchError::stampede("creating the consumer"))?;
    let input = task
        .attach_input(channel)
        .map_err(BenchError::stampede("attaching the consumer"))?;
    task.set_virtual_time(INFINITY)
        .map_err(BenchError::stampede("releasing the consumer's time"))?;
    Ok((task, input))
}

/// A task of `zone` at virtual time 0 with an output connection to `channel`.
fn producer(
    space: &Space,
    channel: &Channel,
    zone: ZoneId,
) -> Result<(Task, OutputConnection<Channel>), BenchError> {
    let task = space
        .task_builder()
        .virtual_time(0)
        .zone(zone)
        .name("producer")
        .create()
        .map_err(BenchError::stampede("creating the producer"))?;
    let out = task
        .attach_output(channel)
        .map_err(BenchError::stampede("attaching the producer"))?;
    Ok((task, out))
}

/// Gets and consumes items `0..count` in order; returns when each consume was called, in ns
/// of the real-time clock.
fn consume_all(
    input: &InputConnection<Channel>,
    count: usize,
    size: usize,
) -> Result<Vec<(Timestamp, u64)>, BenchError> {
    let mut consumed = Vec::with_capacity(count);
    for ts in 0..count as Timestamp {
        let (got, item) = input
            .get_timeout(Selector::NextUnseen, IO_TIMEOUT)
            .map_err(BenchError::stampede("getting an item"))?;
        check_item(got, ts, &item, size)?;
        consumed.push((ts, now_ns()));
        input
            .consume(ts)
            .map_err(BenchError::stampede("consuming an item"))?;
    }
    Ok(consumed)
}

/// When the owner reclaimed each item of a channel, from its garbage handler.
struct Reclaims(Arc<Mutex<HashMap<Timestamp, u64>>>);

impl Reclaims {
    fn watch(channel: &Channel) -> Self {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let record = seen.clone();
        channel
            .on_garbage(move |ts, _| {
                let now = now_ns();
                record
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(ts, now);
            })
            .expect("a channel created here is owned here");
        Reclaims(seen)
    }

    /// Waits until `count` items were reclaimed; returns when each was.
    fn wait_for(&self, count: usize, what: &str) -> Result<HashMap<Timestamp, u64>, BenchError> {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            {
                let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                if seen.len() >= count {
                    return Ok(seen.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(BenchError::timeout(
                    format!("waiting for every item of {what} to be reclaimed"),
                    IO_TIMEOUT,
                ));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
}

fn lags(
    consumed: &[(Timestamp, u64)],
    reclaimed: &HashMap<Timestamp, u64>,
) -> Result<Vec<f64>, BenchError> {
    consumed
        .iter()
        .map(|&(ts, at)| match reclaimed.get(&ts) {
            Some(&freed) if freed >= at => Ok((freed - at) as f64 / 1e6),
            // Not reclaimed at all cannot happen: every item was waited for.
            _ => Err(BenchError::ReclaimedEarly { ts }),
        })
        .collect()
}

/// Parses the child's `CONSUMED <ts>:<ns> ...` report.
fn parse_consumed(text: &str) -> Result<Vec<(Timestamp, u64)>, BenchError> {
    text.split_whitespace()
        .map(|pair| {
            pair.split_once(':')
                .and_then(|(ts, ns)| Some((ts.parse().ok()?, ns.parse().ok()?)))
                .ok_or_else(|| BenchError::Child(format!("`{pair}` is not `<ts>:<ns>`")))
        })
        .collect()
}

/// Now on the host's real-time clock, in ns since the Unix epoch: readable by both processes.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn check_item(
    got: Timestamp,
    expected: Timestamp,
    item: &Item,
    size: usize,
) -> Result<(), BenchError> {
    if got != expected {
        return Err(BenchError::OutOfOrder { expected, got });
    }
    let len = item.as_bytes().map_or(0, Bytes::len);
    if len != size {
        return Err(BenchError::BadPayload {
            expected: size,
            got: len,
        });
    }
    Ok(())
}

/// Fails when `container` held more than [`RESIDENT_LIMIT`] items, with what held the
/// watermark if its owner is this process.
fn check_resident(
    container: &str,
    resident: usize,
    holds: impl FnOnce() -> String,
) -> Result<(), BenchError> {
    if resident > RESIDENT_LIMIT {
        return Err(BenchError::GcBehind {
            container: container.to_owned(),
            resident,
            limit: RESIDENT_LIMIT,
            holds: holds(),
        });
    }
    Ok(())
}
