//! Real processes for the multi-process tests: the test binary runs itself with a role.

#![allow(dead_code)]

pub mod hosts;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A unique application name per test, so concurrent tests never meet.
pub fn app(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

/// A child process running `role`, with its stdout lines.
pub struct Proc {
    pub child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
}

impl Proc {
    /// Starts this test binary's `child_entry` with `role` and `env`.
    pub fn spawn(role: &str, env: &[(&str, String)]) -> Proc {
        Proc::spawn_via(&[], role, env)
    }

    /// Starts the child through a wrapper command, such as `nsenter --net=PATH`.
    pub fn spawn_via(wrapper: &[&str], role: &str, env: &[(&str, String)]) -> Proc {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env("STAMPEDE_TEST_ROLE", role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Sends `line` to the child's standard input.
    pub fn say(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("stdin is piped");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for a line starting with `prefix`; returns the rest.
    pub fn expect(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no line {prefix:?} within {timeout:?}; seen {:?}",
                        self.seen
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("child exited before {prefix:?}; seen {:?}", self.seen)
                }
            }
        }
    }

    /// Every line printed so far, without waiting.
    pub fn printed(&mut self) -> &[String] {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        &self.seen
    }

    /// Every line until the child exits.
    pub fn finish(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("child still running; seen {:?}", self.seen)
                }
            }
        }
        let st = self.child.wait().unwrap();
        assert!(st.success(), "child failed: {st:?}; seen {:?}", self.seen);
        self.seen.clone()
    }

    /// Kills the child with SIGKILL.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}
