//! Named remote code between two address spaces of one process: calls and their answers,
//! one-way invocations in order, every failure as its typed error, counted.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{app, eventually, free_port};
use stampede_core::{DType, Item, NdArray, StmError};
use stampede_net::{Config, InvokeError, NetError, Space};

const T: Duration = Duration::from_secs(10);

/// A router and a peer of one application, each seeing the other alive.
fn pair(test: &str) -> (Space, Space) {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app(test);
    let a = Space::join(&app, Config::router(ep.clone())).unwrap();
    let b = Space::join(&app, Config::peer().connect(ep)).unwrap();
    assert!(eventually(T, || a.spaces().len() == 2 && b.spaces().len() == 2));
    (a, b)
}

#[test]
fn calls_are_answered_and_failures_are_typed() {
    let (a, b) = pair("code-calls");
    let caller = Arc::new(Mutex::new(String::new()));
    let seen = caller.clone();
    b.serve("echo/upper", move |from, arg| {
        *seen.lock().unwrap() = from.to_owned();
        let s = arg.as_str().ok_or("not text")?;
        Ok(Item::from(s.to_uppercase()))
    })
    .unwrap();
    b.serve("fails", |_, _| Err("no such luck".into())).unwrap();
    b.serve("panics", |_, _| panic!("at the handler")).unwrap();

    let got = a
        .call(b.id(), "echo/upper", "hello")
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(got.as_str(), Some("HELLO"));
    assert_eq!(
        *caller.lock().unwrap(),
        a.id(),
        "the handler sees its caller"
    );

    // An argument the handler refuses, a failing handler, a panicking one.
    let e = a.call(b.id(), "echo/upper", vec![1u8, 2]).unwrap().wait();
    assert!(
        matches!(&e, Err(InvokeError::Failed { message, .. }) if message == "not text"),
        "{e:?}"
    );
    let e = a.call(b.id(), "fails", "x").unwrap().wait().unwrap_err();
    assert_eq!(
        e,
        InvokeError::Failed {
            space: b.id().to_owned(),
            name: "fails".into(),
            message: "no such luck".into()
        }
    );
    let e = a.call(b.id(), "panics", "x").unwrap().wait().unwrap_err();
    assert!(
        matches!(&e, InvokeError::Failed { message, .. } if message.contains("at the handler")),
        "{e:?}"
    );

    // A name nobody serves there.
    let e = a
        .call(b.id(), "nothing/here", "x")
        .unwrap()
        .wait()
        .unwrap_err();
    assert_eq!(
        e,
        InvokeError::Unknown {
            space: b.id().to_owned(),
            name: "nothing/here".into()
        }
    );
    assert_eq!(e.space(), Some(b.id()));

    // Refused before anything is sent.
    assert_eq!(
        a.call(b.id(), "bad*name", "x").unwrap_err(),
        InvokeError::InvalidName("bad*name".into())
    );
    assert!(matches!(
        a.invoke("no-such-space", "echo/upper", "x").unwrap_err(),
        InvokeError::Unreachable { .. }
    ));
    assert!(matches!(
        b.serve("fails", |_, _| Ok(Item::from("again"))),
        Err(NetError::Stm(StmError::NameTaken(_)))
    ));
    assert!(matches!(
        b.serve("", |_, _| Ok(Item::from(""))),
        Err(NetError::Stm(StmError::InvalidName(_)))
    ));

    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.invocations_sent, 5);
    assert_eq!(sa.invocations_failed, 4);
    assert_eq!(sb.invocations_served, 4);
    assert_eq!(sb.invocations_unknown, 1);
    b.leave();
    a.leave();
}

#[test]
fn one_way_invocations_arrive_in_order_and_report_failures() {
    let (a, b) = pair("code-one-way");
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    b.serve("collect", move |_, arg| {
        sink.lock().unwrap().push(arg.as_str().unwrap().to_owned());
        Ok(Item::from(""))
    })
    .unwrap();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let f = failures.clone();
    let listener = a.on_invoke_failure(move |e| f.lock().unwrap().push(e.clone()));
    for i in 0..500 {
        a.invoke(b.id(), "collect", i.to_string()).unwrap();
    }
    a.invoke(b.id(), "missing", "x").unwrap();
    let want: Vec<String> = (0..500).map(|i| i.to_string()).collect();
    assert!(eventually(T, || *got.lock().unwrap() == want));
    assert!(eventually(T, || failures.lock().unwrap().len() == 1));
    assert_eq!(
        failures.lock().unwrap()[0],
        InvokeError::Unknown {
            space: b.id().to_owned(),
            name: "missing".into()
        }
    );
    assert_eq!(a.stats().invocations_failed, 1);
    assert!(a.remove_invoke_failure(listener));
    assert!(!a.remove_invoke_failure(listener));

    // A space invokes its own code through the same registry.
    let mine = a.call(a.id(), "nothing", "x").unwrap().wait().unwrap_err();
    assert!(matches!(mine, InvokeError::Unknown { .. }), "{mine:?}");
    b.leave();
    a.leave();
}

#[test]
fn typed_items_cross_whole_and_a_departed_callee_fails_its_calls() {
    let (a, b) = pair("code-items");
    b.serve("transpose", |_, arg| {
        let m = arg.decode::<NdArray>().map_err(|e| e.to_string())?;
        let (r, c) = (m.shape()[0], m.shape()[1]);
        let v: Vec<f64> = m
            .data()
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let t: Vec<f64> = (0..c * r).map(|k| v[(k % r) * c + k / r]).collect();
        Ok(Item::from(NdArray::from_slice(&[c, r], &t).unwrap()))
    })
    .unwrap();
    b.serve("slow", |_, _| {
        std::thread::sleep(Duration::from_secs(5));
        Ok(Item::from(""))
    })
    .unwrap();
    // 64 KiB: a payload of its own on the way out and back.
    let v: Vec<f64> = (0..64 * 128).map(|k| k as f64).collect();
    let m = Item::from(NdArray::from_slice(&[64, 128], &v).unwrap());
    let t = a.call(b.id(), "transpose", m).unwrap().wait().unwrap();
    let t = t.decode::<NdArray>().unwrap();
    assert_eq!((t.dtype(), t.shape()), (DType::F64, &[128usize, 64][..]));
    let at = |i: usize, j: usize| {
        f64::from_le_bytes(t.data()[(i * 64 + j) * 8..][..8].try_into().unwrap())
    };
    assert_eq!(at(5, 3), v[3 * 128 + 5]);

    let e = a
        .call(b.id(), "slow", "x")
        .unwrap()
        .wait_timeout(Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(e, InvokeError::Timeout { .. }), "{e:?}");
    let call = a.call(b.id(), "slow", "x").unwrap();
    let b_id = b.id().to_owned();
    b.leave();
    let e = call.wait_timeout(T).unwrap_err();
    assert_eq!(
        e,
        InvokeError::Unreachable {
            space: b_id,
            reason: "it left or died".into()
        }
    );
    a.leave();
}

/// A space with more names than a Zenoh reply channel holds lists them all: its own
/// queryable answers on the asking thread, which must not block on a full channel.
#[test]
fn a_space_with_many_names_lists_them_all() {
    let (a, b) = pair("many-names");
    for i in 0..600 {
        a.register_service(&format!("many/{i}"), "").unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let lister = a.clone();
    std::thread::spawn(move || {
        let n = lister
            .records()
            .iter()
            .filter(|r| r.name.starts_with("many/"))
            .count();
        let _ = tx.send(n);
    });
    assert_eq!(rx.recv_timeout(T).expect("records() returned"), 600);
    assert!(eventually(T, || b
        .records()
        .iter()
        .filter(|r| r.name.starts_with("many/"))
        .count()
        == 600));
}

/// A watch under a prefix sees the names there, already registered and new, and none of
/// the others; a prefix that is not whole name chunks is refused.
#[test]
fn a_watch_under_a_prefix_sees_only_its_names() {
    let (a, b) = pair("watch-under");
    for i in 0..50 {
        a.register_service(&format!("other/{i}"), "").unwrap();
    }
    a.register_service("mine/early", "e").unwrap();
    let w = b.watch_under("mine/").unwrap();
    a.register_service("mine/late", "l").unwrap();
    a.register_service("other/late", "").unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match w.recv_timeout(T) {
            Some(stampede_net::NameEvent::Added(r)) => seen.push((r.name, r.meta)),
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("saw only {seen:?}"),
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("mine/early".to_owned(), "e".to_owned()),
            ("mine/late".to_owned(), "l".to_owned())
        ]
    );
    assert!(w.recv_timeout(Duration::from_millis(200)).is_none());
    for bad in ["mine", "/mine/", "mi*/", "a//"] {
        assert!(
            matches!(
                b.watch_under(bad),
                Err(NetError::Stm(StmError::InvalidName(_)))
            ),
            "{bad:?}"
        );
    }
    assert!(b.watch_under("").is_ok());
}
