//! Who may read an HTTP endpoint and how its answers travel: HTTP basic authentication with
//! the application's credentials, and TLS with its certificate, when those are configured.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use base64::Engine;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How an endpoint is protected. The default is open, plain HTTP (for loopback).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// A user name and password every request must present (HTTP basic authentication).
    pub credentials: Option<(String, String)>,
    /// A certificate chain and its private key (PEM files): the endpoint speaks HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
}

impl Access {
    /// The `Authorization` header value a request must carry, if any.
    pub(crate) fn expected_authorization(&self) -> Option<String> {
        self.credentials.as_ref().map(|(user, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        })
    }
}

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
}

/// The TLS server settings of a certificate chain and key.
fn server_config(cert: &PathBuf, key: &PathBuf) -> io::Result<rustls::ServerConfig> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(&format!("certificate {}", cert.display()), e))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| invalid(&format!("private key {}", key.display()), e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| invalid("TLS settings", e))
}

/// Accepts TLS connections on `addr` and passes each one's plain bytes to and from `inner`
/// (the plain HTTP server on loopback), until dropped.
pub(crate) struct TlsFront {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TlsFront {
    pub(crate) fn start(
        addr: &str,
        cert: &PathBuf,
        key: &PathBuf,
        inner: SocketAddr,
    ) -> io::Result<TlsFront> {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config(cert, key)?));
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("stampede-https".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::pin!(stopped);
                    loop {
                        tokio::select! {
                            _ = &mut stopped => return,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                tokio::spawn(relay(acceptor.clone(), stream, inner));
                            }
                        }
                    }
                })
            })?;
        Ok(TlsFront {
            addr: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// One client's connection: the handshake, then bytes both ways until either side closes.
async fn relay(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    inner: SocketAddr,
) {
    let mut tls = match acceptor.accept(stream).await {
        Ok(tls) => tls,
        Err(e) => {
            tracing::debug!("a dashboard TLS handshake failed: {e}");
            return;
        }
    };
    let Ok(mut plain) = tokio::net::TcpStream::connect(inner).await else {
        return;
    };
    if let Err(e) = tokio::io::copy_bidirectional(&mut tls, &mut plain).await {
        tracing::debug!("a dashboard TLS connection ended: {e}");
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
