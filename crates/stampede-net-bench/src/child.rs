//! The second process of every measurement: the binary re-executes itself with the hidden
//! [`SUBCOMMAND`], and the two sides synchronise over the child's stdin and stdout, one line
//! per message:
//!
//! * child → parent: `READY <endpoint>` once it listens; `LINKED` (Zenoh and Stampede) once
//!   its publisher matches the parent's subscriber, or its connections to the parent's
//!   containers are attached, so nothing is sent into the void; `SENT <n>` (producers) once
//!   it has sent everything; `RESIDENT <n>` (Stampede echo) the most items its channel held
//!   at once; `CONSUMED <ts>:<ns> ...` (Stampede consumer) when it consumed each item.
//! * parent → child: `DONE` once the parent has everything it needs. Only then does the child
//!   close its end and exit: a Zenoh put returns when the message is queued, not delivered,
//!   so a producer that exited right after its last put could lose the tail. End of input
//!   counts as `DONE`, so a child whose parent died exits as well.
//!
//! Every wait on either side has a timeout, and [`ChildProcess`] kills and reaps the child
//! when dropped, so a failed measurement neither hangs nor leaves a process behind.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::{stm, tcp, unix, zenoh_pubsub, BenchError};

/// The hidden subcommand under which the binary runs the child side.
pub const SUBCOMMAND: &str = "child";

/// Until the child listens (a Zenoh session takes a while to open) and the two sides are linked.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for any single message once a measurement runs.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Until the parent says `DONE`, counted from when the child finished its part.
const DONE_TIMEOUT: Duration = Duration::from_secs(60);
/// Until the child exits after `DONE`.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

const DEFAULT_KEY_PREFIX: &str = "stampede-net-bench";
const DEFAULT_APP: &str = "stampede-net-bench";

static EXECUTABLE: OnceLock<PathBuf> = OnceLock::new();

/// Runs children from `path` instead of the current executable: a test harness is not the
/// benchmark binary, so tests point this at it (`CARGO_BIN_EXE_stampede-net-bench`). The
/// first call wins; returns whether this one did.
pub fn use_executable(path: impl Into<PathBuf>) -> bool {
    EXECUTABLE.set(path.into()).is_ok()
}

/// What the child process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Echoes fixed-size messages on a TCP connection.
    TcpEcho,
    /// Echoes fixed-size messages on a Unix-domain stream socket.
    UnixEcho,
    /// Republishes every sample from `<prefix>/ping` on `<prefix>/pong`.
    ZenohEcho,
    /// Sends fixed-size messages on a TCP connection for a while.
    TcpProducer,
    /// Publishes fixed-size messages on `<prefix>/data` for a while.
    ZenohProducer,
    /// The same, each written into a buffer of the session's shared memory.
    ZenohShmProducer,
    /// Gets each item of its own Stampede channel and puts it into the parent's.
    StampedeEcho,
    /// Puts fixed-size items into the parent's Stampede channel for a while.
    StampedeProducer,
    /// The same, each written into memory the connection lends.
    StampedeLoanProducer,
    /// Gets and consumes the items of the parent's Stampede channel, noting when.
    StampedeConsumer,
}

/// The child's command line after [`SUBCOMMAND`].
#[derive(Clone, Debug, clap::Args)]
pub struct ChildArgs {
    /// What to do.
    #[arg(value_enum)]
    pub role: Role,
    /// Message size in bytes, the same on both sides.
    #[arg(long)]
    pub size: usize,
    /// Messages to echo (echo roles) or consume (consumer roles).
    #[arg(long, default_value_t = 0)]
    pub count: usize,
    /// How long to send (producer roles), in seconds.
    #[arg(long, default_value_t = 0.0)]
    pub seconds: f64,
    /// Path of the Unix socket to listen on (created by the parent, which removes it).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Prefix of the Zenoh key expressions.
    #[arg(long, default_value = DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,
    /// The Stampede application both processes join.
    #[arg(long, default_value = DEFAULT_APP)]
    pub app: String,
}

impl ChildArgs {
    /// Arguments for `role` with `size`-byte messages, everything else at its default.
    pub fn new(role: Role, size: usize) -> Self {
        Self {
            role,
            size,
            count: 0,
            seconds: 0.0,
            socket: None,
            key_prefix: DEFAULT_KEY_PREFIX.into(),
            app: DEFAULT_APP.into(),
        }
    }

    fn to_args(&self) -> Vec<OsString> {
        let role = clap::ValueEnum::to_possible_value(&self.role)
            .expect("no role is skipped")
            .get_name()
            .to_owned();
        let mut args: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            role.into(),
            "--size".into(),
            self.size.to_string().into(),
            "--count".into(),
            self.count.to_string().into(),
            "--seconds".into(),
            self.seconds.to_string().into(),
            "--key-prefix".into(),
            self.key_prefix.clone().into(),
            "--app".into(),
            self.app.clone().into(),
        ];
        if let Some(socket) = &self.socket {
            args.push("--socket".into());
            args.push(socket.clone().into());
        }
        args
    }
}

/// Runs the child side described by `args` (the body of the hidden subcommand).
pub fn serve(args: &ChildArgs) -> Result<(), BenchError> {
    let duration = Duration::from_secs_f64(args.seconds.max(0.0));
    match args.role {
        Role::TcpEcho => tcp::serve_echo(args.size, args.count),
        Role::UnixEcho => {
            let socket = args
                .socket
                .as_deref()
                .ok_or_else(|| BenchError::Child("unix-echo needs --socket".into()))?;
            unix::serve_echo(socket, args.size, args.count)
        }
        Role::ZenohEcho => zenoh_pubsub::serve_echo(&args.key_prefix, args.size, args.count),
        Role::TcpProducer => tcp::serve_producer(args.size, duration),
        Role::ZenohProducer => {
            zenoh_pubsub::serve_producer(&args.key_prefix, args.size, duration, false)
        }
        Role::ZenohShmProducer => {
            zenoh_pubsub::serve_producer(&args.key_prefix, args.size, duration, true)
        }
        Role::StampedeEcho => stm::serve_echo(&args.app, args.size, args.count),
        Role::StampedeProducer => stm::serve_producer(&args.app, args.size, duration, false),
        Role::StampedeLoanProducer => stm::serve_producer(&args.app, args.size, duration, true),
        Role::StampedeConsumer => stm::serve_consumer(&args.app, args.size, args.count),
    }
}

/// Child side: tells the parent `line`.
pub(crate) fn announce(line: &str) -> Result<(), BenchError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(BenchError::io("writing to the parent"))
}

/// Child side: waits until the parent says `DONE` (or goes away).
pub(crate) fn await_done() -> Result<(), BenchError> {
    let (tx, rx) = mpsc::channel();
    // A thread because stdin has no read timeout; it dies with the process.
    thread::spawn(move || {
        let mut line = String::new();
        let read = io::stdin().lock().read_line(&mut line).map(|_| line);
        let _ = tx.send(read);
    });
    match rx.recv_timeout(DONE_TIMEOUT) {
        Ok(Ok(line)) if line.is_empty() || line.trim() == "DONE" => Ok(()),
        Ok(Ok(line)) => Err(BenchError::Child(format!(
            "expected `DONE` from the parent, got `{}`",
            line.trim()
        ))),
        Ok(Err(e)) => Err(BenchError::io("reading from the parent")(e)),
        Err(_) => Err(BenchError::timeout(
            "waiting for `DONE` from the parent",
            DONE_TIMEOUT,
        )),
    }
}

/// Parent side: a running child process, killed and reaped when dropped.
#[derive(Debug)]
pub struct ChildProcess {
    process: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<io::Result<String>>,
    name: String,
}

impl ChildProcess {
    /// Starts this executable as a child with `args`.
    pub fn spawn(args: &ChildArgs) -> Result<Self, BenchError> {
        let exe = match EXECUTABLE.get() {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(BenchError::io("locating this executable"))?,
        };
        let mut process = Command::new(exe)
            .args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(BenchError::io("starting the child process"))?;
        let stdin = process.stdin.take();
        let stdout = process.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        // A thread because pipes have no read timeout; it ends at the child's end of output.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let name = format!("{:?} child (pid {})", args.role, process.id());
        Ok(Self {
            process,
            stdin,
            lines,
            name,
        })
    }

    /// Waits for the line `<keyword> <rest>` and returns `rest`.
    pub fn expect(&mut self, keyword: &str, timeout: Duration) -> Result<String, BenchError> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => match line.split_once(' ') {
                Some((word, rest)) if word == keyword => Ok(rest.to_owned()),
                None if line == keyword => Ok(String::new()),
                _ => Err(BenchError::Child(format!(
                    "{}: expected `{keyword}`, got `{line}`",
                    self.name
                ))),
            },
            Ok(Err(e)) => Err(BenchError::io(format!("reading from {}", self.name))(e)),
            Err(RecvTimeoutError::Timeout) => Err(BenchError::timeout(
                format!("waiting for `{keyword}` from {}", self.name),
                timeout,
            )),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait_exit(Duration::from_secs(1));
                Err(BenchError::Child(format!(
                    "{} ended ({}) before sending `{keyword}`",
                    self.name,
                    describe(status)
                )))
            }
        }
    }

    /// Says `DONE`, then waits for the child to exit successfully.
    pub fn finish(mut self) -> Result<(), BenchError> {
        if let Some(mut stdin) = self.stdin.take() {
            // The child may already be gone; its exit status tells the story then.
            let _ = writeln!(stdin, "DONE").and_then(|()| stdin.flush());
        }
        match self.wait_exit(EXIT_TIMEOUT) {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(BenchError::Child(format!("{} failed: {status}", self.name))),
            None => Err(BenchError::timeout(
                format!("waiting for {} to exit", self.name),
                EXIT_TIMEOUT,
            )),
        }
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.process.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.process.try_wait() {
            let _ = self.process.kill();
        }
        let _ = self.process.wait();
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    status.map_or_else(|| "still running".into(), |s| s.to_string())
}
