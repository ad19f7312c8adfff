//! The paper's first version, over plain TCP and without Stampede: a single-threaded mixer
//! reads one frame from each participant in turn, composes, and writes the composite to each
//! participant in turn. It is what the Stampede mixer is measured against.
//!
//! The protocol, all integers little-endian:
//!
//! * participant → mixer, once: hello `[u32 id][u32 H][u32 W]`;
//! * mixer → participant, once: welcome `[u64 first slot]`, the slot of the participant's
//!   first frame (the mixer reads exactly one frame per member per slot, so this keeps frame
//!   timestamps equal to slots);
//! * participant → mixer, per slot: `[u64 ts][u32 len][len bytes]`, the frame of
//!   [`crate::frame`];
//! * mixer → participant, per slot: `[u64 ts][u32 rows_px][u32 cols_px][u32 len][len bytes]`,
//!   the composite of [`crate::frame::compose`].
//!
//! A participant leaves by closing its side; any read or write error removes it.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stampede_core::{LateAction, Pacer};

use crate::error::{joined, ConferenceError};
use crate::frame::{compose, fill_frame, FrameSize, Tile};
use crate::report::{emit, DisplayStats, FpsMeter, MixerReport, Summary};
use crate::stop::Stop;

/// Where the baseline mixer listens unless told otherwise.
pub const DEFAULT_BASELINE_ADDR: &str = "127.0.0.1:7448";

/// Longest frame or composite accepted (a corrupt length must not allocate gigabytes).
const MAX_PAYLOAD: usize = 1 << 30;

/// How long the mixer waits on one participant before giving up on it.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The socket address of an endpoint, with or without a `tcp/` prefix.
pub fn socket_addr(endpoint: &str) -> Result<std::net::SocketAddr, ConferenceError> {
    let addr = endpoint.strip_prefix("tcp/").unwrap_or(endpoint);
    addr.to_socket_addrs()
        .map_err(|e| ConferenceError::io(format!("resolving {addr}"), e))?
        .next()
        .ok_or_else(|| ConferenceError::Setup(format!("{addr} names no address")))
}

/// Whether an error is the other side closing its socket, the normal way to leave.
fn is_departure(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
    )
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_len(r: &mut impl Read) -> io::Result<usize> {
    let len = read_u32(r)? as usize;
    if len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a payload of {len} bytes"),
        ));
    }
    Ok(len)
}

struct Member {
    id: u32,
    size: FrameSize,
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    frame: Vec<u8>,
}

impl Member {
    fn read_frame(&mut self, slot: u64) -> io::Result<()> {
        let ts = read_u64(&mut self.reader)?;
        let len = read_len(&mut self.reader)?;
        if ts != slot || len != self.size.bytes() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "frame for slot {ts} of {len} bytes where slot {slot} of {} was due",
                    self.size.bytes()
                ),
            ));
        }
        self.frame.resize(len, 0);
        self.reader.read_exact(&mut self.frame)
    }

    fn write_composite(&mut self, slot: u64, shape: [usize; 3], data: &[u8]) -> io::Result<()> {
        let w = &mut self.writer;
        w.write_all(&slot.to_le_bytes())?;
        w.write_all(&(shape[0] as u32).to_le_bytes())?;
        w.write_all(&(shape[1] as u32).to_le_bytes())?;
        w.write_all(&(data.len() as u32).to_le_bytes())?;
        w.write_all(data)?;
        w.flush()
    }
}

/// Greets a new connection: reads its hello, sends its first slot.
fn welcome(stream: TcpStream, slot: u64) -> io::Result<Member> {
    stream.set_nodelay(true)?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone()?);
    let id = read_u32(&mut reader)?;
    let height = read_u32(&mut reader)? as usize;
    let width = read_u32(&mut reader)? as usize;
    let size = FrameSize { height, width };
    if id == 0 || !size.holds_header() || size.bytes() > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("hello from id {id} with {height}x{width} frames"),
        ));
    }
    let mut writer = BufWriter::with_capacity(1 << 16, stream);
    writer.write_all(&slot.to_le_bytes())?;
    writer.flush()?;
    Ok(Member {
        id,
        size,
        reader,
        writer,
        frame: Vec::new(),
    })
}

/// What the baseline mixer is told.
#[derive(Clone, Debug)]
pub struct BaselineMixerOptions {
    /// Address to listen on.
    pub listen: String,
    /// Cell size of a composite before any frame was seen.
    pub frame: FrameSize,
    /// How often to print the statistics.
    pub report_every: Duration,
}

/// Runs the baseline mixer until `stop`; returns the last statistics.
pub fn run_baseline_mixer(
    opts: &BaselineMixerOptions,
    stop: &Stop,
) -> Result<MixerReport, ConferenceError> {
    let addr = socket_addr(&opts.listen)?;
    let listener = TcpListener::bind(addr)
        .map_err(|e| ConferenceError::io(format!("listening on {addr}"), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| ConferenceError::io("listening", e))?;
    emit(&serde_json::json!({"event": "ready", "listen": addr.to_string(), "threads": "baseline"}));
    let mut members: Vec<Member> = Vec::new();
    let mut stats = MixerReport {
        event: "mixer".into(),
        ..MixerReport::default()
    };
    let mut meter = FpsMeter::new();
    let mut tile = opts.frame;
    let mut slot: u64 = 0;
    let mut next_report = Instant::now() + opts.report_every;
    while !stop.is_set() {
        let now = Instant::now();
        if now >= next_report {
            stats.fps = meter.interval_rate(now);
            stats.members = members.iter().map(|m| m.id).collect();
            emit(&stats);
            next_report = now + opts.report_every;
        }
        loop {
            match listener.accept() {
                Ok((stream, peer)) => match welcome(stream, slot) {
                    Ok(m) if members.iter().any(|o| o.id == m.id) => {
                        eprintln!("baseline mixer: participant {} is already here", m.id);
                    }
                    Ok(m) => {
                        let at = members.partition_point(|o| o.id < m.id);
                        members.insert(at, m);
                    }
                    Err(e) => eprintln!("baseline mixer: refused {peer}: {e}"),
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(ConferenceError::io("accepting", e)),
            }
        }
        if members.is_empty() {
            stop.wait_timeout(Duration::from_millis(5));
            continue;
        }
        // One participant after another: a slow one holds everybody up.
        let mut failed = vec![false; members.len()];
        for (m, f) in members.iter_mut().zip(&mut failed) {
            if let Err(e) = m.read_frame(slot) {
                if !is_departure(&e) {
                    eprintln!("baseline mixer: participant {} gone: {e}", m.id);
                }
                *f = true;
                stats.missing += 1;
            }
        }
        let tiles: Vec<Option<Tile<'_>>> = members
            .iter()
            .zip(&failed)
            .map(|(m, &f)| {
                (!f).then_some(Tile {
                    size: m.size,
                    data: &m.frame,
                })
            })
            .collect();
        let composite = compose(&tiles, tile);
        tile = composite.tile;
        let shape = composite.shape();
        for (m, f) in members.iter_mut().zip(&mut failed) {
            if !*f {
                if let Err(e) = m.write_composite(slot, shape, &composite.data) {
                    if !is_departure(&e) {
                        eprintln!("baseline mixer: participant {} gone: {e}", m.id);
                    }
                    *f = true;
                }
            }
        }
        stats.slots += 1;
        stats.composites += 1;
        meter.tick();
        let mut i = 0;
        members.retain(|_| {
            i += 1;
            !failed[i - 1]
        });
        slot += 1;
    }
    stats.fps = meter.mean_rate();
    stats.members = members.iter().map(|m| m.id).collect();
    emit(&stats);
    Ok(stats)
}

/// What a baseline participant is told.
#[derive(Clone, Debug)]
pub struct BaselineParticipantOptions {
    /// The mixer's address.
    pub connect: String,
    /// The participant's id, at least 1.
    pub id: u32,
    /// The camera's frame size.
    pub frame: FrameSize,
    /// Frames per second (0: as fast as the mixer takes them).
    pub fps: f64,
    /// How often to print a display report.
    pub report_every: Duration,
    /// How long to keep trying to reach the mixer.
    pub wait: Duration,
}

fn connect(addr: std::net::SocketAddr, wait: Duration) -> Result<TcpStream, ConferenceError> {
    let deadline = Instant::now() + wait;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                return Err(ConferenceError::io(format!("connecting to {addr}"), e))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Connects to the baseline mixer, runs camera and display until `stop`; returns the summary
/// (also printed).
pub fn run_baseline_participant(
    opts: &BaselineParticipantOptions,
    stop: &Stop,
) -> Result<Summary, ConferenceError> {
    if opts.id == 0 || !opts.frame.holds_header() {
        return Err(ConferenceError::Setup(
            "ids start at 1 and frames need room for the 12-byte header".into(),
        ));
    }
    let addr = socket_addr(&opts.connect)?;
    let stream = connect(addr, opts.wait)?;
    let io = |what: &str| {
        let what = what.to_owned();
        move |e| ConferenceError::io(what, e)
    };
    stream.set_nodelay(true).map_err(io("configuring"))?;
    let mut hello = Vec::with_capacity(12);
    hello.extend_from_slice(&opts.id.to_le_bytes());
    hello.extend_from_slice(&(opts.frame.height as u32).to_le_bytes());
    hello.extend_from_slice(&(opts.frame.width as u32).to_le_bytes());
    (&stream).write_all(&hello).map_err(io("sending hello"))?;
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone().map_err(io("cloning"))?);
    let first = read_u64(&mut reader).map_err(io("reading the welcome"))?;
    emit(&serde_json::json!({"event": "joined", "id": opts.id, "clock": first, "t0": first}));

    let display = DisplayStats::new(opts.id, opts.frame);
    let frames_put = AtomicU64::new(0);
    let (cam_result, display_result) = std::thread::scope(|s| {
        let writer = &stream;
        let camera = s.spawn(|| {
            let r = camera(writer, opts, first, stop, &frames_put);
            // The mixer sees the end of this participant's frames and removes it, which
            // ends the display's stream too.
            let _ = writer.shutdown(Shutdown::Write);
            stop.trigger();
            r
        });
        let shown = s.spawn(|| {
            let r = show(&mut reader, &display);
            stop.trigger();
            r
        });
        while !stop.wait_timeout(opts.report_every) {
            emit(&display.report());
        }
        let c = joined(camera);
        // The mixer answers the end of the frames by closing, which ends the display; one
        // that does not within a while has stopped reading, so the socket is closed here.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !shown.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = stream.shutdown(Shutdown::Both);
        (c, joined(shown))
    });
    let summary = display.summary(frames_put.load(Ordering::Relaxed));
    emit(&summary);
    cam_result?;
    display_result?;
    Ok(summary)
}

fn camera(
    stream: &TcpStream,
    opts: &BaselineParticipantOptions,
    first: u64,
    stop: &Stop,
    frames_put: &AtomicU64,
) -> Result<(), ConferenceError> {
    let mut pacer = (opts.fps > 0.0).then(|| {
        let period = Duration::from_secs_f64(1.0 / opts.fps);
        Pacer::new(period, period, |_| LateAction::Continue)
    });
    let mut w = BufWriter::with_capacity(1 << 16, stream);
    let mut frame = vec![0u8; opts.frame.bytes()];
    let mut ts = first;
    while !stop.is_set() {
        if let Some(p) = &mut pacer {
            p.sync(ts as i64);
        }
        fill_frame(&mut frame, opts.id, ts);
        let sent = w
            .write_all(&ts.to_le_bytes())
            .and_then(|()| w.write_all(&(frame.len() as u32).to_le_bytes()))
            .and_then(|()| w.write_all(&frame))
            .and_then(|()| w.flush());
        if let Err(e) = sent {
            if stop.is_set() {
                return Ok(());
            }
            return Err(ConferenceError::io("sending a frame", e));
        }
        frames_put.fetch_add(1, Ordering::Relaxed);
        ts += 1;
    }
    Ok(())
}

fn show(reader: &mut BufReader<TcpStream>, display: &DisplayStats) -> Result<(), ConferenceError> {
    let mut data = Vec::new();
    loop {
        let header = (|| {
            let ts = read_u64(reader)?;
            let rows = read_u32(reader)? as usize;
            let cols = read_u32(reader)? as usize;
            let len = read_len(reader)?;
            Ok::<_, io::Error>((ts, rows, cols, len))
        })();
        let (ts, rows, cols, len) = match header {
            Ok(h) => h,
            Err(e) if is_departure(&e) => return Ok(()),
            Err(e) => return Err(ConferenceError::io("receiving a composite", e)),
        };
        data.resize(len, 0);
        if let Err(e) = reader.read_exact(&mut data) {
            if is_departure(&e) {
                return Ok(());
            }
            return Err(ConferenceError::io("receiving a composite", e));
        }
        display.received(ts as i64, &data, &[rows, cols, 3]);
    }
}
