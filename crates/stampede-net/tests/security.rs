//! TLS and user/password authentication: what is configured is enforced, and a refused
//! address space gets a clear error instead of a hang.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{app, free_port};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use stampede_core::{ContainerOptions, Selector, INFINITY};
use stampede_net::{Config, NetError, Space, Tls};

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
