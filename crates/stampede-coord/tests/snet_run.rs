//! S-Net runtime: each combinator's behaviour on real runs.

use std::time::Duration;

use stampede_coord::snet::{Network, Policy, Record, Runner, Value};
use stampede_coord::{Executor, SnetError};

fn net(src: &str) -> Network {
    Network::parse("test.snet", src).unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn a_counting_star_runs_each_record_until_it_exits() {
    let n =
        net("net count { box step ((<x>) -> (<x>) | (<x>, <done>)); } connect step * {<done>};");
    for policy in [Policy::FurthestAdvanced, Policy::MostQueued] {
        let run = Runner::new(&n, &Executor::new(2))
            .policy(policy)
            .bind("step", |call| {
                let x = call.tag("x")?;
                if x >= 10 {
                    call.emit(1, vec![Value::Tag(x), Value::Tag(1)])
                } else {
                    call.emit(0, vec![Value::Tag(x + 1)])
                }
            })
            .start()
            .unwrap();
        for i in 0..50 {
            run.send(Record::new().tag("x", i % 7)).unwrap();
        }
        let out = run.finish().unwrap();
        assert_eq!(out.len(), 50);
        assert!(out
            .iter()
            .all(|r| r.get_tag("x") == Some(10) && r.get_tag("done") == Some(1)));
    }
}

#[test]
fn face_detection_collects_through_a_synchrocell_star_in_a_feedback_loop() {
    let src = r#"
net faces ({img, name} | {<n>, <faces>} -> {<faces>}) {
    box outline ((img, name) -> (img, name) | (name, <found>));
    box eyes    ((img, name) -> (img, name) | (name, <found>));
    box mouth   ((img, name) -> (name, <found>));
    box count   ((name, <n>, <faces>, <found>) -> (<n>, <faces>) | (<faces>));
    net collect connect ([| {<n>, <faces>}, {name, <found>} |] * {<n>, <faces>, name, <found>} .. count) \ {<n>, <faces>};
} connect ((outline .. (eyes | []) .. (mouth | [])) | []) .. collect;
"#;
    let n = net(src);
    println!("{}", n.dot());
    let stage = |k: i64| {
        move |call: &mut stampede_coord::snet::BoxCall<'_>| {
            let name = call.field("name")?.clone();
            let id = i64::from_le_bytes(name.as_bytes().unwrap()[..8].try_into().unwrap());
            if id % k == 0 {
                call.forward(0)
            } else {
                call.emit(1, vec![Value::Field(name), Value::Tag(0)])
            }
        }
    };
    let run = Runner::new(&n, &Executor::new(2))
        .bind("outline", stage(2))
        .bind("eyes", stage(3))
        .bind("mouth", |call| {
            let name = call.field("name")?.clone();
            call.emit(0, vec![Value::Field(name), Value::Tag(1)])
        })
        .bind("count", |call| {
            let (n, faces, found) = (call.tag("n")?, call.tag("faces")?, call.tag("found")?);
            if n == 1 {
                call.emit(1, vec![Value::Tag(faces + found)])
            } else {
                call.emit(0, vec![Value::Tag(n - 1), Value::Tag(faces + found)])
            }
        })
        .start()
        .unwrap();
    let images = 60i64;
    run.send(Record::new().tag("n", images).tag("faces", 0))
        .unwrap();
    for i in 0..images {
        let name = stampede_core::Item::new(bytes::Bytes::from(i.to_le_bytes().to_vec()));
        run.send(
            Record::new()
                .field(
                    "img",
                    stampede_core::Item::new(bytes::Bytes::from(vec![0u8; 16])),
                )
                .field("name", name),
        )
        .unwrap();
    }
    let out = run.finish().unwrap();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].get_tag("faces"), Some(10)); // multiples of 6 below 60
}

#[test]
fn a_box_that_fails_is_reported_with_its_record() {
    let n = net("net f { box f ((<x>) -> (<x>)); } connect f;");
    let run = Runner::new(&n, &Executor::new(2))
        .bind("f", |call| {
            let x = call.tag("x")?;
            if x == 3 {
                panic!("three is bad");
            }
            call.forward(0)
        })
        .start()
        .unwrap();
    for x in 0..5 {
        run.send(Record::new().tag("x", x)).unwrap();
    }
    let err = run.wait_timeout(Duration::from_secs(10)).unwrap_err();
    match err {
        SnetError::BoxFailed {
            name,
            record,
            message,
        } => {
            assert_eq!(name, "f");
            assert_eq!(record, "{<x>=3}");
            assert!(message.contains("three is bad"), "{message}");
        }
        e => panic!("{e}"),
    }
    assert_eq!(run.outputs().len(), 4);
    assert_eq!(run.stats().box_failures, 1);
}

#[test]
fn a_network_is_a_stage_between_two_channels() {
    use stampede_core::{ContainerOptions, Runtime, Selector, INFINITY};
    let rt = Runtime::new();
    let (frames, sizes) = (
        rt.channel(ContainerOptions::default()).unwrap(),
        rt.channel(ContainerOptions::default()).unwrap(),
    );
    let n = net("net measure { box size ((frame, <ts>) -> (len, <ts>)); } connect size;");
    let run = Runner::new(&n, &Executor::new(2))
        .bind("size", |call| {
            let len = call.field("frame")?.as_bytes().map_or(0, |b| b.len());
            let ts = call.tag("ts")?;
            call.emit(
                0,
                vec![
                    Value::Field(stampede_core::Item::new(len.to_string())),
                    Value::Tag(ts),
                ],
            )
        })
        .start()
        .unwrap();
    let producer = rt.task(0).unwrap();
    let camera = producer.attach_output(&frames).unwrap();
    let stage = rt.task(0).unwrap();
    let (input, output) = (
        stage.attach_input(&frames).unwrap(),
        stage.attach_output(&sizes).unwrap(),
    );
    let consumer = rt.task(INFINITY).unwrap();
    let display = consumer.attach_input(&sizes).unwrap();
    for ts in 0..20i64 {
        camera
            .put(ts, bytes::Bytes::from(vec![7u8; ts as usize]))
            .unwrap();
    }
    frames.close().unwrap();
    std::thread::scope(|s| {
        let feeder = s.spawn(|| {
            let sent = run.feed_channel(&input, "frame", "ts").unwrap();
            run.close();
            sent
        });
        let put = run.drain_into_channel(&output, "len", "ts").unwrap();
        assert_eq!((feeder.join().unwrap(), put), (20, 20));
    });
    sizes.close().unwrap();
    for ts in 0..20i64 {
        let (got, item) = display.get(Selector::NextUnseen).unwrap();
        assert_eq!(got, ts);
        assert_eq!(item.as_str().unwrap(), ts.to_string());
    }
}
