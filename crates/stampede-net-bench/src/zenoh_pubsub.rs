//! Zenoh publish/subscribe between two peer sessions, one per process, linked by an explicit
//! TCP endpoint on 127.0.0.1 (payloads of 3 KiB and more go through shared memory when both
//! sides negotiate it). Declared publishers with `CongestionControl::Block`, FIFO subscribers,
//! and the blocking `wait()` API throughout, so the user code runs no async runtime.

use std::thread;
use std::time::{Duration, Instant};

use zenoh::bytes::ZBytes;
use zenoh::pubsub::Publisher;
use zenoh::qos::CongestionControl;
use zenoh::{Session, Wait};

use crate::child::{self, ChildArgs, ChildProcess, Role, IO_TIMEOUT, STARTUP_TIMEOUT};
use crate::stats::Throughput;
use crate::tcp::parse_count;
use crate::{stream, warmup_for, zenoh_config, BenchError, RoundTrips};

/// Ping-pong of `size`-byte messages with a child process (`<prefix>/ping` out,
/// `<prefix>/pong` back); returns the one-way latency in µs of each of `round_trips` round
/// trips (after a warm-up).
pub fn pingpong(size: usize, round_trips: usize) -> Result<RoundTrips, BenchError> {
    let warmup = warmup_for(round_trips);
    let prefix = key_prefix();
    let mut child = ChildProcess::spawn(&ChildArgs {
        count: warmup + round_trips,
        key_prefix: prefix.clone(),
        ..ChildArgs::new(Role::ZenohEcho, size)
    })?;
    let endpoint = child.expect("READY", STARTUP_TIMEOUT)?;
    let session = open(None, Some(&endpoint))?;
    let pongs = session
        .declare_subscriber(format!("{prefix}/pong"))
        .wait()
        .map_err(BenchError::zenoh("declaring the pong subscriber"))?;
    let pings = declare_publisher(&session, &format!("{prefix}/ping"), true)?;
    wait_matching(&pings)?;
    child.expect("LINKED", STARTUP_TIMEOUT)?;
    warn_without_shm(&session);

    // Cloning a ZBytes shares the buffer, so no copy is timed on our side.
    let payload = ZBytes::from(stream::payload(size));
    let mut samples = Vec::with_capacity(round_trips);
    for i in 0..warmup + round_trips {
        let start = Instant::now();
        pings
            .put(payload.clone())
            .wait()
            .map_err(BenchError::zenoh("publishing a ping"))?;
        let pong = pongs
            .recv_timeout(IO_TIMEOUT)
            .map_err(BenchError::zenoh("receiving a pong"))?
            .ok_or_else(|| BenchError::timeout("waiting for a pong", IO_TIMEOUT))?;
        let round_trip = start.elapsed();
        check_size(pong.payload().len(), size)?;
        if i >= warmup {
            samples.push(round_trip.as_secs_f64() * 1e6 / 2.0);
        }
    }
    child.finish()?;
    close(&session)?;
    Ok(samples.into())
}

/// A child process publishes `size`-byte messages on `<prefix>/data` for `duration`; measures
/// them arriving here and fails with [`BenchError::Lost`] unless every one arrived.
pub fn bandwidth(size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    bandwidth_of(Role::ZenohProducer, size, duration)
}

/// [`bandwidth`] with a producer that writes each message into a buffer of its session's
/// shared memory and publishes that buffer: Zenoh's own zero-copy path.
pub fn bandwidth_shm(size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    bandwidth_of(Role::ZenohShmProducer, size, duration)
}

fn bandwidth_of(role: Role, size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    assert!(
        size > 0,
        "an empty message marks the end of a bandwidth run"
    );
    let prefix = key_prefix();
    let mut child = ChildProcess::spawn(&ChildArgs {
        seconds: duration.as_secs_f64(),
        key_prefix: prefix.clone(),
        ..ChildArgs::new(role, size)
    })?;
    let endpoint = child.expect("READY", STARTUP_TIMEOUT)?;
    let session = open(None, Some(&endpoint))?;
    let data = session
        .declare_subscriber(format!("{prefix}/data"))
        .wait()
        .map_err(BenchError::zenoh("declaring the data subscriber"))?;
    child.expect("LINKED", STARTUP_TIMEOUT)?;
    warn_without_shm(&session);

    let mut received = 0;
    let mut first = None;
    let mut last = Instant::now();
    loop {
        let sample = data
            .recv_timeout(IO_TIMEOUT)
            .map_err(BenchError::zenoh("receiving data"))?
            .ok_or_else(|| BenchError::timeout("waiting for data", IO_TIMEOUT))?;
        match sample.payload().len() {
            0 => break,
            len => check_size(len, size)?,
        }
        last = Instant::now();
        first.get_or_insert(last);
        received += 1;
    }
    let sent = parse_count(&child.expect("SENT", IO_TIMEOUT)?)?;
    if sent != received {
        return Err(BenchError::Lost { sent, received });
    }
    child.finish()?;
    close(&session)?;
    let first = first.unwrap_or(last);
    Ok(Throughput::from_arrivals(received, size, last - first))
}

/// Child side of [`pingpong`].
pub fn serve_echo(prefix: &str, size: usize, count: usize) -> Result<(), BenchError> {
    let session = open(Some("tcp/127.0.0.1:0"), None)?;
    let pings = session
        .declare_subscriber(format!("{prefix}/ping"))
        .wait()
        .map_err(BenchError::zenoh("declaring the ping subscriber"))?;
    let pongs = declare_publisher(&session, &format!("{prefix}/pong"), true)?;
    child::announce(&format!("READY {}", listening_endpoint(&session)?))?;
    wait_matching(&pongs)?;
    child::announce("LINKED")?;
    for _ in 0..count {
        let ping = pings
            .recv_timeout(IO_TIMEOUT)
            .map_err(BenchError::zenoh("receiving a ping"))?
            .ok_or_else(|| BenchError::timeout("waiting for a ping", IO_TIMEOUT))?;
        check_size(ping.payload().len(), size)?;
        // Sends the received buffer back as it is, like the stream baselines echo theirs.
        pongs
            .put(ping.payload().clone())
            .wait()
            .map_err(BenchError::zenoh("publishing a pong"))?;
    }
    child::await_done()?;
    close(&session)
}

/// Child side of [`bandwidth`].
pub fn serve_producer(
    prefix: &str,
    size: usize,
    duration: Duration,
    shm: bool,
) -> Result<(), BenchError> {
    use zenoh::shm::{BlockOn, GarbageCollect, ShmProviderState};
    let session = open(Some("tcp/127.0.0.1:0"), None)?;
    let data = declare_publisher(&session, &format!("{prefix}/data"), false)?;
    child::announce(&format!("READY {}", listening_endpoint(&session)?))?;
    wait_matching(&data)?;
    child::announce("LINKED")?;
    let pattern = stream::payload(size);
    let payload = ZBytes::from(pattern.clone());
    // The session's own pool, polled until ready (waiting on it would take the message that
    // tells the sending side it is ready).
    let provider = if shm {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match session.get_shm_provider() {
                ShmProviderState::Ready(p) => break Some(p),
                ShmProviderState::Initializing(_) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(1));
                }
                _ => {
                    return Err(BenchError::Child(
                        "no shared memory for the producer".into(),
                    ))
                }
            }
        }
    } else {
        None
    };
    let mut sent = 0u64;
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        let msg = match &provider {
            // Fills a buffer of the pool, waiting for room as a publisher of its own would.
            Some(p) => {
                let mut buf = p
                    .alloc(size)
                    .with_policy::<BlockOn<GarbageCollect>>()
                    .wait()
                    .map_err(|e| BenchError::Child(format!("shared memory: {e:?}")))?;
                buf.copy_from_slice(&pattern);
                ZBytes::from(buf)
            }
            None => payload.clone(),
        };
        data.put(msg)
            .wait()
            .map_err(BenchError::zenoh("publishing data"))?;
        sent += 1;
    }
    // Same key, same publisher: the end marker cannot overtake the data.
    data.put(ZBytes::new())
        .wait()
        .map_err(BenchError::zenoh("publishing the end marker"))?;
    child::announce(&format!("SENT {sent}"))?;
    child::await_done()?;
    close(&session)
}

/// Unique per parent process, so concurrent runs on one host cannot cross-talk.
fn key_prefix() -> String {
    format!("stampede-net-bench/{}", std::process::id())
}

fn open(listen: Option<&str>, connect: Option<&str>) -> Result<Session, BenchError> {
    zenoh::open(zenoh_config(listen, connect))
        .wait()
        .map_err(BenchError::zenoh("opening a session"))
}

fn close(session: &Session) -> Result<(), BenchError> {
    session
        .close()
        .wait()
        .map_err(BenchError::zenoh("closing the session"))
}

/// `express` skips batching: right for ping-pong (as in Zenoh's own `z_ping`), not for
/// bandwidth (as in `z_pub_thr`).
fn declare_publisher<'a>(
    session: &'a Session,
    key: &str,
    express: bool,
) -> Result<Publisher<'a>, BenchError> {
    session
        .declare_publisher(key.to_owned())
        .congestion_control(CongestionControl::Block)
        .express(express)
        .wait()
        .map_err(BenchError::zenoh(format!(
            "declaring the publisher on {key}"
        )))
}

/// Waits until the other process's subscriber is known here; until then a put goes nowhere.
fn wait_matching(publisher: &Publisher<'_>) -> Result<(), BenchError> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let status = publisher
            .matching_status()
            .wait()
            .map_err(BenchError::zenoh("querying the matching status"))?;
        if status.matching() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(BenchError::timeout(
                format!("waiting for a subscriber on {}", publisher.key_expr()),
                STARTUP_TIMEOUT,
            ));
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// The TCP endpoint a session listens on (it was asked for port 0).
fn listening_endpoint(session: &Session) -> Result<String, BenchError> {
    session
        .info()
        .locators()
        .wait()
        .into_iter()
        .find(|l| l.protocol().as_str() == "tcp")
        .map(|l| l.to_string())
        .ok_or_else(|| BenchError::Child("the Zenoh session listens on no TCP endpoint".into()))
}

/// Says so when shared memory was not negotiated, since the figures then mean something else.
fn warn_without_shm(session: &Session) {
    if !session.info().transports().wait().any(|t| t.is_shm()) {
        eprintln!("warning: the Zenoh transport did not negotiate shared memory");
    }
}

fn check_size(got: usize, expected: usize) -> Result<(), BenchError> {
    if got == expected {
        Ok(())
    } else {
        Err(BenchError::BadPayload { expected, got })
    }
}
