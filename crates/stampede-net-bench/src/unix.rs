//! A raw Unix-domain stream socket: the cheapest kernel-mediated byte stream between two
//! processes on one host, and what a same-host transport should be compared with.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use crate::child::{self, ChildArgs, ChildProcess, Role, IO_TIMEOUT, STARTUP_TIMEOUT};
use crate::{stream, warmup_for, BenchError, RoundTrips};

/// Ping-pong of `size`-byte messages with a child process; returns the one-way latency in µs
/// of each of `round_trips` round trips (after a warm-up).
pub fn pingpong(size: usize, round_trips: usize) -> Result<RoundTrips, BenchError> {
    let warmup = warmup_for(round_trips);
    let dir = TempDir::new()?;
    let socket = dir.path.join("pingpong.sock");
    let mut child = ChildProcess::spawn(&ChildArgs {
        count: warmup + round_trips,
        socket: Some(socket.clone()),
        ..ChildArgs::new(Role::UnixEcho, size)
    })?;
    child.expect("READY", STARTUP_TIMEOUT)?;
    let mut conn = UnixStream::connect(&socket).map_err(BenchError::io(format!(
        "connecting to {}",
        socket.display()
    )))?;
    configure(&conn)?;
    let samples = stream::ping(&mut conn, size, warmup, round_trips)?;
    drop(conn);
    child.finish()?;
    Ok(samples.into())
}

/// Child side of [`pingpong`]: listens on `socket`.
pub fn serve_echo(socket: &Path, size: usize, count: usize) -> Result<(), BenchError> {
    let listener = UnixListener::bind(socket)
        .map_err(BenchError::io(format!("listening on {}", socket.display())))?;
    listener
        .set_nonblocking(true)
        .map_err(BenchError::io("configuring the listener"))?;
    child::announce(&format!("READY {}", socket.display()))?;
    let (mut conn, _) = stream::accept_within(|| listener.accept())?;
    conn.set_nonblocking(false)
        .map_err(BenchError::io("configuring the connection"))?;
    configure(&conn)?;
    stream::echo(&mut conn, size, count)?;
    child::await_done()
}

fn configure(conn: &UnixStream) -> Result<(), BenchError> {
    conn.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(BenchError::io("configuring the connection"))
}

/// A private directory for the socket, removed when dropped.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> Result<Self, BenchError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("stampede-net-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path)
            .map_err(BenchError::io(format!("creating {}", path.display())))?;
        Ok(Self { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
