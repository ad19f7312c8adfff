//! The real binary as child processes, with their JSON Lines reports.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// A running `stampede-conference` with its stdout lines; killed when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every JSON object printed so far.
    pub seen: Vec<Value>,
}

impl Proc {
    pub fn spawn(name: &str, args: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stampede-conference"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
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
            name: name.to_owned(),
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next report, or `None` once the process closed its stdout.
    fn next(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(l) => {
                let v: Value = serde_json::from_str(&l)
                    .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", self.name));
                self.seen.push(v.clone());
                Some(v)
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: nothing expected within the time; last reports {:?}",
                self.name,
                self.seen.iter().rev().take(3).collect::<Vec<_>>()
            ),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Waits for a report matching `f`.
    pub fn wait_for(&mut self, timeout: Duration, mut f: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            match self.next(deadline) {
                Some(v) if f(&v) => return v,
                Some(_) => {}
                None => panic!(
                    "{}: exited; last reports {:?}",
                    self.name,
                    self.seen.iter().rev().take(3).collect::<Vec<_>>()
                ),
            }
        }
    }

    pub fn wait_event(&mut self, event: &str, timeout: Duration) -> Value {
        self.wait_for(timeout, |v| v["event"] == event)
    }

    /// Waits for a display report whose last composite had exactly `members`.
    pub fn wait_members(&mut self, members: &[u64], timeout: Duration) -> Value {
        self.wait_for(timeout, |v| {
            v["event"] == "display" && members_of(v) == members
        })
    }

    /// Closes standard input, which tells a participant to leave; returns its summary once
    /// it exited successfully.
    pub fn leave(&mut self, timeout: Duration) -> Value {
        self.stdin.take();
        let deadline = Instant::now() + timeout;
        let mut summary = None;
        while let Some(v) = self.next(deadline) {
            if v["event"] == "summary" {
                summary = Some(v);
            }
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{}: exited with {status}", self.name);
        summary.unwrap_or_else(|| panic!("{}: no summary", self.name))
    }

    /// Kills the process with SIGKILL: no goodbye, no summary.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        while self.next(deadline).is_some() {}
        self.child.wait().unwrap()
    }

    /// The display reports printed so far.
    pub fn displays(&self) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|v| v["event"] == "display")
            .collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn members_of(v: &Value) -> Vec<u64> {
    v["members"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

pub fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}
