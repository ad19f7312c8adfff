//! A protected dashboard: requests without the application's credentials are refused, and
//! with its certificate the page travels over TLS only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{CertificateParams, KeyPair};
use stampede_observe::{Access, Dashboard, Metrics};
use tokio_rustls::rustls;

const GET: &str = "GET /api/samples HTTP/1.0\r\nHost: localhost\r\n";
/// `user:secret`, base64.
const AUTH: &str = "Authorization: Basic dXNlcjpzZWNyZXQ=\r\n";

fn credentials() -> Option<(String, String)> {
    Some(("user".to_owned(), "secret".to_owned()))
}

fn plain(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

#[test]
fn without_the_credentials_a_request_is_refused() {
    let access = Access {
        credentials: credentials(),
        tls: None,
    };
    let d = Dashboard::start_with("127.0.0.1:0", "t", Metrics::new(), &access).unwrap();
    let refused = plain(d.addr(), &format!("{GET}\r\n"));
    assert!(refused.starts_with("HTTP/1.0 401"), "{refused}");
    assert!(refused.contains("WWW-Authenticate: Basic"), "{refused}");
    let wrong = plain(
        d.addr(),
        &format!("{GET}Authorization: Basic dXNlcjp3cm9uZw==\r\n\r\n"),
    );
    assert!(wrong.starts_with("HTTP/1.0 401"), "{wrong}");
    let ok = plain(d.addr(), &format!("{GET}{AUTH}\r\n"));
    assert!(ok.starts_with("HTTP/1.0 200"), "{ok}");
    assert!(ok.contains("\"samples\":[]"), "{ok}");
}

struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

#[test]
fn with_a_certificate_the_page_is_served_over_tls_only() {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let (cert_path, key_path) = (
        dir.join(format!("stampede-dash-{pid}-cert.pem")),
        dir.join(format!("stampede-dash-{pid}-key.pem")),
    );
    let _files = Files(vec![cert_path.clone(), key_path.clone()]);
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let access = Access {
        credentials: credentials(),
        tls: Some((cert_path, key_path)),
    };
    let d = Dashboard::start_with("127.0.0.1:0", "t", Metrics::new(), &access).unwrap();
    assert!(d.url().starts_with("https://127.0.0.1:"), "{}", d.url());

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = "localhost".try_into().unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(d.addr()).unwrap());
    tls.write_all(format!("{GET}{AUTH}\r\n").as_bytes())
        .unwrap();
    let mut text = String::new();
    let _ = tls.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    assert!(text.contains("\"title\":\"t\""), "{text}");

    // Plain HTTP on the TLS port gets no page.
    let plain_answer = plain(d.addr(), &format!("{GET}{AUTH}\r\n"));
    assert!(!plain_answer.contains(" 200 OK"), "{plain_answer}");
}
