//! The `stampede` binary as operators run it: help texts, a router and an owner started by
//! the CLI and inspected by it, clean leaving on signals, and failures with their exit codes.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;
use stampede_net::{Config, Space};

/// Generous bound on anything a child does, so a hang fails the test instead of blocking it.
const LIMIT: Duration = Duration::from_secs(30);

fn stampede() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stampede"));
    for var in [
        "STAMPEDE_APP",
        "STAMPEDE_CONNECT",
        "STAMPEDE_TIMEOUT",
        "STAMPEDE_USER",
        "STAMPEDE_PASSWORD",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One application per test, so tests running at once never meet.
fn app(test: &str) -> String {
    format!("cli{}-{test}", std::process::id())
}

fn lines_of(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// A long-running `stampede` process, killed when dropped whatever happened.
struct Running {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = stampede()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        Running {
            child,
            out,
            err,
            seen: Vec::new(),
        }
    }

    /// Reads stdout up to the `ready` line; returns the value of the `id` line.
    fn ready(&mut self) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(l) if l == "ready" => break,
                Ok(l) => self.seen.push(l),
                Err(e) => panic!(
                    "no ready line ({e:?}); stdout {:?}, stderr {:?}",
                    self.seen,
                    self.err.try_iter().collect::<Vec<_>>()
                ),
            }
        }
        let id = self.seen.iter().find_map(|l| l.strip_prefix("id "));
        id.expect("an id line").trim().to_owned()
    }

    /// Sends `signal` (by name, as `kill` takes it) and waits for the exit; returns the
    /// status and stderr.
    fn stop(&mut self, signal: &str) -> (ExitStatus, Vec<String>) {
        let ok = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} failed");
        let status = wait_bounded(&mut self.child);
        (status, self.err.iter().collect())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_bounded(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stampede still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The outcome of a one-shot command.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "failed: {}", self.stderr);
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

fn run(args: &[&str]) -> Outcome {
    let mut child = stampede()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child);
    let text = |rx: Receiver<String>| rx.iter().map(|l| l + "\n").collect::<String>();
    Outcome {
        code: status.code(),
        stdout: text(out),
        stderr: text(err),
    }
}

/// Polls `f` until it holds, within [`LIMIT`].
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + LIMIT;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn every_command_has_help() {
    let top = run(&["--help"]);
    assert_eq!(top.code, Some(0));
    for sub in [
        "router",
        "space",
        "names",
        "spaces",
        "watermark",
        "threads",
        "metrics",
        "node",
    ] {
        assert!(
            top.stdout.contains(sub),
            "{sub} missing from {}",
            top.stdout
        );
        let h = run(&[sub, "--help"]);
        assert_eq!(h.code, Some(0), "{sub} --help: {}", h.stderr);
        assert!(
            h.stdout.contains(&format!("Usage: stampede {sub}")),
            "{}",
            h.stdout
        );
        for common in [
            "--app",
            "--connect",
            "--listen",
            "--timeout",
            "--tls-root-ca",
            "--user",
        ] {
            assert!(h.stdout.contains(common), "{sub} lacks {common}");
        }
    }
    let v = run(&["--version"]);
    assert_eq!(v.code, Some(0));
    assert!(v.stdout.starts_with("stampede "));
}

#[test]
fn metrics_gathers_every_space_with_its_label() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("metrics");
    let owner = Space::join(&app, Config::router(ep.clone())).unwrap();
    let ch = owner
        .channel(stampede_core::ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let t = owner.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    for ts in 0..3 {
        out.put(ts, "x").unwrap();
    }
    let o = run(&["metrics", "--app", &app, "--connect", &ep]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let id = owner.id();
    assert!(
        o.stdout.contains(&format!(
            "stampede_container_puts_total{{container=\"frames\",kind=\"channel\",space=\"{id}\"}} 3"
        )),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains(&format!("stampede_space_up{{space=\"{id}\"}} 1.0")),
        "{}",
        o.stdout
    );
    // Only the application's spaces: not the command's own short-lived one.
    assert_eq!(
        o.stdout.matches("stampede_space_up{").count(),
        1,
        "{}",
        o.stdout
    );
    let j = run(&["metrics", "--app", &app, "--connect", &ep, "--json"]).json();
    assert!(j.as_array().is_some_and(|a| !a.is_empty()), "{j}");
    drop((out, t, ch));
    owner.leave();
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["names", "--app", "a", "--bogus"][..],
        &["frobnicate"],
        &["names"],
        &["names", "--app", "a", "--connect", "127.0.0.1:7447"],
        &["names", "--app", "a", "--timeout", "soon"],
        &["names", "--app", "a", "--mode", "router"],
        &["space", "--app", "a", "--channel", "frames:0"],
        &["spaces", "--app", "a", "--tls-root-ca", "/no/such/ca.pem"],
        &["spaces", "--app", "a", "--user", "alice"],
        &["router", "--app", "a", "--mode", "peer"],
    ] {
        let o = run(args);
        assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stderr.starts_with("error:"), "{args:?}: {}", o.stderr);
    }
    // An application name that cannot be used is a usage error too, found on joining.
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let o = run(&["names", "--app", "a/b", "-e", &ep, "--timeout", "1s"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("invalid name"), "{}", o.stderr);
}

#[test]
fn malformed_endpoints_are_refused_at_once() {
    for (endpoint, says) in [
        ("tcp/127.0.0.1", "has no port"),
        ("bogus/127.0.0.1:1", "unknown protocol \"bogus\""),
        ("tcp/127.0.0.1:99999", "port 99999 is out of range 0-65535"),
        ("127.0.0.1:7447", "has no protocol"),
    ] {
        // Unchecked, each would wait out the timeout and fail as unreachable.
        let flags = ["--app", "a", "--timeout", "30s"];
        for args in [
            [&["names", "--connect", endpoint][..], &flags].concat(),
            [&["router", "--listen", endpoint][..], &flags].concat(),
        ] {
            let start = Instant::now();
            let o = run(&args);
            let took = start.elapsed();
            assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
            let first = o.stderr.lines().next().unwrap_or_default();
            assert!(first.starts_with("error:"), "{args:?}: {}", o.stderr);
            assert!(
                first.contains(endpoint) && first.contains(says),
                "{}",
                o.stderr
            );
            for path in [".rs:", "/home", ".cargo"] {
                assert!(!o.stderr.contains(path), "{args:?}: {}", o.stderr);
            }
            assert!(o.stdout.is_empty(), "{}", o.stdout);
            assert!(
                took < Duration::from_secs(5),
                "{args:?}: refused after {took:?}"
            );
        }
        // From the environment too.
        let o = {
            let mut cmd = stampede();
            cmd.args(["spaces", "--app", "a", "--timeout", "30s"])
                .env("STAMPEDE_CONNECT", format!("tcp/127.0.0.1:7447,{endpoint}"));
            cmd.output().unwrap()
        };
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(says) && !stderr.contains(".rs:"),
            "{stderr}"
        );
    }
}

#[test]
fn an_unreachable_router_is_a_clear_runtime_error() {
    // Nothing listens on a port just freed.
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("unreachable");
    for args in [
        &[
            "names",
            "--app",
            &app,
            "--connect",
            &ep,
            "--timeout",
            "500ms",
        ][..],
        &[
            "watermark",
            "--app",
            &app,
            "--connect",
            &ep,
            "--timeout",
            "500ms",
        ],
        &[
            "space",
            "--app",
            &app,
            "--connect",
            &ep,
            "--timeout",
            "500ms",
            "--channel",
            "c",
        ],
    ] {
        let o = run(args);
        assert_eq!(o.code, Some(1), "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.starts_with("error: could not join"),
            "{}",
            o.stderr
        );
        assert!(o.stderr.contains(&ep), "{}", o.stderr);
        assert!(!o.stderr.contains(".rs:"), "{}", o.stderr);
        assert!(o.stdout.is_empty(), "{}", o.stdout);
    }
}

#[test]
fn router_and_owner_started_and_inspected_by_the_cli() {
    let app = app("cluster");
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut router = Running::start(&["router", "--app", &app, "--listen", &ep]);
    let router_id = router.ready();
    assert!(
        router.seen.contains(&format!("listen   {ep}")),
        "{:?}",
        router.seen
    );
    let mut owner = Running::start(&["space", "--app", &app, "-e", &ep, "--channel", "frames:4"]);
    let owner_id = owner.ready();
    assert_ne!(router_id, owner_id);
    let conn = ["--app", &app, "--connect", &ep];
    let with = |cmd: &str, extra: &[&str]| {
        let mut v = vec![cmd];
        v.extend(conn);
        v.extend(extra);
        run(&v)
    };

    let names = with("names", &["--json"]).json();
    let frames: Vec<_> = names
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["name"] == "frames")
        .collect();
    assert_eq!(frames.len(), 1, "{names}");
    assert_eq!(frames[0]["kind"], "channel");
    assert_eq!(frames[0]["owner"], owner_id.as_str());
    assert_eq!(frames[0]["capacity"], 4);
    assert_eq!(frames[0]["zone"], 0);
    let table = with("names", &[]);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    assert!(table.stdout.starts_with("NAME"), "{}", table.stdout);
    assert!(table.stdout.contains("frames"), "{}", table.stdout);

    // Both spaces, and not the one the command itself joined as.
    let both: BTreeSet<String> = [router_id.clone(), owner_id.clone()].into();
    let spaces = with("spaces", &[]);
    assert_eq!(spaces.code, Some(0), "{}", spaces.stderr);
    for id in &both {
        assert!(spaces.stdout.contains(id.as_str()), "{}", spaces.stdout);
    }
    let ids: BTreeSet<String> = with("spaces", &["--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, both);

    let wm = with("watermark", &["--json"]).json();
    assert_eq!(wm["zone"], 0);
    assert_eq!(
        wm["watermark"],
        Value::Null,
        "nothing holds zone 0 yet: {wm}"
    );
    let entries = wm["spaces"].as_array().unwrap();
    let ids: BTreeSet<String> = entries
        .iter()
        .map(|s| s["space"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, both, "{wm}");
    for e in entries {
        assert_eq!(e["reachable"], true, "{wm}");
        assert!(
            e["explanation"].as_str().unwrap().contains("zone 0"),
            "{wm}"
        );
    }

    // An application's task at virtual time 41 holds the watermark, and is named for it.
    let app_space = Space::join(&app, Config::peer().connect(ep.clone())).unwrap();
    let task = app_space.task(41).unwrap();
    let wm = with("watermark", &["--json"]).json();
    assert_eq!(wm["watermark"], 41, "{wm}");
    assert_eq!(wm["held_by"], serde_json::json!([app_space.id()]), "{wm}");
    assert_eq!(wm["spaces"].as_array().unwrap().len(), 3, "{wm}");
    let text = with("watermark", &["--zone", "0"]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    let first = text.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!("zone 0: watermark 41, held by {}", app_space.id())
    );
    drop(task);
    app_space.leave();

    // SIGTERM: the owner leaves cleanly, and its name goes with it.
    let (status, stderr) = owner.stop("TERM");
    assert!(status.success(), "{status:?}: {stderr:?}");
    assert!(stderr.iter().any(|l| l.starts_with("left")), "{stderr:?}");
    assert!(eventually(
        || with("names", &["--json"]).json() == Value::Array(vec![])
    ));

    let (status, stderr) = router.stop("INT");
    assert!(status.success(), "{status:?}: {stderr:?}");
}

#[test]
fn threads_lists_the_tasks_each_cluster_member_runs() {
    use stampede_cluster::{Cluster, ClusterOptions, Placement, Registry};
    let app = app("threads");
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let space = Space::join(&app, Config::router(ep.clone())).unwrap();
    let registry = Registry::new().task("sleeper", |ctx, _| {
        while !ctx.is_cancelled() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(bytes::Bytes::new())
    });
    let c = Cluster::start(&space, registry, ClusterOptions::default()).unwrap();
    let h = c
        .spawn("sleeper", bytes::Bytes::new(), Placement::Here)
        .unwrap();
    let conn = ["--app", app.as_str(), "--connect", ep.as_str()];
    let mut args = vec!["threads", "--json"];
    args.extend(conn);
    let v = run(&args).json();
    let members = v.as_array().unwrap();
    assert_eq!(members.len(), 1, "{v}");
    assert_eq!(members[0]["space"], space.id());
    assert_eq!(members[0]["error"], Value::Null);
    let tasks = members[0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{v}");
    assert_eq!(tasks[0]["task"], "sleeper");
    assert_eq!(tasks[0]["id"], h.id().to_string());
    assert_eq!(tasks[0]["state"], "running");
    let mut args = vec!["threads"];
    args.extend(conn);
    let table = run(&args);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    assert!(table.stdout.starts_with("SPACE"), "{}", table.stdout);
    assert!(table.stdout.contains("sleeper"), "{}", table.stdout);
    h.cancel().unwrap();
    h.join().unwrap();
    c.stop();
    space.leave();
}

#[test]
fn node_runs_an_agent_that_starts_what_a_cluster_attaches() {
    use stampede_cluster::{Cluster, ClusterError, ClusterOptions, Registry};
    let app = app("node");
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let space = Space::join(&app, Config::router(ep.clone())).unwrap();
    let mut agent = Running::start(&["node", "--app", &app, "-e", &ep, "--host", "h1"]);
    agent.ready();
    assert!(
        agent.seen.iter().any(|l| l == "node     h1"),
        "{:?}",
        agent.seen
    );
    let c = Cluster::start(&space, Registry::new(), ClusterOptions::default()).unwrap();
    assert!(eventually(|| space.record("cluster/node/h1").is_some()));
    // The agent runs what it is asked to; a program that never joins is an attach that
    // times out.
    let marker = std::env::temp_dir().join(format!("stampede-node-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        format!("echo \"$STAMPEDE_CLUSTER_APP\" > {}", marker.display()),
    ];
    let err = c.attach(&cmd, Duration::from_millis(500)).unwrap_err();
    assert!(matches!(err, ClusterError::Timeout { .. }), "{err}");
    assert!(eventually(
        || std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == app)
    ));
    let _ = std::fs::remove_file(&marker);
    c.stop();
    space.leave();
}

/// `stampede dashboard` serves the page and every other space's samples (not its own), and
/// leaves on SIGINT.
#[test]
fn dashboard_serves_the_application() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("dashboard");
    let owner = Space::join(&app, Config::router(ep.clone())).unwrap();
    let _frames = owner
        .channel(stampede_core::ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let mut dash = Running::start(&[
        "dashboard",
        "--app",
        &app,
        "-e",
        &ep,
        "--serve",
        "127.0.0.1:0",
    ]);
    let me = dash.ready();
    let url = dash
        .seen
        .iter()
        .find_map(|l| l.strip_prefix("url"))
        .expect("a url line")
        .trim()
        .to_owned();
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix('/'))
        .expect("http://host:port/");
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    assert!(get("/").contains("dashboard.js"));
    let api = get("/api/samples");
    assert!(api.contains(r#"["container","frames"]"#), "{api}");
    assert!(api.contains(owner.id()), "the owner's samples: {api}");
    assert!(
        !api.contains(&me),
        "the dashboard's own space is left out: {api}"
    );
    let (status, _) = dash.stop("INT");
    assert!(status.success(), "{status:?}");
    owner.leave();
}

/// `stampede top` in a terminal tmux emulates: its rows appear, a filter narrows them,
/// `q` ends it.
#[test]
fn top_shows_the_application_live() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("top");
    let owner = Space::join(&app, Config::router(ep.clone())).unwrap();
    let frames = owner
        .channel(stampede_core::ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let _jobs = owner
        .queue(stampede_core::ContainerOptions::unbounded().name("jobs"))
        .unwrap();
    let slow = owner
        .task_builder()
        .name("slow")
        .virtual_time(5)
        .create()
        .unwrap();
    let cam = owner
        .task_builder()
        .name("camera")
        .virtual_time(10)
        .create()
        .unwrap();
    let out = cam.attach_output(&frames).unwrap();
    for ts in 10..20 {
        out.put(ts, "x").unwrap();
    }
    let session = format!("stampede-top-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux (make setup installs it)")
    };
    let bin = env!("CARGO_BIN_EXE_stampede");
    let cmd = format!("{bin} top --app {app} -e {ep} --interval 300ms");
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]);
    assert!(started.status.success(), "{started:?}");
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-t", &session, "-p"]).stdout).into_owned()
    };
    let until = |what: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + LIMIT;
        loop {
            let s = screen();
            if what(&s) || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let s = until(&|s| s.contains("frames") && s.contains("virtual_time slow"));
    assert!(s.contains("frames") && s.contains("jobs"), "{s}");
    assert!(
        s.contains("virtual_time slow"),
        "the watermark's holder: {s}"
    );
    assert!(s.contains("camera"), "the tasks: {s}");
    assert!(s.contains("1 address spaces"), "{s}");
    tmux(&["send-keys", "-t", &session, "/", "j", "o", "b", "Enter"]);
    let s = until(&|s| s.contains("filter: job") && !s.contains("frames"));
    assert!(s.contains("jobs") && !s.contains("frames"), "filtered: {s}");
    tmux(&["send-keys", "-t", &session, "q"]);
    let deadline = Instant::now() + LIMIT;
    while tmux(&["has-session", "-t", &session]).status.success() {
        assert!(
            Instant::now() < deadline,
            "top did not quit on q: {}",
            screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop((out, cam, slow));
    owner.leave();
}
