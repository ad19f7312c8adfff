//! TLS and user/password authentication, and access rules: what is configured is
//! enforced, and a refused address space gets a clear error instead of a hang.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{app, free_port};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use stampede_core::{ContainerOptions, Permission, PutErrorKind, Selector, StmError, INFINITY};
use stampede_net::{Access, Config, NetError, Quotas, Space, Tls};
use zenoh::Wait as _;

const T: Duration = Duration::from_secs(10);

/// A directory of files that is removed at the end of the test.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("stampede-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA and a certificate it signed for `localhost`; returns (ca, cert, key) paths.
fn certificates(dir: &Dir, prefix: &str) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (
        dir.write(&format!("{prefix}ca.pem"), &ca.pem()),
        dir.write(&format!("{prefix}cert.pem"), &cert.pem()),
        dir.write(&format!("{prefix}key.pem"), &key.serialize_pem()),
    )
}

fn quick(mut c: Config) -> Config {
    c.connect_timeout = Duration::from_secs(1);
    c
}

/// A channel owned by `owner` works from `user`: the session is fully usable.
fn exchange(owner: &Space, user: &Space) {
    let ch = owner
        .channel(ContainerOptions::unbounded().name("secret"))
        .unwrap();
    let reader = owner.task(0).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    reader.set_virtual_time(INFINITY).unwrap();
    let remote = user.lookup_channel("secret", T).unwrap();
    let writer = user.task(0).unwrap();
    writer
        .attach_output(&remote)
        .unwrap()
        .put(1, "payload")
        .unwrap();
    let (ts, item) = input.get_timeout(Selector::Oldest, T).unwrap();
    assert_eq!((ts, item.as_str().unwrap()), (1, "payload"));
}

fn assert_rejected(r: Result<Space, NetError>, what: &str) {
    match r {
        Err(NetError::AuthRejected(msg)) => eprintln!("{what}: rejected: {msg}"),
        Err(other) => panic!("{what}: expected AuthRejected, got {other}"),
        Ok(_) => panic!("{what}: joined without being authorised"),
    }
}

fn tls(ca: &Path, cert: Option<(&Path, &Path)>) -> Tls {
    Tls {
        root_ca: Some(ca.to_owned()),
        certificate: cert.map(|c| c.0.to_owned()),
        private_key: cert.map(|c| c.1.to_owned()),
        verify_name: true,
    }
}

#[test]
fn user_password_is_enforced() {
    let dir = Dir::new("usrpwd");
    let users = dir.write("users.txt", "camera:s3cret\nmixer:other\n");
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("usrpwd");
    let mut rcfg = Config::router(ep.clone()).credentials("router", "r0uter");
    rcfg.credentials_file = Some(users);
    let router = Space::join(&app, rcfg).unwrap();

    let good = Space::join(
        &app,
        quick(Config::client(ep.clone()).credentials("camera", "s3cret")),
    )
    .unwrap();
    exchange(&router, &good);

    assert_rejected(
        Space::join(
            &app,
            quick(Config::client(ep.clone()).credentials("camera", "wrong")),
        ),
        "wrong password",
    );
    assert_rejected(
        Space::join(&app, quick(Config::client(ep.clone()))),
        "no credentials",
    );
    assert_rejected(
        Space::join(&app, quick(Config::peer().connect(ep.clone()))),
        "peer without credentials",
    );
}

#[test]
fn tls_with_an_untrusted_certificate_is_refused() {
    let dir = Dir::new("tls");
    let (ca, cert, key) = certificates(&dir, "");
    let (other_ca, _, _) = certificates(&dir, "other-");
    let ep = format!("tls/localhost:{}", free_port());
    let app = app("tls");
    let router = Space::join(
        &app,
        Config::router(ep.clone()).tls(tls(&ca, Some((&cert, &key)))),
    )
    .unwrap();

    let trusted = Space::join(&app, quick(Config::client(ep.clone()).tls(tls(&ca, None)))).unwrap();
    exchange(&router, &trusted);

    assert_rejected(
        Space::join(
            &app,
            quick(Config::client(ep.clone()).tls(tls(&other_ca, None))),
        ),
        "client trusting another CA",
    );
}

#[test]
fn unreachable_router_is_not_an_auth_error() {
    // Port 1: nothing listens there, so connections are refused. A port found free a moment
    // ago can be taken meanwhile by another test's peer (peers listen on ephemeral ports),
    // which then accepts the connection and refuses the session.
    let ep = "tcp/127.0.0.1:1".to_owned();
    match Space::join(&app("unreach"), quick(Config::client(ep))) {
        Err(NetError::Connect(msg)) => eprintln!("unreachable: {msg}"),
        Err(other) => panic!("expected Connect, got {other}"),
        Ok(_) => panic!("joined with no router"),
    }
}

/// A denied request is `Denied`, naming the user, the operation and the container.
fn assert_denied<T: std::fmt::Debug>(
    r: Result<T, StmError>,
    user: &str,
    op: Permission,
    container: &str,
) {
    match r {
        Err(StmError::Denied {
            user: u,
            op: o,
            container: c,
        }) => assert_eq!((u.as_str(), o, c.as_str()), (user, op, container)),
        other => panic!("{user} {op} {container}: expected Denied, got {other:?}"),
    }
}

#[test]
fn access_rules_are_enforced_by_the_owner() {
    let dir = Dir::new("access");
    let users = dir.write(
        "users.txt",
        "camera:s3cret\nviewer:v1ewer\nintruder:1ntruder\n",
    );
    let rules = "# user   permissions   containers\n\
                 camera   read,write    video/**\n\
                 viewer   read          video/**\n\
                 *        read          public/*\n\
                 camera   create        cams/*\n";
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("access");
    let mut rcfg = Config::router(ep.clone())
        .credentials("router", "r0uter")
        .access(Access::parse(rules).unwrap());
    rcfg.credentials_file = Some(users);
    let router = Space::join(&app, rcfg).unwrap();
    for name in ["video/frames", "public/news", "private/log"] {
        router
            .channel(ContainerOptions::unbounded().name(name))
            .unwrap();
    }
    let client = |user: &str, password: &str| {
        Space::join(
            &app,
            quick(Config::client(ep.clone()).credentials(user, password)),
        )
        .unwrap()
    };
    let (camera, viewer, intruder) = (
        client("camera", "s3cret"),
        client("viewer", "v1ewer"),
        client("intruder", "1ntruder"),
    );
    let frames = |s: &Space| s.lookup_channel("video/frames", T).unwrap();

    let t = camera.task(0).unwrap();
    t.attach_output(&frames(&camera))
        .unwrap()
        .put(1, "frame")
        .unwrap();
    t.attach_input(&frames(&camera)).unwrap();
    let t = viewer.task(0).unwrap();
    let (ts, _) = t
        .attach_input(&frames(&viewer))
        .unwrap()
        .get_timeout(Selector::Oldest, T)
        .unwrap();
    assert_eq!(ts, 1);
    assert_denied(
        t.attach_output(&frames(&viewer)),
        "viewer",
        Permission::Write,
        "video/frames",
    );
    let t = intruder.task(0).unwrap();
    let private = intruder.lookup_channel("private/log", T).unwrap();
    assert_denied(
        t.attach_input(&private),
        "intruder",
        Permission::Read,
        "private/log",
    );
    t.attach_input(&intruder.lookup_channel("public/news", T).unwrap())
        .unwrap();
    assert_denied(
        frames(&intruder).close(),
        "intruder",
        Permission::Close,
        "video/frames",
    );
    let created = camera.channel_on(router.id(), ContainerOptions::unbounded().name("cams/1"));
    assert!(created.is_ok(), "{created:?}");
    let made = |s: &Space, name: &str| match s
        .channel_on(router.id(), ContainerOptions::unbounded().name(name))
    {
        Err(NetError::Stm(e)) => Err(e),
        other => other.map(|_| ()).map_err(|e| panic!("{e}")),
    };
    assert_denied(
        made(&intruder, "cams/2"),
        "intruder",
        Permission::Create,
        "cams/2",
    );
    assert_denied(
        made(&camera, "video/new"),
        "camera",
        Permission::Create,
        "video/new",
    );
    assert_eq!(router.stats().denied, 5);
    // The channel is still open for those allowed.
    let t = camera.task(0).unwrap();
    t.attach_output(&frames(&camera))
        .unwrap()
        .put(2, "frame")
        .unwrap();

    // Requests under another user's name never reach the owner: the router drops them on
    // the intruder's link, while its requests under its own name are answered.
    let mut raw = zenoh::Config::default();
    for (k, v) in [
        ("mode", "\"client\"".to_owned()),
        ("connect/endpoints", format!("[\"{ep}\"]")),
        ("scouting/multicast/enabled", "false".to_owned()),
        ("transport/auth/usrpwd/user", "\"intruder\"".to_owned()),
        ("transport/auth/usrpwd/password", "\"1ntruder\"".to_owned()),
    ] {
        raw.insert_json5(k, &v).unwrap();
    }
    let raw = zenoh::open(raw).wait().unwrap();
    let answers = |user: &str| {
        raw.get(format!("stampede/{app}/op/{}/{user}", router.id()))
            .payload(vec![0xffu8; 4])
            .timeout(Duration::from_secs(2))
            .wait()
            .unwrap()
            .into_iter()
            .count()
    };
    assert_eq!(answers("intruder"), 1, "the owner answers its own user");
    assert_eq!(answers("camera"), 0, "a request under another user's name");
    assert_eq!(answers("anonymous"), 0, "a request under no user's name");
}

#[test]
fn access_rules_and_their_errors_keep_secrets() {
    let dir = Dir::new("secrets");
    let users = dir.write("users.txt", "ok:pw-never-shown\nbad/name:pw-never-shown\n");
    let mut cfg = Config::router(format!("tcp/127.0.0.1:{}", free_port()))
        .access(Access::parse("ok read **\n").unwrap());
    cfg.credentials_file = Some(users);
    match Space::join(&app("secrets"), cfg) {
        Err(NetError::Config(msg)) => {
            assert!(msg.contains("bad/name"), "{msg}");
            assert!(!msg.contains("pw-never-shown"), "{msg}");
        }
        Err(other) => panic!("expected Config, got {other}"),
        Ok(_) => panic!("joined with an unusable user name"),
    }
    let denied = StmError::Denied {
        user: "ok".into(),
        op: Permission::Write,
        container: "x".into(),
    };
    assert!(!denied.to_string().contains("pw"), "{denied}");
}

/// A peer that sends items over the owner's quota, opens connections without end and floods
/// its put and request keys with garbage gets typed errors and counts, and the owner goes
/// on serving everyone else.
#[test]
fn an_owner_keeps_its_quotas_against_a_hostile_peer() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("hostile");
    let mut cfg = Config::router(ep.clone());
    cfg.quotas = Quotas {
        max_item_bytes: 1 << 20,
        max_connections: 8,
        max_waiting_puts: 64,
    };
    let owner = Space::join(&app, cfg).unwrap();
    let frames = owner
        .channel(ContainerOptions::bounded(4).name("frames"))
        .unwrap();
    let reader = owner.task(0).unwrap();
    let input = reader.attach_input(&frames).unwrap();
    let hostile = Space::join(&app, Config::client(ep.clone())).unwrap();
    let remote = hostile.lookup_channel("frames", T).unwrap();
    let t = hostile.task(0).unwrap();
    let out = t.attach_output(&remote).unwrap();
    // Too large: refused with the limit, the item handed back.
    let e = match out.put(1, vec![7u8; 2 << 20]) {
        Err(e) => e,
        Ok(()) => out.flush().unwrap_err(),
    };
    assert_eq!(e.kind(), PutErrorKind::TooLarge { limit: 1 << 20 });
    // At the limit is fine.
    out.put(2, vec![7u8; 1 << 20]).unwrap();
    out.flush().unwrap();
    assert_eq!(input.get_timeout(Selector::Oldest, T).unwrap().0, 2);
    // Connections: eight at most, counting the output above.
    let mut held = Vec::new();
    let refused = loop {
        match t.attach_input(&remote) {
            Ok(c) => held.push(c),
            Err(e) => break e,
        }
        assert!(held.len() < 100, "no connection quota");
    };
    assert_eq!(held.len(), 7);
    assert_eq!(refused, StmError::TooManyConnections(8));
    // Garbage on the request and put keys, and a message beyond the link's limit.
    let raw = {
        let mut c = zenoh::Config::default();
        for (k, v) in [
            ("mode", "\"client\"".to_owned()),
            ("connect/endpoints", format!("[\"{ep}\"]")),
            ("scouting/multicast/enabled", "false".to_owned()),
        ] {
            c.insert_json5(k, &v).unwrap();
        }
        zenoh::open(c).wait().unwrap()
    };
    let put_key = format!("stampede/{app}/put/{}/anonymous", owner.id());
    for i in 0..20_000u32 {
        raw.put(&put_key, i.to_le_bytes().to_vec()).wait().unwrap();
    }
    raw.put(&put_key, vec![1u8; 8 << 20]).wait().unwrap();
    // Everyone else is served: a second client puts and the owner gets it.
    let good = Space::join(&app, Config::client(ep.clone())).unwrap();
    let g = good.task(0).unwrap();
    let gout = g
        .attach_output(&good.lookup_channel("frames", T).unwrap())
        .unwrap();
    input.consume_until(2).unwrap();
    gout.put(3, "fine").unwrap();
    gout.flush().unwrap();
    assert_eq!(input.get_timeout(Selector::Oldest, T).unwrap().0, 3);
    let stats = owner.stats();
    assert_eq!(stats.quota_refused, 2, "{stats:?}");
    assert!(stats.malformed >= 1, "{stats:?}");
    eprintln!(
        "refused as over quota: {}, malformed messages: {}",
        stats.quota_refused, stats.malformed
    );
}

/// A putter that outruns a full channel meets the owner's quota of waiting puts: the puts
/// beyond it are refused whole as `Full` (reported to the putter with their timestamps,
/// counted at the owner), those within it are stored in order once room is made, and
/// nothing is stored twice or blocks for good.
#[test]
fn puts_beyond_the_quota_of_waiting_puts_are_refused_whole() {
    const WAITING: usize = 4;
    const PUTS: i64 = 40;
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("waiting");
    let mut cfg = Config::router(ep.clone());
    cfg.quotas.max_waiting_puts = WAITING;
    let owner = Space::join(&app, cfg).unwrap();
    let frames = owner
        .channel(ContainerOptions::bounded(16).name("frames"))
        .unwrap();
    let reader = owner.task(0).unwrap();
    let input = reader.attach_input(&frames).unwrap();
    reader.set_virtual_time(INFINITY).unwrap();
    let putter = Space::join(&app, Config::client(ep)).unwrap();
    let remote = putter.lookup_channel("frames", T).unwrap();
    // The putter's window is the channel's capacity, so it runs up to 16 puts ahead of
    // the owner: more than the 4 the owner lets wait while nobody consumes. Its refusals
    // return credits, so it never blocks; without the quota it would, on a full window.
    let sent = std::sync::atomic::AtomicBool::new(false);
    let mut stored = Vec::new();
    let (errors, blocked) = std::thread::scope(|s| {
        let putting = s.spawn(|| {
            let t = putter.task(0).unwrap();
            let out = t.attach_output(&remote).unwrap();
            let mut errors = Vec::new();
            for ts in 1..=PUTS {
                if let Err(e) = out.put(ts, ts.to_le_bytes().to_vec()) {
                    errors.push(e);
                }
                // What the reader consumes is garbage once no task can put below it.
                t.set_virtual_time(ts + 1).unwrap();
            }
            sent.store(true, std::sync::atomic::Ordering::SeqCst);
            // The waiting puts are acknowledged once stored, which takes the reader:
            // flush reports any refusal not reported yet.
            while let Err(e) = out.flush() {
                errors.push(e);
            }
            errors
        });
        let deadline = Instant::now() + T;
        while !sent.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let blocked = !sent.load(std::sync::atomic::Ordering::SeqCst);
        // Now make room, until the putter is done and nothing more comes.
        let mut take = |wait| match input.get_timeout(Selector::Oldest, wait) {
            Ok((ts, item)) => {
                let bytes: [u8; 8] = item.as_bytes().unwrap().as_ref().try_into().unwrap();
                assert_eq!(i64::from_le_bytes(bytes), ts);
                stored.push(ts);
                input.consume(ts).unwrap();
                true
            }
            Err(_) => false,
        };
        while !putting.is_finished() {
            take(Duration::from_millis(100));
        }
        while take(Duration::from_millis(500)) {}
        (putting.join().unwrap(), blocked)
    });
    assert!(
        !blocked,
        "the putter was held up: the owner let every put wait"
    );
    let mut refused = std::collections::BTreeSet::new();
    let mut unsent = std::collections::BTreeSet::new();
    for mut e in errors {
        assert_eq!(e.kind(), PutErrorKind::Full, "{e:?}");
        assert!(
            e.is_deferred(),
            "a pipelined refusal is reported late: {e:?}"
        );
        assert!(refused.insert(e.ts()), "refused twice: {e:?}");
        if let Some((ts, _)) = e.take_unsent() {
            unsent.insert(ts);
        }
    }
    assert_eq!(
        stored.len() + refused.len() + unsent.len(),
        PUTS as usize,
        "each put stored, refused, or handed back unsent: {refused:?} {unsent:?}"
    );
    let stats = owner.stats();
    assert_eq!(stats.quota_refused, refused.len() as u64, "{stats:?}");
    eprintln!(
        "{} stored, {} refused over the quota of waiting puts, {} handed back unsent",
        stored.len(),
        refused.len(),
        unsent.len()
    );
}
