//! The command line: subcommands, the options they share, and how those become a
//! [`Config`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use stampede_net::{validate_endpoint, Access, Config, Mode, NetError, Tls};

/// Where a router listens, and where the others connect, unless told otherwise: Zenoh's
/// usual router port, on loopback so nothing is exposed by accident.
pub(crate) const DEFAULT_ENDPOINT: &str = "tcp/127.0.0.1:7447";

/// Run and inspect distributed Stampede applications.
///
/// Every process of an application is an address space joined over Eclipse Zenoh. Start a
/// router, host containers with `stampede space`, and look at names, spaces and the
/// garbage-collection watermark from anywhere that can reach the router.
#[derive(Debug, Parser)]
#[command(name = "stampede", version, propagate_version = true)]
#[command(
    after_help = "Without --connect or --listen, commands connect to tcp/127.0.0.1:7447.\n\
                        Set RUST_LOG (e.g. RUST_LOG=debug) for diagnostics on stderr."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a Zenoh router that is also an address space of the application
    ///
    /// Prints its id and endpoints, then routes until SIGINT or SIGTERM, when it leaves the
    /// application cleanly. Listens on tcp/127.0.0.1:7447 unless --listen is given.
    Router(RouterArgs),
    /// Join as an address space hosting the named containers given, until interrupted
    ///
    /// The smallest owner others can use: the containers are registered in the name server
    /// and served to tasks in other address spaces until SIGINT or SIGTERM.
    Space(SpaceArgs),
    /// List the names registered in the application, or follow them with --watch
    Names(NamesArgs),
    /// List the address spaces in the application and the names each owns
    Spaces(SpacesArgs),
    /// Show the cluster-wide watermark of a zone and what holds it in each space
    Watermark(WatermarkArgs),
    /// List the cluster tasks each address space runs, with their state
    Threads(SpacesArgs),
    /// A live view of the application's address spaces, zones and what holds each
    /// watermark, containers with their rates, and tasks; q quits, s sorts, / filters
    Top(TopArgs),
    /// Serve a live web page of the application (its graph with rates, watermarks over
    /// time and their holders, containers, tasks, executors) until interrupted
    Dashboard(DashboardArgs),
    /// Print the metrics of every address space of the application, each sample labelled
    /// with its space (OpenMetrics text; --json for the samples)
    Metrics(SpacesArgs),
    /// Run a host's node agent: start address spaces for the application's clusters when
    /// they attach one, until interrupted
    Node(NodeArgs),
}

/// How a command that only looks at the application joins it: as a client by default.
#[derive(Debug, Args)]
pub(crate) struct Observer {
    /// Zenoh mode of this address space (it only watches)
    #[arg(long, value_enum, default_value_t = JoinMode::Client)]
    pub(crate) mode: JoinMode,
    #[command(flatten)]
    pub(crate) conn: Connection,
    #[command(flatten)]
    pub(crate) security: Security,
}

impl Observer {
    /// Joins, without a shared-memory pool: only small messages pass.
    pub(crate) fn join(&self) -> Result<stampede_net::Space, crate::Failure> {
        let mut cfg = self.conn.config(self.mode.into(), &self.security);
        cfg.shm_pool = 0;
        Ok(stampede_net::Space::join(&self.conn.app, cfg)?)
    }
}

#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// How often to refresh (e.g. 1s, 500ms)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub(crate) interval: Duration,
    #[command(flatten)]
    pub(crate) observer: Observer,
}

#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Where to serve the page (loopback unless you choose otherwise; port 0 picks one)
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9465")]
    pub(crate) serve: String,
    #[command(flatten)]
    pub(crate) observer: Observer,
}

#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// This host's name among the agents (the machine's host name by default)
    #[arg(long)]
    pub(crate) host: Option<String>,
    #[command(flatten)]
    pub(crate) conn: Connection,
    #[command(flatten)]
    pub(crate) security: Security,
}

#[derive(Debug, Args)]
pub(crate) struct RouterArgs {
    #[command(flatten)]
    pub(crate) conn: Connection,
    #[command(flatten)]
    pub(crate) security: Security,
}

#[derive(Debug, Args)]
pub(crate) struct SpaceArgs {
    /// Zenoh mode of this address space
    #[arg(long, value_enum, default_value_t = JoinMode::Peer)]
    pub(crate) mode: JoinMode,
    /// Host a channel; without a capacity it is unbounded (repeatable)
    #[arg(long, value_name = "NAME[:CAPACITY]", value_parser = container_spec)]
    pub(crate) channel: Vec<ContainerSpec>,
    /// Host a queue; without a capacity it is unbounded (repeatable)
    #[arg(long, value_name = "NAME[:CAPACITY]", value_parser = container_spec)]
    pub(crate) queue: Vec<ContainerSpec>,
    /// Host a register (repeatable)
    #[arg(long, value_name = "NAME")]
    pub(crate) register: Vec<String>,
    /// Register a service: a name with metadata and no container (repeatable)
    #[arg(long, value_name = "NAME[=META]", value_parser = service_spec)]
    pub(crate) service: Vec<(String, String)>,
    /// Time zone of the hosted containers
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) zone: u32,
    #[command(flatten)]
    pub(crate) conn: Connection,
    #[command(flatten)]
    pub(crate) security: Security,
}

#[derive(Debug, Args)]
pub(crate) struct NamesArgs {
    /// Follow names being added and removed until interrupted (current names come first)
    #[arg(long)]
    pub(crate) watch: bool,
    /// Print JSON: an array, or one object per line with --watch
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) observer: Observer,
}

#[derive(Debug, Args)]
pub(crate) struct SpacesArgs {
    /// Print JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) observer: Observer,
}

#[derive(Debug, Args)]
pub(crate) struct WatermarkArgs {
    /// The time zone to explain
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) zone: u32,
    /// Print JSON (INFINITY, nothing holding, is null)
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) observer: Observer,
}

/// The modes a non-router address space can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum JoinMode {
    /// A cluster member, connected directly to the other peers
    Peer,
    /// An end device, routed through the one router or peer it connects to
    Client,
}

impl From<JoinMode> for Mode {
    fn from(m: JoinMode) -> Mode {
        match m {
            JoinMode::Peer => Mode::Peer,
            JoinMode::Client => Mode::Client,
        }
    }
}

/// Which application, and how to reach it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub(crate) struct Connection {
    /// The application to join
    #[arg(long, env = "STAMPEDE_APP")]
    pub(crate) app: String,
    /// Endpoint to connect to, such as tcp/10.0.0.5:7447 (repeatable; comma-separated in the
    /// environment)
    #[arg(
        short = 'e',
        long,
        value_name = "ENDPOINT",
        env = "STAMPEDE_CONNECT",
        value_delimiter = ',',
        value_parser = endpoint
    )]
    pub(crate) connect: Vec<String>,
    /// Endpoint to listen on, such as tcp/0.0.0.0:7447 or tls/0.0.0.0:7443 (repeatable)
    #[arg(short = 'l', long, value_name = "ENDPOINT", value_parser = endpoint)]
    pub(crate) listen: Vec<String>,
    /// How long to wait to reach the endpoints, and for each answer (e.g. 500ms, 5s)
    #[arg(
        long,
        value_name = "DURATION",
        env = "STAMPEDE_TIMEOUT",
        default_value = "5s",
        value_parser = duration
    )]
    pub(crate) timeout: Duration,
    /// Further Zenoh setting, applied last (repeatable), e.g. scouting/multicast/enabled:true
    #[arg(long, value_name = "KEY:JSON5", value_parser = zenoh_setting)]
    pub(crate) cfg: Vec<(String, String)>,
    /// Serve this address space's metrics over HTTP on HOST:PORT (GET /metrics, the
    /// Prometheus/OpenMetrics text format), e.g. 127.0.0.1:9464
    #[arg(long, value_name = "HOST:PORT", env = "STAMPEDE_METRICS")]
    pub(crate) metrics: Option<String>,
}

/// TLS and user-password authentication.
#[derive(Debug, Args)]
#[command(next_help_heading = "Security")]
pub(crate) struct Security {
    /// Certificate authority that signed the other side's certificate (for tls/ endpoints)
    #[arg(long, value_name = "FILE", value_parser = existing_file)]
    pub(crate) tls_root_ca: Option<PathBuf>,
    /// This side's certificate, for listening on tls/ endpoints
    #[arg(long, value_name = "FILE", value_parser = existing_file, requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// This side's private key, for listening on tls/ endpoints
    #[arg(long, value_name = "FILE", value_parser = existing_file, requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Do not check that the certificate names the host connected to
    #[arg(long)]
    pub(crate) tls_no_verify_name: bool,
    /// User name to present
    #[arg(long, env = "STAMPEDE_USER", requires = "password")]
    pub(crate) user: Option<String>,
    /// Password to present (prefer the environment: command lines are visible to others)
    #[arg(
        long,
        env = "STAMPEDE_PASSWORD",
        hide_env_values = true,
        requires = "user"
    )]
    pub(crate) password: Option<String>,
    /// File of user:password lines this side accepts (routers and listening peers)
    #[arg(long, value_name = "FILE", value_parser = existing_file)]
    pub(crate) credentials_file: Option<PathBuf>,
    /// File of access rules (`user permissions pattern` lines) for the containers this
    /// space owns
    #[arg(long, value_name = "FILE", value_parser = access_rules)]
    pub(crate) access_file: Option<Access>,
}

/// A container to host: its name and capacity (`None`: unbounded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContainerSpec {
    pub(crate) name: String,
    pub(crate) capacity: Option<usize>,
}

fn container_spec(s: &str) -> Result<ContainerSpec, String> {
    let (name, capacity) = match s.rsplit_once(':') {
        Some((name, cap)) => {
            let cap: usize = cap
                .parse()
                .map_err(|_| format!("capacity {cap:?} is not a number"))?;
            if cap == 0 {
                return Err("capacity must be at least 1 (leave it out for unbounded)".into());
            }
            (name, Some(cap))
        }
        None => (s, None),
    };
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    Ok(ContainerSpec {
        name: name.to_owned(),
        capacity,
    })
}

fn service_spec(s: &str) -> Result<(String, String), String> {
    let (name, meta) = s.split_once('=').unwrap_or((s, ""));
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    Ok((name.to_owned(), meta.to_owned()))
}

/// Checks the form only (protocol, address, port); whether anything answers there is found
/// out by joining.
fn endpoint(s: &str) -> Result<String, String> {
    match validate_endpoint(s) {
        Ok(()) => Ok(s.to_owned()),
        Err(NetError::Config(why)) => Err(why),
        Err(e) => Err(e.to_string()),
    }
}

/// A number of seconds, or a duration with units such as `250ms` or `1m 30s`.
fn duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Duration::from_secs_f64(secs),
        Ok(_) => return Err("must be a positive duration".into()),
        Err(_) => humantime::parse_duration(s).map_err(|e| e.to_string())?,
    };
    if d.is_zero() {
        return Err("must be a positive duration".into());
    }
    Ok(d)
}

fn zenoh_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err("expected KEY:JSON5, e.g. scouting/multicast/enabled:true".into()),
    }
}

/// Missing files are reported at once rather than as a failure to join.
fn existing_file(s: &str) -> Result<PathBuf, String> {
    let p = Path::new(s);
    if p.is_file() {
        Ok(p.to_owned())
    } else {
        Err("no such file".into())
    }
}

/// A rules file is read and checked at once, a malformed line reported by number.
fn access_rules(s: &str) -> Result<Access, String> {
    Access::from_file(existing_file(s)?).map_err(|e| e.to_string())
}

impl Connection {
    /// The configuration of an address space in `mode`; connects to the default endpoint
    /// when given nowhere to connect or listen.
    pub(crate) fn config(&self, mode: Mode, security: &Security) -> Config {
        let mut cfg = Config {
            mode,
            listen: self.listen.clone(),
            connect: self.connect.clone(),
            connect_timeout: self.timeout,
            op_timeout: self.timeout,
            zenoh: self.cfg.clone(),
            metrics_listen: self.metrics.clone(),
            ..Config::default()
        };
        if mode == Mode::Router {
            if cfg.listen.is_empty() {
                cfg.listen.push(DEFAULT_ENDPOINT.to_owned());
            }
        } else if cfg.listen.is_empty() && cfg.connect.is_empty() {
            cfg.connect.push(DEFAULT_ENDPOINT.to_owned());
        }
        security.apply(&mut cfg);
        cfg
    }
}

impl Security {
    fn apply(&self, cfg: &mut Config) {
        if self.tls_root_ca.is_some() || self.tls_cert.is_some() || self.tls_no_verify_name {
            cfg.tls = Some(Tls {
                root_ca: self.tls_root_ca.clone(),
                certificate: self.tls_cert.clone(),
                private_key: self.tls_key.clone(),
                verify_name: !self.tls_no_verify_name,
            });
        }
        if let (Some(u), Some(p)) = (&self.user, &self.password) {
            cfg.credentials = Some((u.clone(), p.clone()));
        }
        cfg.credentials_file = self.credentials_file.clone();
        cfg.access.clone_from(&self.access_file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn container_specs() {
        let c = container_spec("video/frames:30").unwrap();
        assert_eq!((c.name.as_str(), c.capacity), ("video/frames", Some(30)));
        assert_eq!(container_spec("jobs").unwrap().capacity, None);
        assert!(container_spec("frames:0").is_err());
        assert!(container_spec("frames:many").is_err());
        assert!(container_spec(":4").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert!(duration("0").is_err());
        assert!(duration("-1").is_err());
        assert!(duration("soon").is_err());
    }

    #[test]
    fn endpoints() {
        assert!(endpoint("tcp/127.0.0.1:7447").is_ok());
        assert!(endpoint("unixsock-stream//tmp/stampede.sock").is_ok());
        for bad in [
            "127.0.0.1:7447",
            "tcp/127.0.0.1",
            "bogus/127.0.0.1:1",
            "tcp/127.0.0.1:99999",
        ] {
            let why = endpoint(bad).unwrap_err();
            assert!(why.contains(bad) && !why.contains(".rs:"), "{why}");
        }
    }

    #[test]
    fn defaults_connect_to_the_local_router() {
        let cli = Cli::parse_from(["stampede", "names", "--app", "kiosk", "--timeout", "1s"]);
        let Command::Names(a) = cli.command else {
            panic!("not names")
        };
        let w = &a.observer;
        let cfg = w.conn.config(w.mode.into(), &w.security);
        assert_eq!(cfg.mode, Mode::Client);
        assert_eq!(cfg.connect, [DEFAULT_ENDPOINT]);
        assert_eq!(cfg.op_timeout, Duration::from_secs(1));
        assert!(cfg.tls.is_none() && cfg.credentials.is_none());

        let cli = Cli::parse_from(["stampede", "router", "--app", "kiosk"]);
        let Command::Router(a) = cli.command else {
            panic!("not router")
        };
        let cfg = a.conn.config(Mode::Router, &a.security);
        assert_eq!(cfg.listen, [DEFAULT_ENDPOINT]);
        assert!(cfg.connect.is_empty());
    }
}
