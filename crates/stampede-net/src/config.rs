//! How an address space joins: Zenoh mode, endpoints, security and failure timeouts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::access::Access;
use crate::endpoint::validate_endpoint;
use crate::error::{zenoh_text, NetError};
use crate::quota::Quotas;

/// How the Zenoh session of an address space takes part in the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// A cluster member: connects directly to the other peers it learns of.
    #[default]
    Peer,
    /// An end device: one connection to a router (or peer) that routes for it.
    Client,
    /// Routes between peers and clients, possibly across networks.
    Router,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Peer => "peer",
            Mode::Client => "client",
            Mode::Router => "router",
        }
    }
}

/// TLS settings (endpoints then use `tls/` locators).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// The certificate authority that signed the other side's certificate.
    pub root_ca: Option<PathBuf>,
    /// This side's certificate, for listening.
    pub certificate: Option<PathBuf>,
    /// This side's private key, for listening.
    pub private_key: Option<PathBuf>,
    /// Check that the certificate names the host connected to (default on).
    pub verify_name: bool,
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            root_ca: None,
            certificate: None,
            private_key: None,
            verify_name: true,
        }
    }
}

/// Configuration of an address space. The defaults suit processes on one host: peer mode,
/// no multicast scouting (so unrelated applications on a network never meet), failure
/// detection within about a second.
#[derive(Clone, Debug)]
pub struct Config {
    /// Zenoh mode.
    pub mode: Mode,
    /// Endpoints to listen on, such as `tcp/127.0.0.1:7447`. A peer with none listens on
    /// [`DEFAULT_PEER_LISTEN`], so other peers can reach it directly.
    pub listen: Vec<String>,
    /// Endpoints to connect to.
    pub connect: Vec<String>,
    /// Find peers by UDP multicast on the local network.
    pub multicast_scouting: bool,
    /// TLS, when endpoints use `tls/`.
    pub tls: Option<Tls>,
    /// User and password this side presents.
    pub credentials: Option<(String, String)>,
    /// A file of `user:password` lines this side accepts (routers and listening peers).
    pub credentials_file: Option<PathBuf>,
    /// How long a silent link stays up: also how soon a killed process is noticed.
    pub lease: Duration,
    /// How long an operation waits for an answer from a live owner before it fails as
    /// unreachable (waiting operations ask again every [`wait_slice`](Config::wait_slice)).
    pub op_timeout: Duration,
    /// How long an owner waits in one piece for a blocked operation before the requester
    /// asks again; bounds how late a requester notices a dead owner.
    pub wait_slice: Duration,
    /// How long joining waits to reach the configured endpoints.
    pub connect_timeout: Duration,
    /// Bytes of shared memory for large messages to processes on this host (0: off).
    pub shm_pool: usize,
    /// Busy-wait rounds of a blocking get before it parks
    /// ([`RuntimeBuilder::spin_rounds`](stampede_core::RuntimeBuilder::spin_rounds)):
    /// `None` spins as a local runtime does on more than two cores and not at all on two or
    /// fewer, where the network threads that deliver items need the processor.
    pub spin_rounds: Option<u32>,
    /// How many further waiting items a get on another space's queue takes with it (0, the
    /// default: none). They are held by the connection as a *lease*: the next gets on it are
    /// answered here without a round trip, and what was not handed out returns to the queue
    /// when the connection detaches or this space dies. A lease trades the queue's strict
    /// oldest-first order across getters (an item put while others are leased can be got
    /// before them) for throughput.
    pub queue_prefetch: u32,
    /// Fault injection: drop every `n`-th item other spaces push here (0, the default: none),
    /// as a lossy path would. Gets stay correct and only cost more round trips; tests use it
    /// to show that.
    pub push_loss: u32,
    /// Where to serve this space's metrics over HTTP (`GET /metrics`, OpenMetrics text),
    /// as `host:port`; `None` (the default) serves none. [`Space::metrics`] renders the
    /// same without an endpoint.
    ///
    /// [`Space::metrics`]: crate::Space::metrics
    pub metrics_listen: Option<String>,
    /// Which users may create, read, write or close which containers this space owns
    /// ([`Access`]); `None` (the default) allows everything. With a
    /// [`credentials_file`](Config::credentials_file) too, this side also has Zenoh drop,
    /// on each user's links, requests sent under another user's name.
    pub access: Option<Access>,
    /// What one other address space may make this space hold as owner ([`Quotas`]).
    pub quotas: Quotas,
    /// Further Zenoh settings as `(path, JSON5 value)`, applied last.
    pub zenoh: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Peer,
            listen: Vec::new(),
            connect: Vec::new(),
            multicast_scouting: false,
            tls: None,
            credentials: None,
            credentials_file: None,
            lease: Duration::from_millis(1000),
            op_timeout: Duration::from_secs(5),
            wait_slice: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(5),
            shm_pool: 64 << 20,
            spin_rounds: None,
            queue_prefetch: 0,
            push_loss: 0,
            metrics_listen: None,
            access: None,
            quotas: Quotas::default(),
            zenoh: Vec::new(),
        }
    }
}

/// Where a peer listens when told nothing: any interface, a port the system picks.
pub const DEFAULT_PEER_LISTEN: &str = "tcp/0.0.0.0:0";

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Zenoh access-control settings for a router or listening peer that accepts the users of
/// `credentials` (a `user:password` file): on each user's links, a request to an owner
/// whose key names another user is dropped, in every application. Everything else is
/// allowed.
fn zenoh_rules(access: &Access, credentials: &Path) -> Result<Vec<(String, String)>, NetError> {
    let text = std::fs::read_to_string(credentials).map_err(|e| {
        NetError::Config(format!("credentials file {}: {e}", credentials.display()))
    })?;
    // Only the user names: the passwords stay where they are.
    let mut users: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(u, _)| u.trim().to_owned()))
        .filter(|u| !u.is_empty())
        .collect();
    users.extend(access.users().map(str::to_owned));
    users.sort();
    users.dedup();
    for u in &users {
        crate::access::valid_user(u).map_err(NetError::Config)?;
    }
    let mut rules = Vec::new();
    let mut subjects = Vec::new();
    let mut policies = Vec::new();
    for (i, user) in users.iter().enumerate() {
        let others: Vec<String> = users
            .iter()
            .chain(std::iter::once(&crate::access::ANONYMOUS.to_owned()))
            .filter(|o| *o != user)
            .flat_map(|o| {
                crate::access::TO_OWNER
                    .iter()
                    .map(move |f| json_str(&format!("stampede/*/{f}/*/{o}")))
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        rules.push(format!(
            "{{id:\"not-{i}\",messages:[\"put\",\"query\"],flows:[\"ingress\"],\
             permission:\"deny\",key_exprs:[{}]}}",
            others.join(",")
        ));
        subjects.push(format!(
            "{{id:\"user-{i}\",usernames:[{}]}}",
            json_str(user)
        ));
        policies.push(format!("{{rules:[\"not-{i}\"],subjects:[\"user-{i}\"]}}"));
    }
    Ok(vec![
        ("access_control/enabled".into(), "true".into()),
        (
            "access_control/default_permission".into(),
            "\"allow\"".into(),
        ),
        (
            "access_control/rules".into(),
            format!("[{}]", rules.join(",")),
        ),
        (
            "access_control/subjects".into(),
            format!("[{}]", subjects.join(",")),
        ),
        (
            "access_control/policies".into(),
            format!("[{}]", policies.join(",")),
        ),
    ])
}

fn json_list(v: &[String]) -> String {
    let items: Vec<_> = v.iter().map(|s| json_str(s)).collect();
    format!("[{}]", items.join(","))
}

impl Config {
    /// A peer of a cluster (the default).
    pub fn peer() -> Self {
        Self::default()
    }

    /// An end device connecting to `router`.
    pub fn client(router: impl Into<String>) -> Self {
        Config {
            mode: Mode::Client,
            connect: vec![router.into()],
            ..Self::default()
        }
    }

    /// A router listening on `endpoint`.
    pub fn router(endpoint: impl Into<String>) -> Self {
        Config {
            mode: Mode::Router,
            listen: vec![endpoint.into()],
            ..Self::default()
        }
    }

    /// Serves this space's metrics on `addr` (`host:port`; see
    /// [`metrics_listen`](Config::metrics_listen)).
    pub fn metrics_listen(mut self, addr: impl Into<String>) -> Self {
        self.metrics_listen = Some(addr.into());
        self
    }

    /// Adds an endpoint to listen on.
    pub fn listen(mut self, endpoint: impl Into<String>) -> Self {
        self.listen.push(endpoint.into());
        self
    }

    /// Adds an endpoint to connect to.
    pub fn connect(mut self, endpoint: impl Into<String>) -> Self {
        self.connect.push(endpoint.into());
        self
    }

    /// Presents these credentials.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// Enforces these access rules on the containers this space owns.
    pub fn access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    /// The user this space's requests carry: its credentials', or `anonymous`.
    pub fn user(&self) -> &str {
        self.credentials
            .as_ref()
            .map_or(crate::access::ANONYMOUS, |(u, _)| u.as_str())
    }

    /// Sets TLS.
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The Zenoh configuration this one stands for. Every endpoint is checked first with
    /// [`validate_endpoint`], so a malformed one is refused at once rather than waited on.
    pub fn to_zenoh(&self) -> Result<zenoh::Config, NetError> {
        for endpoint in self.listen.iter().chain(&self.connect) {
            validate_endpoint(endpoint)?;
        }
        if self.mode == Mode::Client && self.connect.is_empty() {
            return Err(NetError::Config(
                "client mode needs an endpoint to connect to".into(),
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(NetError::Config("lease must be at least 100 ms".into()));
        }
        if self.wait_slice.is_zero() || self.op_timeout.is_zero() {
            return Err(NetError::Config(
                "op_timeout and wait_slice must be positive".into(),
            ));
        }
        let mut c = zenoh::Config::default();
        let mut set = |k: &str, v: String| {
            c.insert_json5(k, &v)
                .map_err(|e| NetError::Config(format!("{k} = {v}: {}", zenoh_text(&e))))
        };
        set("mode", json_str(self.mode.as_str()))?;
        // Peers assume a full mesh: a router does not relay between them. So a peer that
        // names no endpoint listens on an ephemeral port, which the others learn through
        // gossip and connect to.
        let listen = if self.mode == Mode::Peer && self.listen.is_empty() {
            vec![DEFAULT_PEER_LISTEN.to_owned()]
        } else {
            self.listen.clone()
        };
        set("listen/endpoints", json_list(&listen))?;
        set("connect/endpoints", json_list(&self.connect))?;
        let ms = self.connect_timeout.as_millis().min(i64::MAX as u128) as i64;
        set("connect/timeout_ms", ms.to_string())?;
        set("connect/exit_on_failure", "true".into())?;
        set(
            "scouting/multicast/enabled",
            self.multicast_scouting.to_string(),
        )?;
        set(
            "transport/link/tx/lease",
            self.lease.as_millis().to_string(),
        )?;
        set("transport/link/tx/keep_alive", "4".into())?;
        set(
            "transport/link/rx/max_message_size",
            self.quotas.max_message_bytes().to_string(),
        )?;
        set(
            "transport/shared_memory/enabled",
            (self.shm_pool > 0).to_string(),
        )?;
        if self.shm_pool > 0 {
            set(
                "transport/shared_memory/transport_optimization/pool_size",
                self.shm_pool.to_string(),
            )?;
        }
        if let Some(t) = &self.tls {
            // A missing file is a configuration mistake, not a failure to connect.
            for (what, p) in [
                ("TLS root CA", &t.root_ca),
                ("TLS certificate", &t.certificate),
                ("TLS private key", &t.private_key),
            ] {
                if let Some(p) = p.as_ref().filter(|p| !p.is_file()) {
                    return Err(NetError::Config(format!(
                        "{what} {} is not a readable file",
                        p.display()
                    )));
                }
            }
            let path = |p: &PathBuf| json_str(&p.to_string_lossy());
            if let Some(p) = &t.root_ca {
                set("transport/link/tls/root_ca_certificate", path(p))?;
            }
            if let Some(p) = &t.certificate {
                set("transport/link/tls/listen_certificate", path(p))?;
            }
            if let Some(p) = &t.private_key {
                set("transport/link/tls/listen_private_key", path(p))?;
            }
            set(
                "transport/link/tls/verify_name_on_connect",
                t.verify_name.to_string(),
            )?;
        }
        crate::access::valid_user(self.user()).map_err(NetError::Config)?;
        if let Some((u, p)) = &self.credentials {
            set("transport/auth/usrpwd/user", json_str(u))?;
            set("transport/auth/usrpwd/password", json_str(p))?;
        }
        if let Some(f) = &self.credentials_file {
            set(
                "transport/auth/usrpwd/dictionary_file",
                json_str(&f.to_string_lossy()),
            )?;
            if let Some(a) = &self.access {
                for (k, v) in zenoh_rules(a, f)? {
                    set(&k, v)?;
                }
            }
        }
        for (k, v) in &self.zenoh {
            set(k, v.clone())?;
        }
        Ok(c)
    }
}

/// The environment variable Zenoh sizes its thread pools from, read once per process.
pub const ZENOH_RUNTIME_VAR: &str = "ZENOH_RUNTIME";

/// The `ZENOH_RUNTIME` value for this machine, for programs to set before their first
/// address space joins (the library never sets it: it belongs to the process). On two
/// cores or fewer, one worker each for receiving, sending and the application, with
/// accepting and the network runtime handed over to the application's: Zenoh's default
/// six workers, beside the space's own threads, would outnumber the cores several times.
/// `None` (Zenoh's defaults) on larger machines.
pub fn zenoh_runtime_for_this_machine() -> Option<&'static str> {
    let small = std::thread::available_parallelism().map_or(true, |n| n.get() <= 2);
    small.then_some(
        "(app: (worker_threads: 1), rx: (worker_threads: 1), tx: (worker_threads: 1), \
         acc: (handover: app), net: (handover: app))",
    )
}

/// Sets `ZENOH_RUNTIME` to [`zenoh_runtime_for_this_machine`] unless the environment
/// already says: for a program's `main`, before any thread starts and before the first
/// address space joins (Zenoh reads it once). Child processes inherit it, so a benchmark's
/// baselines run with the same value.
pub fn size_zenoh_runtime_in_main() {
    if std::env::var_os(ZENOH_RUNTIME_VAR).is_some() {
        return;
    }
    if let Some(v) = zenoh_runtime_for_this_machine() {
        std::env::set_var(ZENOH_RUNTIME_VAR, v);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::Space;

    const MALFORMED: [&str; 3] = ["tcp/127.0.0.1", "bogus/127.0.0.1:1", "tcp/127.0.0.1:99999"];

    #[test]
    fn every_endpoint_is_checked() {
        for bad in MALFORMED {
            for cfg in [
                Config::client(bad),
                Config::router(bad),
                Config::peer().listen(bad),
            ] {
                match cfg.to_zenoh() {
                    Err(NetError::Config(m)) => assert!(m.contains(bad), "{m}"),
                    Err(e) => panic!("{bad}: not a configuration error: {e}"),
                    Ok(_) => panic!("{bad}: accepted"),
                }
            }
        }
        assert!(Config::client("tcp/127.0.0.1:7447").to_zenoh().is_ok());
        assert!(Config::peer().to_zenoh().is_ok());
    }

    #[test]
    fn zenoh_setting_errors_show_no_source_location() {
        let mut cfg = Config::peer();
        cfg.zenoh.push(("no/such/setting".into(), "1".into()));
        match cfg.to_zenoh() {
            Err(NetError::Config(m)) => assert!(!m.contains(".rs:"), "{m}"),
            Err(e) => panic!("not a configuration error: {e}"),
            Ok(_) => panic!("an unknown setting was accepted"),
        }
    }

    #[test]
    fn joining_with_a_malformed_endpoint_fails_at_once() {
        for bad in MALFORMED {
            for cfg in [Config::client(bad), Config::peer().connect(bad)] {
                let start = Instant::now();
                let r = Space::join("endpoints", cfg);
                let took = start.elapsed();
                match r {
                    Err(e @ NetError::Config(_)) => {
                        let m = e.to_string();
                        assert!(m.contains(bad) && !m.contains(".rs:"), "{m}");
                    }
                    Err(e) => panic!("{bad}: not a configuration error: {e}"),
                    Ok(_) => panic!("{bad}: joined"),
                }
                assert!(
                    took < Duration::from_secs(1),
                    "{bad}: refused after {took:?}"
                );
            }
        }
    }
}
