//! The loops shared by the byte-stream baselines (TCP, Unix socket): fixed-size messages that
//! both sides know the size of, so there is no framing beyond `read_exact` / `write_all`.

use std::io::{self, ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use crate::child::{IO_TIMEOUT, STARTUP_TIMEOUT};
use crate::stats::Throughput;
use crate::BenchError;

/// A recognisable, non-zero payload, so no layer can get away with zero pages.
pub(crate) fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8 + 1).collect()
}

/// Maps an I/O error, turning the socket timeouts we set into [`BenchError::Timeout`].
fn io_error(context: &'static str) -> impl FnOnce(io::Error) -> BenchError {
    move |e| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => BenchError::timeout(context, IO_TIMEOUT),
        _ => BenchError::io(context)(e),
    }
}

/// Parent side of a ping-pong: `warmup` unrecorded round trips, then `rounds` recorded ones.
/// Returns the one-way latency (half the round trip) of each recorded round trip in µs.
pub(crate) fn ping<S: Read + Write>(
    stream: &mut S,
    size: usize,
    warmup: usize,
    rounds: usize,
) -> Result<Vec<f64>, BenchError> {
    let mut buf = payload(size);
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..warmup + rounds {
        let start = Instant::now();
        stream.write_all(&buf).map_err(io_error("sending a ping"))?;
        stream
            .read_exact(&mut buf)
            .map_err(io_error("receiving a pong"))?;
        let round_trip = start.elapsed();
        if i >= warmup {
            samples.push(round_trip.as_secs_f64() * 1e6 / 2.0);
        }
    }
    Ok(samples)
}

/// Child side of a ping-pong: receives each message completely and sends it back, `count` times.
pub(crate) fn echo<S: Read + Write>(
    stream: &mut S,
    size: usize,
    count: usize,
) -> Result<(), BenchError> {
    let mut buf = vec![0; size];
    for _ in 0..count {
        stream
            .read_exact(&mut buf)
            .map_err(io_error("receiving a ping"))?;
        stream.write_all(&buf).map_err(io_error("sending a pong"))?;
    }
    Ok(())
}

/// Producer side of a bandwidth run: sends `size`-byte messages for `duration`; returns how many.
pub(crate) fn produce<S: Write>(
    stream: &mut S,
    size: usize,
    duration: Duration,
) -> Result<u64, BenchError> {
    let buf = payload(size);
    let mut sent = 0;
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        stream.write_all(&buf).map_err(io_error("sending data"))?;
        sent += 1;
    }
    Ok(sent)
}

/// Consumer side of a bandwidth run: receives `size`-byte messages until the producer closes.
pub(crate) fn consume<S: Read>(stream: &mut S, size: usize) -> Result<Throughput, BenchError> {
    let mut buf = vec![0; size];
    let mut received = 0;
    let mut first = None;
    let mut last = Instant::now();
    while read_message(stream, &mut buf)? {
        last = Instant::now();
        first.get_or_insert(last);
        received += 1;
    }
    let first = first.unwrap_or(last);
    Ok(Throughput::from_arrivals(received, size, last - first))
}

/// Fills `buf`; `false` at a clean end of stream before its first byte.
fn read_message<S: Read>(stream: &mut S, buf: &mut [u8]) -> Result<bool, BenchError> {
    let mut filled = 0;
    while filled < buf.len() {
        match stream.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                return Err(BenchError::BadPayload {
                    expected: buf.len(),
                    got: filled,
                })
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("receiving data")(e)),
        }
    }
    Ok(true)
}

/// Accepts one connection within [`STARTUP_TIMEOUT`]; `accept` must be non-blocking.
pub(crate) fn accept_within<S>(mut accept: impl FnMut() -> io::Result<S>) -> Result<S, BenchError> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        match accept() {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                return Err(BenchError::timeout(
                    "waiting for the parent to connect",
                    STARTUP_TIMEOUT,
                ))
            }
            Err(e) => return Err(BenchError::io("accepting the parent's connection")(e)),
        }
    }
}
