//! Long-running commands: a router, and an address space hosting containers. Both print
//! what they are as `key value` lines ending with `ready`, then serve until SIGINT or
//! SIGTERM and leave, so the others release what they held at once instead of after the
//! lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use stampede_core::{ContainerOptions, ZoneId};
use stampede_net::{Mode, Space};

use crate::args::{ContainerSpec, NodeArgs, RouterArgs, SpaceArgs};
use crate::Failure;

/// SIGINT and SIGTERM, as events. A second signal ends the process at once, for when
/// leaving itself is stuck.
#[derive(Debug)]
pub(crate) struct Interrupt {
    rx: Receiver<()>,
}

impl Interrupt {
    pub(crate) fn install() -> Result<Interrupt, Failure> {
        let (tx, rx) = mpsc::channel();
        let seen = AtomicBool::new(false);
        ctrlc::set_handler(move || {
            if seen.swap(true, Ordering::SeqCst) {
                eprintln!("interrupted again: exiting without leaving");
                std::process::exit(130);
            }
            let _ = tx.send(());
        })
        .map_err(|e| Failure::runtime(format!("cannot handle signals: {e}")))?;
        Ok(Interrupt { rx })
    }

    /// Blocks until a signal arrives.
    pub(crate) fn wait(&self) {
        let _ = self.rx.recv();
    }

    /// Whether a signal arrived, waiting at most `timeout` for one.
    pub(crate) fn arrived_within(&self, timeout: Duration) -> bool {
        !matches!(
            self.rx.recv_timeout(timeout),
            Err(RecvTimeoutError::Timeout)
        )
    }
}

fn describe(space: &Space) {
    let cfg = space.config();
    println!("app      {}", space.app());
    println!("id       {}", space.id());
    let mode = match cfg.mode {
        Mode::Router => "router",
        Mode::Client => "client",
        Mode::Peer => "peer",
    };
    println!("mode     {mode}");
    for e in &cfg.listen {
        println!("listen   {e}");
    }
    for e in &cfg.connect {
        println!("connect  {e}");
    }
    if let Some(addr) = space.metrics_addr() {
        println!("metrics  http://{addr}/metrics");
    }
}

fn serve_until_interrupted(space: Space, interrupt: &Interrupt) {
    crate::init_logging("warn");
    println!("ready");
    interrupt.wait();
    eprintln!("leaving {}", space.app());
    let s = space.stats();
    space.leave();
    eprintln!(
        "left: served={} malformed={} refused={} unreachable={} spaces_lost={}",
        s.served, s.malformed, s.refused, s.unreachable, s.spaces_lost
    );
}

/// `stampede router`.
pub(crate) fn router(a: RouterArgs) -> Result<(), Failure> {
    let interrupt = Interrupt::install()?;
    let cfg = a.conn.config(Mode::Router, &a.security);
    let space = Space::join(&a.conn.app, cfg)?;
    describe(&space);
    serve_until_interrupted(space, &interrupt);
    Ok(())
}

fn options(spec: &ContainerSpec, zone: ZoneId) -> ContainerOptions {
    let opts = match spec.capacity {
        Some(c) => ContainerOptions::bounded(c),
        None => ContainerOptions::unbounded(),
    };
    opts.name(spec.name.clone()).zone(zone)
}

fn capacity(spec: &ContainerSpec) -> String {
    spec.capacity
        .map_or_else(|| "unbounded".to_owned(), |c| c.to_string())
}

/// `stampede space`.
pub(crate) fn space(a: SpaceArgs) -> Result<(), Failure> {
    let interrupt = Interrupt::install()?;
    let cfg = a.conn.config(a.mode.into(), &a.security);
    let space = Space::join(&a.conn.app, cfg)?;
    let zone = ZoneId(a.zone);
    // Described once all is registered, so that nothing is printed for a space that fails.
    // The containers live in the space's runtime; the handles are kept only to say so.
    let mut hosted = Vec::new();
    let mut channels = Vec::new();
    for c in &a.channel {
        channels.push(space.channel(options(c, zone))?);
        hosted.push(format!(
            "channel  {} capacity={} zone={}",
            c.name,
            capacity(c),
            a.zone
        ));
    }
    let mut queues = Vec::new();
    for q in &a.queue {
        queues.push(space.queue(options(q, zone))?);
        hosted.push(format!(
            "queue    {} capacity={} zone={}",
            q.name,
            capacity(q),
            a.zone
        ));
    }
    let mut registers = Vec::new();
    for r in &a.register {
        let opts = ContainerOptions::unbounded().name(r.clone()).zone(zone);
        registers.push(space.register(opts)?);
        hosted.push(format!("register {r} zone={}", a.zone));
    }
    for (name, meta) in &a.service {
        space.register_service(name, meta)?;
        hosted.push(format!("service  {name} meta={meta:?}"));
    }
    describe(&space);
    for line in hosted {
        println!("{line}");
    }
    serve_until_interrupted(space, &interrupt);
    drop((channels, queues, registers));
    Ok(())
}

/// A node agent: an address space that starts address spaces for the application's
/// clusters on this host (they connect where this one does), until interrupted.
pub(crate) fn node(a: NodeArgs) -> Result<(), Failure> {
    let interrupt = Interrupt::install()?;
    let cfg = a.conn.config(Mode::Peer, &a.security);
    let connect = cfg.connect.clone();
    let space = Space::join(&a.conn.app, cfg)?;
    let host = a.host.clone().unwrap_or_else(host_name);
    let agent = stampede_cluster::NodeAgent::start(&space, &host, connect)
        .map_err(|e| Failure::runtime(e.to_string()))?;
    describe(&space);
    println!("node     {host}");
    serve_until_interrupted(space, &interrupt);
    drop(agent);
    Ok(())
}

/// This machine's host name (from the kernel), or "localhost".
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
