//! Endpoints, checked before joining.
//!
//! An endpoint follows Zenoh's grammar, `<protocol>/<address>[?<metadata>][#<config>]`,
//! where metadata and configuration are `key=value` entries separated by `;`. For `tcp`,
//! `udp`, `tls` and `quic` the address is `host:port`: a host name, an IPv4 address or a
//! bracketed IPv6 address, and a port from 0 (the system picks one, for listening) to
//! 65535. For `unixsock-stream` it is the socket's path.
//!
//! Zenoh itself takes a malformed endpoint for one where nobody answers, and joining then
//! waits its whole timeout before failing; checked here, the mistake is reported at once,
//! saying what is wrong. The check never resolves names, so it refuses no endpoint Zenoh
//! could use.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use crate::error::NetError;

/// The protocols this build links in, in the order error messages list them.
const SUPPORTED: &[&str] = &[
    "tcp",
    "tls",
    #[cfg(unix)]
    "unixsock-stream",
];

/// Protocols whose address is `host:port`.
const HOST_PORT: &[&str] = &["tcp", "udp", "tls", "quic"];

/// Zenoh's other protocols, which this build does not link in.
const OTHER_ZENOH: &[&str] = &["ws", "serial", "unixpipe", "vsock", "quic_datagram"];

/// Zenoh refuses endpoints whose protocol, address and metadata together are longer.
const MAX_LEN: usize = u8::MAX as usize;

/// The longest path a Unix socket address holds (`sun_path`, less its terminating NUL).
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_SOCKET_PATH: usize = 107;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MAX_SOCKET_PATH: usize = 103;

const EXAMPLE: &str = "tcp/127.0.0.1:7447";

/// Checks that `endpoint` is well formed and names a protocol this build supports, without
/// resolving any name: it says nothing about whether anything listens there.
///
/// [`Config::to_zenoh`](crate::Config::to_zenoh), and so [`Space::join`](crate::Space::join),
/// check every endpoint this way first. A malformed one is a [`NetError::Config`] that says
/// what is wrong and shows a valid endpoint.
///
/// ```
/// use stampede_net::{validate_endpoint, NetError};
///
/// for ok in [
///     "tcp/127.0.0.1:7447",
///     "tcp/localhost:7447",
///     "tcp/[::1]:7447",
///     "tcp/0.0.0.0:0",
///     "tls/example.com:7443",
///     "tcp/192.168.1.5:7447?rel=1#iface=eth0",
///     "unixsock-stream//tmp/stampede.sock",
/// ] {
///     assert!(validate_endpoint(ok).is_ok(), "{ok}");
/// }
///
/// let Err(NetError::Config(why)) = validate_endpoint("tcp/127.0.0.1") else { panic!() };
/// assert_eq!(
///     why,
///     r#"endpoint "tcp/127.0.0.1" has no port: write host:port, such as tcp/127.0.0.1:7447"#
/// );
/// let Err(NetError::Config(why)) = validate_endpoint("tcp/127.0.0.1:99999") else { panic!() };
/// assert!(why.contains("port 99999 is out of range 0-65535"));
/// ```
pub fn validate_endpoint(endpoint: &str) -> Result<(), NetError> {
    check(endpoint).map_err(|why| NetError::Config(format!("endpoint {endpoint:?}{why}")))?;
    // Whatever Zenoh's own parser refuses is refused too, in words of ours.
    endpoint
        .parse::<zenoh::config::EndPoint>()
        .map(drop)
        .map_err(|_| {
            NetError::Config(format!(
                "endpoint {endpoint:?} is malformed: write \
                 protocol/address[?key=value;...][#key=value;...], such as {EXAMPLE}"
            ))
        })
}

/// What is wrong with `s`, as the rest of a sentence that starts by quoting it.
fn check(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!(
            " is empty: write protocol/address, such as {EXAMPLE}"
        ));
    }
    let Some((protocol, rest)) = s.split_once('/') else {
        return Err(format!(
            " has no protocol: write protocol/address, such as {}",
            example_for(s)
        ));
    };
    if protocol.is_empty() {
        return Err(format!(
            " has no protocol: write protocol/address, such as {}",
            example_for(rest)
        ));
    }
    if let Some(p) = protocol.strip_suffix(':') {
        if let Some(after) = rest.strip_prefix('/') {
            return Err(format!(
                " is written as a URL: write {p}/{after}, without \"://\""
            ));
        }
    }
    let (address, metadata, config) = split(rest)?;
    let known_host_port = HOST_PORT.contains(&protocol);
    if !known_host_port && protocol != "unixsock-stream" {
        return Err(unknown_protocol(protocol));
    }
    if address.is_empty() {
        return Err(if known_host_port {
            format!(" has no address: write host:port, such as {protocol}/127.0.0.1:7447")
        } else {
            format!(" has no path: such as {protocol}//tmp/stampede.sock")
        });
    }
    if known_host_port {
        host_port(protocol, address)?;
    } else {
        socket_path(address)?;
    }
    if let Some(m) = metadata {
        parameters("metadata", '?', m, "?rel=1")?;
    }
    if let Some(c) = config {
        parameters("configuration", '#', c, "#iface=lo")?;
    }
    let len = protocol.len() + address.len() + metadata.map_or(0, str::len);
    if len > MAX_LEN {
        return Err(format!(
            " is too long: its protocol, address and metadata take {len} bytes, at most \
             {MAX_LEN}"
        ));
    }
    if !SUPPORTED.contains(&protocol) {
        return Err(format!(
            ": protocol {protocol:?} is not supported by this build ({})",
            supported("it")
        ));
    }
    Ok(())
}

/// Splits what follows the protocol into address, metadata (after `?`) and configuration
/// (after `#`).
fn split(rest: &str) -> Result<(&str, Option<&str>, Option<&str>), String> {
    let (before, config) = match rest.split_once('#') {
        Some((b, c)) => (b, Some(c)),
        None => (rest, None),
    };
    if config.is_some_and(|c| c.contains('?')) {
        return Err(format!(
            ": '?' after '#': the metadata goes before the configuration, such as \
             {EXAMPLE}?rel=1#iface=lo"
        ));
    }
    Ok(match before.split_once('?') {
        Some((a, m)) => (a, Some(m), config),
        None => (before, None, config),
    })
}

/// The protocols this build supports and an example, after `lead` ("this build", "it").
fn supported(lead: &str) -> String {
    let mut s = format!("{lead} supports ");
    for (i, p) in SUPPORTED.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(p);
    }
    let _ = write!(s, "; such as {EXAMPLE}");
    s
}

fn unknown_protocol(protocol: &str) -> String {
    let near = protocol.trim().to_ascii_lowercase();
    let hint =
        if near != protocol && (HOST_PORT.contains(&near.as_str()) || near == "unixsock-stream") {
            format!("; did you mean {near:?}?")
        } else {
            String::new()
        };
    if OTHER_ZENOH.contains(&protocol) {
        return format!(
            ": protocol {protocol:?} is not supported by this build ({})",
            supported("it")
        );
    }
    format!(
        ": unknown protocol {protocol:?} ({}){hint}",
        supported("this build")
    )
}

/// A valid endpoint like the one `s` (which has no protocol) was perhaps meant to be.
fn example_for(s: &str) -> String {
    let candidate = format!("tcp/{s}");
    if check(&candidate).is_ok() {
        candidate
    } else {
        EXAMPLE.to_owned()
    }
}

fn host_port(protocol: &str, address: &str) -> Result<(), String> {
    let (host, port) = if let Some(inner) = address.strip_prefix('[') {
        let Some((ip, after)) = inner.split_once(']') else {
            return Err(format!(
                ": IPv6 address {address:?} has no closing ']': write [address]:port, such \
                 as {protocol}/[::1]:7447"
            ));
        };
        ipv6(protocol, ip)?;
        let host = &address[..ip.len() + 2];
        match after.strip_prefix(':') {
            Some(port) => (host, port),
            None if after.is_empty() => (host, ""),
            None => {
                return Err(format!(
                    ": {after:?} follows {host}: write [address]:port, such as \
                     {protocol}/{host}:7447"
                ))
            }
        }
    } else {
        match address.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                let example = if host.parse::<Ipv6Addr>().is_ok() {
                    format!("{protocol}/[{host}]:7447")
                } else {
                    format!("{protocol}/[::1]:7447")
                };
                return Err(format!(
                    ": an IPv6 address goes in brackets before the port, such as {example}"
                ));
            }
            Some((host, port)) => {
                hostname(host)?;
                (host, port)
            }
            None => {
                hostname(address)?;
                (address, "")
            }
        }
    };
    if port.is_empty() {
        return Err(format!(
            " has no port: write host:port, such as {protocol}/{host}:7447"
        ));
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            ": port {port:?} is not a number: write host:port, such as {protocol}/{host}:7447"
        ));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!(
            ": port {port} is out of range 0-65535 (such as {protocol}/{host}:7447)"
        ));
    }
    Ok(())
}

fn ipv6(protocol: &str, ip: &str) -> Result<(), String> {
    // A zone (`fe80::1%eth0`) names the interface of a link-local address.
    let (addr, zone) = match ip.split_once('%') {
        Some((a, z)) => (a, Some(z)),
        None => (ip, None),
    };
    let zone_ok = match zone {
        None => true,
        Some(z) => {
            !z.is_empty()
                && z.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        }
    };
    if addr.parse::<Ipv6Addr>().is_err() || !zone_ok {
        return Err(format!(
            ": [{ip}] is not an IPv6 address (such as {protocol}/[::1]:7447)"
        ));
    }
    Ok(())
}

/// A host name of RFC 1123 labels (with `_` too, which resolvers accept in names such as
/// container services'), or an IPv4 address.
fn hostname(host: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            ": host {host:?} is not a host name or an IP address: {why} (such as \
             tcp/localhost:7447 or {EXAMPLE})"
        ))
    };
    if host.is_empty() {
        return Err(format!(
            " has no host: write host:port, such as {EXAMPLE} or tcp/0.0.0.0:7447"
        ));
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return bad(&format!("{c:?} is not allowed"));
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.len() > 253 {
        return bad("it is longer than 253 characters");
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.iter().any(|l| l.is_empty()) {
        return bad("it has an empty label between dots");
    }
    if labels.iter().any(|l| l.len() > 63) {
        return bad("a label is longer than 63 characters");
    }
    if labels
        .iter()
        .any(|l| l.starts_with('-') || l.ends_with('-'))
    {
        return bad("a label starts or ends with '-'");
    }
    // All digits: an IPv4 address, not a name (a top-level domain is never numeric).
    // Shorter forms such as 127.1 are the resolver's to read.
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        if labels.len() > 4 {
            return bad("an IPv4 address has four numbers");
        }
        if labels.len() == 4 {
            if let Some(n) = labels.iter().find(|l| l.parse::<u8>().is_err()) {
                return bad(&format!("{n} is above 255"));
            }
        }
    }
    Ok(())
}

fn socket_path(path: &str) -> Result<(), String> {
    if path.contains('\0') {
        return Err(": the socket path contains a NUL character".into());
    }
    if path.len() > MAX_SOCKET_PATH {
        return Err(format!(
            ": the socket path is {} bytes long, and a Unix socket's holds at most \
             {MAX_SOCKET_PATH} (such as unixsock-stream//tmp/stampede.sock)",
            path.len()
        ));
    }
    Ok(())
}

/// Zenoh's parameters: `;`-separated entries, at least one, each `key=value` or `key` with
/// a non-empty key.
fn parameters(what: &str, sep: char, s: &str, example: &str) -> Result<(), String> {
    let entries = || s.split(';').filter(|e| !e.is_empty());
    if entries().next().is_none() {
        return Err(format!(
            ": the {what} after '{sep}' is empty: write key=value entries separated by ';', \
             such as {EXAMPLE}{example}"
        ));
    }
    if let Some(e) = entries().find(|e| e.starts_with('=')) {
        return Err(format!(
            ": the {what} entry {e:?} has no key: write key=value entries separated by ';', \
             such as {EXAMPLE}{example}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn why(endpoint: &str) -> String {
        match validate_endpoint(endpoint) {
            Err(NetError::Config(m)) => m,
            Err(e) => panic!("{endpoint:?}: not a configuration error: {e}"),
            Ok(()) => panic!("{endpoint:?} was accepted"),
        }
    }

    #[test]
    fn valid_endpoints_pass() {
        for ok in [
            "tcp/127.0.0.1:7447",
            "tcp/localhost:7447",
            "tcp/[::1]:7447",
            "tcp/[::]:0",
            "tcp/[fe80::1%eth0]:7447",
            "tcp/0.0.0.0:0",
            "tcp/127.0.0.1:65535",
            "tcp/127.1:7447",
            "tcp/router.example.com.:7447",
            "tcp/my_router:7447",
            "tcp/10.0.0.5:7447?rel=1",
            "tcp/10.0.0.5:7447#iface=lo",
            "tcp/10.0.0.5:7447?prio=1-7;rel=0#iface=lo;so_sndbuf=65536",
            "tcp/10.0.0.5:7447#keep_alive=4",
            "tcp/10.0.0.5:7447?rel",
            "tls/example.com:7443",
            "tls/localhost:7443#root_ca_certificate_file=/etc/ca.pem",
            "unixsock-stream//tmp/x.sock",
            "unixsock-stream/relative.sock",
        ] {
            assert_eq!(validate_endpoint(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn the_reported_endpoints_say_what_is_wrong() {
        assert_eq!(
            why("tcp/127.0.0.1"),
            r#"endpoint "tcp/127.0.0.1" has no port: write host:port, such as tcp/127.0.0.1:7447"#
        );
        assert_eq!(
            why("bogus/127.0.0.1:1"),
            r#"endpoint "bogus/127.0.0.1:1": unknown protocol "bogus" (this build supports tcp, tls, unixsock-stream; such as tcp/127.0.0.1:7447)"#
        );
        assert_eq!(
            why("tcp/127.0.0.1:99999"),
            r#"endpoint "tcp/127.0.0.1:99999": port 99999 is out of range 0-65535 (such as tcp/127.0.0.1:7447)"#
        );
    }

    #[test]
    fn malformed_endpoints_are_refused() {
        for (bad, says) in [
            ("", "is empty"),
            ("127.0.0.1:7447", "has no protocol"),
            ("/127.0.0.1:7447", "has no protocol"),
            ("tcp://127.0.0.1:7447", "write tcp/127.0.0.1:7447"),
            ("TCP/127.0.0.1:7447", "did you mean \"tcp\""),
            ("tcp/", "has no address"),
            ("tcp/?rel=1", "has no address"),
            ("tcp/127.0.0.1:", "has no port"),
            ("tcp/[::1]", "has no port"),
            ("tcp/:7447", "has no host"),
            ("tcp/[::1", "no closing ']'"),
            ("tcp/[::1:7447", "no closing ']'"),
            ("tcp/[::1]7447", "write [address]:port"),
            ("tcp/[::g]:7447", "is not an IPv6 address"),
            ("tcp/[fe80::1%]:7447", "is not an IPv6 address"),
            ("tcp/::1:7447", "tcp/[::1]:7447"),
            ("tcp/127.0.0.1:http", "port \"http\" is not a number"),
            ("tcp/127.0.0.1:-1", "is not a number"),
            ("tcp/127.0.0.1:+80", "is not a number"),
            ("tcp/127.0.0.1:65536", "out of range"),
            ("tcp/127.0.0.1:99999999999999999999999", "out of range"),
            ("tcp/999.1.1.1:7447", "999 is above 255"),
            ("tcp/1.2.3.4.5:7447", "four numbers"),
            ("tcp/exa mple.com:7447", "' ' is not allowed"),
            ("tcp/-router:7447", "starts or ends with '-'"),
            ("tcp/a..b:7447", "empty label"),
            ("tcp/127.0.0.1:7447?", "metadata after '?' is empty"),
            ("tcp/127.0.0.1:7447?;", "metadata after '?' is empty"),
            ("tcp/127.0.0.1:7447?=1", "has no key"),
            ("tcp/127.0.0.1:7447?rel=1;=2", "has no key"),
            ("tcp/127.0.0.1:7447#", "configuration after '#' is empty"),
            ("tcp/127.0.0.1:7447#=lo", "has no key"),
            ("tcp/127.0.0.1:7447#iface=lo?rel=1", "'?' after '#'"),
            ("unixsock-stream/", "has no path"),
            ("unixsock-stream/a\0b", "NUL"),
            (
                "udp/127.0.0.1:7447",
                "\"udp\" is not supported by this build",
            ),
            (
                "quic/127.0.0.1:7447",
                "\"quic\" is not supported by this build",
            ),
            ("udp/127.0.0.1", "has no port"),
            ("ws/127.0.0.1:7447", "\"ws\" is not supported by this build"),
        ] {
            let m = why(bad);
            assert!(m.contains(says), "{bad:?}: {m:?} does not say {says:?}");
            assert!(!m.contains(".rs:"), "{m}");
        }
        let long = format!("unixsock-stream//tmp/{}", "x".repeat(200));
        assert!(why(&long).contains("a Unix socket's holds at most"));
        let long = format!("tcp/127.0.0.1:7447?k={}", "x".repeat(300));
        assert!(why(&long).contains("is too long"));
        let label = "a".repeat(64);
        assert!(why(&format!("tcp/{label}:7447")).contains("longer than 63"));
    }

    #[test]
    fn every_message_shows_a_valid_example() {
        for bad in [
            "",
            "127.0.0.1:7447",
            "tcp/127.0.0.1",
            "bogus/127.0.0.1:1",
            "tcp/127.0.0.1:99999",
            "tcp/[::1",
            "tcp/::1:7447",
            "tcp/127.0.0.1:http",
            "tcp/127.0.0.1:7447?=1",
            "unixsock-stream/",
        ] {
            let m = why(bad);
            let example = m
                .split(|c: char| c.is_whitespace() || c == ')')
                .find(|w| w.starts_with("tcp/") || w.starts_with("unixsock-stream/"))
                .unwrap_or_else(|| panic!("{bad:?}: no example in {m:?}"));
            assert_eq!(validate_endpoint(example), Ok(()), "{bad:?}: {m}");
        }
    }

    fn host() -> impl Strategy<Value = String> {
        let label = "[a-z0-9_]([a-z0-9_-]{0,20}[a-z0-9_])?";
        prop_oneof![
            proptest::collection::vec(label, 1..4).prop_map(|l| l.join(".")),
            any::<[u8; 4]>().prop_map(|o| std::net::Ipv4Addr::from(o).to_string()),
            any::<[u16; 8]>().prop_map(|s| format!("[{}]", Ipv6Addr::from(s))),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,40}|[a-z:/?#;=\\[\\]%.0-9-]{0,30}") {
            let _ = validate_endpoint(&s);
        }

        #[test]
        fn well_formed_host_ports_pass(
            protocol in prop_oneof!["tcp", "tls"],
            host in host(),
            port in any::<u16>(),
            metadata in proptest::option::of("[a-z]{1,8}=[a-z0-9]{0,8}"),
            config in proptest::option::of("[a-z_]{1,8}=[a-z0-9]{1,8}"),
        ) {
            let mut ep = format!("{protocol}/{host}:{port}");
            if let Some(m) = metadata {
                ep = format!("{ep}?{m}");
            }
            if let Some(c) = config {
                ep = format!("{ep}#{c}");
            }
            prop_assert_eq!(validate_endpoint(&ep), Ok(()), "{}", ep);
        }

        #[test]
        fn ports_above_65535_are_out_of_range(port in 65536u64..10_000_000) {
            let m = why(&format!("tcp/127.0.0.1:{port}"));
            prop_assert!(m.contains("out of range"), "{}", m);
        }
    }
}
