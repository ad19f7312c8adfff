//! Emulated hosts: one network namespace per worker, joined to this process's namespace by
//! a veth pair rate-limited with `tc tbf`, and a relay here that holds every chunk of the
//! byte stream for a fixed delay in each direction (this kernel has no netem). The workers
//! connect to the router through their relay, as Zenoh clients, with shared memory off, so
//! every byte crosses the emulated link.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn sh(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Copies `from` to `to`, each chunk delivered `delay` after it was read.
fn delayed_pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// Accepts on `listener` and joins each connection to `target` through two delayed pipes.
fn relay(listener: TcpListener, target: String, delay: Duration) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inbound) = conn else { continue };
            let Ok(outbound) = TcpStream::connect(&target) else {
                continue;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (i2, o2) = match (inbound.try_clone(), outbound.try_clone()) {
                (Ok(i), Ok(o)) => (i, o),
                _ => continue,
            };
            delayed_pipe(inbound, outbound, delay);
            delayed_pipe(o2, i2, delay);
        }
    });
}

/// The emulated hosts, removed on drop.
pub struct Network {
    names: Vec<String>,
    links: Vec<String>,
    /// Per worker: the command prefix that runs in its namespace, and the endpoint of its
    /// relay.
    pub hosts: Vec<(Vec<String>, String)>,
}

impl Network {
    /// `workers` hosts, each with a link of `rate` (as `tc` spells it, e.g. `100mbit`) and
    /// `delay` each way to the router listening on `127.0.0.1:router_port`.
    pub fn new(
        workers: usize,
        rate: &str,
        delay: Duration,
        router_port: u16,
    ) -> Result<Network, String> {
        let id = std::process::id() % 10_000;
        // A run sets up several networks; a deleted namespace's links can linger briefly.
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Interrupted, the namespaces go too (a drop does not run then).
        static HANDLER: std::sync::Once = std::sync::Once::new();
        HANDLER.call_once(|| {
            let _ = ctrlc::set_handler(move || {
                remove_namespaces(&format!("stt{id}h"));
                std::process::exit(130);
            });
        });
        let mut net = Network {
            names: Vec::new(),
            links: Vec::new(),
            hosts: Vec::new(),
        };
        for k in 0..workers {
            let ns = format!("stt{id}h{seq}x{k}");
            sh(&["ip", "netns", "add", &ns])?;
            net.names.push(ns.clone());
            let (here, there) = (format!("st{id}a{seq}x{k}"), format!("st{id}b{seq}x{k}"));
            net.links.push(here.clone());
            sh(&[
                "ip", "link", "add", &here, "type", "veth", "peer", "name", &there, "netns", &ns,
            ])?;
            let subnet = format!("10.{}.{}", 100 + id % 100, k + 1);
            sh(&["ip", "addr", "add", &format!("{subnet}.1/24"), "dev", &here])?;
            sh(&["ip", "link", "set", &here, "up"])?;
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{subnet}.2/24"),
                "dev",
                &there,
            ])?;
            sh(&["ip", "-n", &ns, "link", "set", &there, "up"])?;
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            let tbf = [
                "root", "tbf", "rate", rate, "burst", "64kb", "latency", "50ms",
            ];
            let mut cmd = vec!["tc", "qdisc", "add", "dev", &here];
            cmd.extend(tbf);
            sh(&cmd)?;
            let mut cmd = vec![
                "ip", "netns", "exec", &ns, "tc", "qdisc", "add", "dev", &there,
            ];
            cmd.extend(tbf);
            sh(&cmd)?;
            let listener = TcpListener::bind(format!("{subnet}.1:0"))
                .map_err(|e| format!("the relay for host {k}: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            relay(listener, format!("127.0.0.1:{router_port}"), delay);
            net.hosts.push((
                vec!["ip".into(), "netns".into(), "exec".into(), ns.clone()],
                format!("tcp/{subnet}.1:{port}"),
            ));
        }
        Ok(net)
    }
}

/// Deletes every namespace whose name starts with `prefix`.
fn remove_namespaces(prefix: &str) {
    let Ok(out) = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
    else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(name) = line
            .split_whitespace()
            .next()
            .filter(|n| n.starts_with(prefix))
        {
            let _ = sh(&["ip", "netns", "del", name]);
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for l in &self.links {
            let _ = sh(&["ip", "link", "del", l]);
        }
        for n in &self.names {
            let _ = sh(&["ip", "netns", "del", n]);
        }
    }
}
