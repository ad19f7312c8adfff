//! An address space's metrics over HTTP: its runtime's containers and its own counters, for
//! work another space asked of it; a bad metrics address is a configuration error.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{app, eventually, free_port};
use stampede_core::{ContainerOptions, Selector};
use stampede_net::{Config, NetError, Space};

const T: Duration = Duration::from_secs(10);

fn scrape(space: &Space) -> String {
    let addr = space.metrics_addr().expect("a metrics endpoint");
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn value(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(line_start)
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or_else(|| panic!("no sample {line_start} in:\n{text}"))
}

#[test]
fn a_space_serves_its_runtime_and_its_own_counters() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("metrics-space");
    let a = Space::join(
        &app,
        Config::router(ep.clone()).metrics_listen("127.0.0.1:0"),
    )
    .unwrap();
    let b = Space::join(&app, Config::peer().connect(ep)).unwrap();
    assert!(eventually(T, || a.spaces().len() == 2 && b.spaces().len() == 2));
    assert!(b.metrics_addr().is_none());
    let ch = a
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let t = a.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    for ts in 0..4 {
        out.put(ts, vec![ts as u8; 16]).unwrap();
    }
    let remote = b.lookup_channel("frames", T).unwrap();
    let reader = b.task(0).unwrap();
    let inp = reader.attach_input(&remote).unwrap();
    for ts in 0..4 {
        inp.get(Selector::Exact(ts)).unwrap();
    }
    let text = scrape(&a);
    assert_eq!(
        value(
            &text,
            "stampede_container_puts_total{container=\"frames\",kind=\"channel\"}"
        ),
        4.0
    );
    assert_eq!(value(&text, "stampede_space_members"), 2.0);
    // The reader's attach and gets were requests this space served (some gets may have
    // been answered from pushed items, which are counted too).
    let served = value(&text, "stampede_space_served_total");
    let pushed = value(&text, "stampede_space_pushed_total");
    assert!(served >= 1.0 && served + pushed >= 4.0, "{text}");
    assert!(value(&text, "stampede_process_resident_bytes") > 0.0);
    // The same snapshot without an endpoint.
    assert!(b.metrics().render().contains("stampede_space_members 2"));
    drop((inp, reader, out, t));
    b.leave();
    a.leave();
}

#[test]
fn a_bad_metrics_address_is_a_configuration_error() {
    let app = app("metrics-bad");
    let cfg = Config::router(format!("tcp/127.0.0.1:{}", free_port())).metrics_listen("nowhere");
    match Space::join(&app, cfg) {
        Err(e @ NetError::Config(_)) => assert!(e.to_string().contains("metrics_listen"), "{e}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}
