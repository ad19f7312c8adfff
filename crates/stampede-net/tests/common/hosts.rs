//! Two emulated hosts with a relay between them.
//!
//! Namespaces `A` and `B` are each joined to the root namespace by their own veth pair, with
//! no route from one to the other, so every byte between them passes a Toxiproxy relay in
//! the root namespace: it listens on `B`'s root-side address and forwards to the router on
//! `A`. The relay adds latency both ways (this kernel has no `tc netem`), and a partition
//! sets the root end of `B`'s link down.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Proc;

pub const A: usize = 0;
pub const B: usize = 1;

/// Where the router on host `A` listens, in its namespace.
const ROUTER_PORT: u16 = 7447;

/// Runs a command, with its standard error as the failure.
pub fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
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

/// Toxiproxy's server: `STAMPEDE_TOXIPROXY`, the one `make toxiproxy` installs, or the
/// first on the PATH.
pub fn relay_binary() -> Option<PathBuf> {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(|root| root.join("target/tools/toxiproxy-server"));
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("toxiproxy-server"))
            .find(|f| f.is_file())
    });
    std::env::var_os("STAMPEDE_TOXIPROXY")
        .map(PathBuf::from)
        .into_iter()
        .chain(installed)
        .chain(on_path)
        .find(|f| f.is_file())
}

/// The two hosts and the relay; all removed on drop.
pub struct Hosts {
    ns: [String; 2],
    root_dev: [String; 2],
    dev: [String; 2],
    root_addr: [String; 2],
    addr: [String; 2],
    relay: Option<Relay>,
    relay_port: u16,
}

impl Hosts {
    /// Sets up the hosts and a relay delaying each direction by `latency` ± `jitter`, or
    /// says why it cannot. Without the relay binary this panics where `CI` is set, so a
    /// CI run cannot pass by skipping.
    pub fn new(latency: Duration, jitter: Duration) -> Result<Hosts, String> {
        let Some(binary) = relay_binary() else {
            let why = "no toxiproxy-server (STAMPEDE_TOXIPROXY, target/tools or PATH)";
            assert!(
                std::env::var_os("CI").is_none(),
                "{why}: `make toxiproxy` must run first"
            );
            return Err(why.into());
        };
        // Unique among live processes, and outside the subnets bench/chaos_net.py uses.
        let pid = std::process::id();
        let net = pid % 12_000;
        let (octet, base) = (200 + net / 250, (net % 125) * 2);
        let mut h = Hosts {
            ns: [format!("stp{pid}a"), format!("stp{pid}b")],
            root_dev: [format!("stp{pid}ra"), format!("stp{pid}rb")],
            dev: [format!("stp{pid}xa"), format!("stp{pid}xb")],
            root_addr: [0, 1].map(|k| format!("10.{octet}.{}.1", base + k)),
            addr: [0, 1].map(|k| format!("10.{octet}.{}.2", base + k)),
            relay: None,
            relay_port: 0,
        };
        // Leftovers of an earlier process with this pid, killed before it cleaned up.
        h.remove();
        for host in [A, B] {
            let (ns, rdev, dev) = (&h.ns[host], &h.root_dev[host], &h.dev[host]);
            sh(&["ip", "netns", "add", ns])?;
            sh(&[
                "ip", "link", "add", rdev, "type", "veth", "peer", "name", dev, "netns", ns,
            ])?;
            let root_addr = format!("{}/24", h.root_addr[host]);
            sh(&["ip", "addr", "add", &root_addr, "dev", rdev])?;
            sh(&["ip", "link", "set", rdev, "up"])?;
            let addr = format!("{}/24", h.addr[host]);
            sh(&["ip", "-n", ns, "addr", "add", &addr, "dev", dev])?;
            sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        h.relay_port = TcpListener::bind((h.root_addr[B].as_str(), 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no port on {}: {e}", h.root_addr[B]))?
            .port();
        let listen = format!("{}:{}", h.root_addr[B], h.relay_port);
        let upstream = format!("{}:{ROUTER_PORT}", h.addr[A]);
        let relay = h.relay.insert(Relay::start(&binary, &listen, &upstream)?);
        let ms = |d: Duration| d.as_millis();
        for stream in ["upstream", "downstream"] {
            relay.call(
                "POST",
                &format!("/proxies/{}/toxics", Relay::NAME),
                &format!(
                    r#"{{"name":"delay-{stream}","type":"latency","stream":"{stream}","toxicity":1.0,"attributes":{{"latency":{},"jitter":{}}}}}"#,
                    ms(latency),
                    ms(jitter)
                ),
            )?;
        }
        Ok(h)
    }

    /// The router's endpoint, for processes on host `A`.
    pub fn router(&self) -> String {
        format!("tcp/{}:{ROUTER_PORT}", self.addr[A])
    }

    /// The relay's endpoint, for processes on host `B`.
    pub fn relay(&self) -> String {
        format!("tcp/{}:{}", self.root_addr[B], self.relay_port)
    }

    /// Starts a child process with `role` on `host`. It enters only the network namespace:
    /// `ip netns exec` also gives each process a mount namespace, whose release at exit
    /// waits for an expedited RCU grace period, which on a busy machine left a killed
    /// process unreaped for up to a minute.
    pub fn spawn(&self, host: usize, role: &str, env: &[(&str, String)]) -> Proc {
        let net = format!("--net=/var/run/netns/{}", self.ns[host]);
        Proc::spawn_via(&["nsenter", &net], role, env)
    }

    /// Cuts host `B`'s link (or heals it).
    pub fn partition(&self, cut: bool) {
        let state = if cut { "down" } else { "up" };
        sh(&["ip", "link", "set", &self.root_dev[B], state]).unwrap();
    }

    fn remove(&self) {
        for host in [A, B] {
            let _ = sh(&["ip", "link", "del", &self.root_dev[host]]);
            let _ = sh(&["ip", "netns", "del", &self.ns[host]]);
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // The relay goes first, so nothing holds the links.
        self.relay = None;
        self.remove();
    }
}

/// A Toxiproxy server with one proxy, driven through its HTTP API. Its toxics stay for the
/// relay's life: removing a latency toxic from a busy link can hang (Toxiproxy issue 558).
struct Relay {
    child: Child,
    api: SocketAddr,
}

impl Relay {
    const NAME: &'static str = "router";

    fn start(binary: &Path, listen: &str, upstream: &str) -> Result<Relay, String> {
        let port = super::free_port();
        let child = Command::new(binary)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        let mut relay = Relay {
            child,
            api: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = relay.call("GET", "/version", "") {
            if Instant::now() > deadline || relay.child.try_wait().ok().flatten().is_some() {
                return Err(format!("the relay did not start: {e}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        relay.call(
            "POST",
            "/proxies",
            &format!(
                r#"{{"name":"{}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#,
                Relay::NAME
            ),
        )?;
        Ok(relay)
    }

    /// One HTTP/1.1 request; the response's body, or why it failed.
    fn call(&self, method: &str, path: &str, body: &str) -> Result<String, String> {
        let fail = |e: std::io::Error| format!("{method} {path}: {e}");
        let mut s = TcpStream::connect_timeout(&self.api, Duration::from_secs(2)).map_err(fail)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(fail)?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.api,
            body.len()
        )
        .map_err(fail)?;
        let mut response = String::new();
        s.read_to_string(&mut response).map_err(fail)?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.split_whitespace().nth(1).unwrap_or("");
        if status.starts_with('2') {
            Ok(body.to_owned())
        } else {
            Err(format!("{method} {path}: {head} {body}"))
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
