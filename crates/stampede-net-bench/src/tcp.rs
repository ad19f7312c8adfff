//! Raw TCP over 127.0.0.1 with `TCP_NODELAY`: the floor for anything that crosses processes
//! through the loopback network stack.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::child::{self, ChildArgs, ChildProcess, Role, IO_TIMEOUT, STARTUP_TIMEOUT};
use crate::stats::Throughput;
use crate::{stream, warmup_for, BenchError, RoundTrips};

/// Ping-pong of `size`-byte messages with a child process; returns the one-way latency in µs
/// of each of `round_trips` round trips (after a warm-up).
pub fn pingpong(size: usize, round_trips: usize) -> Result<RoundTrips, BenchError> {
    let warmup = warmup_for(round_trips);
    let mut child = ChildProcess::spawn(&ChildArgs {
        count: warmup + round_trips,
        ..ChildArgs::new(Role::TcpEcho, size)
    })?;
    let addr = child.expect("READY", STARTUP_TIMEOUT)?;
    let mut conn = connect(&addr)?;
    let samples = stream::ping(&mut conn, size, warmup, round_trips)?;
    drop(conn);
    child.finish()?;
    Ok(samples.into())
}

/// A child process sends `size`-byte messages for `duration`; measures them arriving here.
pub fn bandwidth(size: usize, duration: Duration) -> Result<Throughput, BenchError> {
    let mut child = ChildProcess::spawn(&ChildArgs {
        seconds: duration.as_secs_f64(),
        ..ChildArgs::new(Role::TcpProducer, size)
    })?;
    let addr = child.expect("READY", STARTUP_TIMEOUT)?;
    let mut conn = connect(&addr)?;
    let throughput = stream::consume(&mut conn, size)?;
    let sent = parse_count(&child.expect("SENT", IO_TIMEOUT)?)?;
    if sent != throughput.messages {
        return Err(BenchError::Lost {
            sent,
            received: throughput.messages,
        });
    }
    child.finish()?;
    Ok(throughput)
}

/// Child side of [`pingpong`].
pub fn serve_echo(size: usize, count: usize) -> Result<(), BenchError> {
    let mut conn = listen_and_accept()?;
    stream::echo(&mut conn, size, count)?;
    child::await_done()
}

/// Child side of [`bandwidth`].
pub fn serve_producer(size: usize, duration: Duration) -> Result<(), BenchError> {
    let mut conn = listen_and_accept()?;
    let sent = stream::produce(&mut conn, size, duration)?;
    // The consumer reads until end of stream, so close our direction before reporting.
    conn.shutdown(Shutdown::Write)
        .map_err(BenchError::io("closing the connection"))?;
    child::announce(&format!("SENT {sent}"))?;
    child::await_done()
}

pub(crate) fn parse_count(text: &str) -> Result<u64, BenchError> {
    text.trim()
        .parse()
        .map_err(|_| BenchError::Child(format!("`SENT {text}` is not a message count")))
}

fn connect(addr: &str) -> Result<TcpStream, BenchError> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| BenchError::Child(format!("`READY {addr}` is not a socket address")))?;
    let conn = TcpStream::connect_timeout(&addr, STARTUP_TIMEOUT)
        .map_err(BenchError::io(format!("connecting to {addr}")))?;
    configure(&conn)?;
    Ok(conn)
}

fn listen_and_accept() -> Result<TcpStream, BenchError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(BenchError::io("listening on 127.0.0.1"))?;
    let addr = listener
        .local_addr()
        .map_err(BenchError::io("reading the listening address"))?;
    listener
        .set_nonblocking(true)
        .map_err(BenchError::io("configuring the listener"))?;
    child::announce(&format!("READY {addr}"))?;
    let (conn, _) = stream::accept_within(|| listener.accept())?;
    conn.set_nonblocking(false)
        .map_err(BenchError::io("configuring the connection"))?;
    configure(&conn)?;
    Ok(conn)
}

fn configure(conn: &TcpStream) -> Result<(), BenchError> {
    conn.set_nodelay(true)
        .and_then(|()| conn.set_read_timeout(Some(IO_TIMEOUT)))
        .and_then(|()| conn.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(BenchError::io("configuring the connection"))
}
