//! The metrics say what the runtime counted: puts, gets, items, what holds a watermark; the
//! endpoint serves them over HTTP and refuses anything else.

use std::io::{Read, Write};
use std::net::TcpStream;

use stampede_core::{ContainerOptions, Runtime};
use stampede_observe::{Endpoint, Metrics, RuntimeSource, Sample, Source};

/// The value of the sample `line_start` (name and labels) in `text`.
fn value(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(line_start)
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or_else(|| panic!("no sample {line_start} in:\n{text}"))
}

#[test]
fn counters_follow_a_known_workload() {
    let rt = Runtime::new();
    let ch = rt
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let q = rt
        .queue(ContainerOptions::unbounded().name("jobs"))
        .unwrap();
    let t = rt
        .task_builder()
        .name("producer")
        .virtual_time(0)
        .create()
        .unwrap();
    let out = t.attach_output(&ch).unwrap();
    let jobs = t.attach_output(&q).unwrap();
    for ts in 0..7 {
        out.put(ts, vec![0u8; 10]).unwrap();
    }
    for ts in 0..5 {
        jobs.put(ts, "job").unwrap();
    }
    let reader = rt
        .task_builder()
        .name("reader")
        .virtual_time(0)
        .create()
        .unwrap();
    let inp = reader.attach_input(&q).unwrap();
    for _ in 0..2 {
        let item = inp.get().unwrap();
        inp.consume(item.ticket).unwrap();
    }
    let m = Metrics::new();
    m.add(RuntimeSource::new(&rt));
    let text = m.render();
    let c = |name: &str, kind: &str| {
        let container = if kind == "channel" { "frames" } else { "jobs" };
        format!("{name}{{container=\"{container}\",kind=\"{kind}\"}}")
    };
    assert_eq!(
        value(&text, &c("stampede_container_puts_total", "channel")),
        7.0
    );
    assert_eq!(value(&text, &c("stampede_container_items", "channel")), 7.0);
    assert_eq!(
        value(&text, &c("stampede_container_puts_total", "queue")),
        5.0
    );
    assert_eq!(
        value(&text, &c("stampede_container_gets_total", "queue")),
        2.0
    );
    assert_eq!(
        value(&text, &c("stampede_container_consumed_total", "queue")),
        2.0
    );
    assert_eq!(value(&text, &c("stampede_container_items", "queue")), 3.0);
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics text ends with # EOF"
    );
    // Every family is described once, with its type.
    assert_eq!(
        text.matches("# TYPE stampede_container_puts counter")
            .count(),
        1
    );
}

#[test]
fn a_held_watermark_names_its_holder() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::unbounded().name("c")).unwrap();
    let slow = rt
        .task_builder()
        .name("slow")
        .virtual_time(3)
        .create()
        .unwrap();
    slow.attach_output(&ch).unwrap().put(10, "x").unwrap();
    let m = Metrics::new();
    m.add(RuntimeSource::new(&rt));
    let text = m.render();
    assert_eq!(value(&text, "stampede_zone_watermark{zone=\"0\"}"), 3.0);
    assert_eq!(
        value(
            &text,
            "stampede_zone_watermark_holder{zone=\"0\",cause=\"virtual_time\",name=\"slow\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            "stampede_task_virtual_time{zone=\"0\",task=\"slow\"}"
        ),
        3.0
    );
    drop(slow);
}

#[test]
fn connections_count_their_operations_and_tasks_their_blocked_time() {
    let rt = Runtime::new();
    let ch = rt
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let camera = rt
        .task_builder()
        .name("camera")
        .virtual_time(0)
        .create()
        .unwrap();
    let viewer = rt
        .task_builder()
        .name("viewer")
        .virtual_time(0)
        .create()
        .unwrap();
    let out = camera.attach_output(&ch).unwrap();
    let inp = viewer.attach_input(&ch).unwrap();
    for ts in 0..4 {
        out.put(ts, "x").unwrap();
    }
    for ts in 0..3 {
        inp.get(stampede_core::Selector::Exact(ts)).unwrap();
        inp.consume(ts).unwrap();
    }
    // The viewer waits for a frame the camera puts 100 ms later.
    let waiter = std::thread::spawn(move || {
        inp.get(stampede_core::Selector::Exact(10)).unwrap();
        inp
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    out.put(10, "late").unwrap();
    let inp = waiter.join().unwrap();
    let m = Metrics::new();
    m.add(RuntimeSource::new(&rt));
    let text = m.render();
    let edge = |task: &str, dir: &str| {
        format!(
            "stampede_connection_operations_total{{task=\"{task}\",container=\"frames\",kind=\"channel\",direction=\"{dir}\",owner=\"\"}}"
        )
    };
    assert_eq!(value(&text, &edge("camera", "output")), 5.0);
    assert_eq!(value(&text, &edge("viewer", "input")), 4.0);
    let blocked = value(
        &text,
        "stampede_task_blocked_seconds_total{zone=\"0\",task=\"viewer\"}",
    );
    assert!(
        (0.05..10.0).contains(&blocked),
        "viewer blocked {blocked} s"
    );
    // The camera never waited: nothing parked, nothing counted.
    assert_eq!(
        value(
            &text,
            "stampede_task_blocked_seconds_total{zone=\"0\",task=\"camera\"}"
        ),
        0.0
    );
    // A dropped connection is no longer an edge.
    drop(inp);
    assert!(!m.render().contains(&edge("viewer", "input")));
}

struct Twice;

impl Source for Twice {
    fn collect(&self, out: &mut Vec<Sample>) {
        // Two samples with one label set are one value, summed; a sample of another kind
        // than its family is left out.
        out.push(Sample::counter("t_events", "events", 2).label("k", "a"));
        out.push(Sample::counter("t_events", "events", 3).label("k", "a"));
        out.push(Sample::gauge("t_events", "events", 9.0).label("k", "b"));
    }
}

#[test]
fn samples_of_one_label_set_are_summed() {
    let m = Metrics::new();
    m.add(Twice);
    let text = m.render();
    assert_eq!(value(&text, "t_events_total{k=\"a\"}"), 5.0);
    assert!(!text.contains("k=\"b\""), "{text}");
}

fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_endpoint_serves_get_metrics_only() {
    let rt = Runtime::new();
    let _ch = rt
        .channel(ContainerOptions::unbounded().name("served"))
        .unwrap();
    let m = Metrics::new();
    m.add(RuntimeSource::new(&rt));
    let ep = Endpoint::start("127.0.0.1:0", m).unwrap();
    let ok = http(ep.addr(), "GET /metrics HTTP/1.0\r\n\r\n");
    assert!(
        ok.starts_with("HTTP/1.1 200") || ok.starts_with("HTTP/1.0 200"),
        "{ok}"
    );
    assert!(ok.contains("application/openmetrics-text"), "{ok}");
    assert!(ok.contains("container=\"served\""), "{ok}");
    let missing = http(ep.addr(), "GET /nothing HTTP/1.0\r\n\r\n");
    assert!(missing.contains(" 404 "), "{missing}");
    let post = http(
        ep.addr(),
        "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(post.contains(" 405 "), "{post}");
    drop(ep);
    assert!(Endpoint::start("not an address", Metrics::new()).is_err());
}
