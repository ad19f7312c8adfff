//! Tests for registers: overwrite, reads that wait for a newer write, per-connection last
//! read, timeouts and closing.

use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{ContainerOptions, GetError, Item, Named, Runtime, StmError, Wait, ZoneId};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn text(item: &Item) -> String {
    item.as_str().expect("a UTF-8 item").to_owned()
}

#[test]
fn writes_overwrite() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    let r = t.attach_input(&reg).unwrap();
    assert!(reg.peek().is_none());
    assert_eq!(w.write("a").unwrap(), 1);
    assert_eq!(w.write("b").unwrap(), 2);
    assert_eq!(w.write("c").unwrap(), 3);
    let (seq, item) = r.read().unwrap();
    assert_eq!((seq, text(&item)), (3, "c".into()));
    let (seq, item) = reg.peek().unwrap();
    assert_eq!((seq, text(&item)), (3, "c".into()));
}

#[test]
fn read_waits_for_a_newer_write() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    let r = t.attach_input(&reg).unwrap();
    w.write("old").unwrap();
    assert_eq!(text(&r.read().unwrap().1), "old");
    // Nothing newer than the last read.
    assert!(matches!(r.try_read(), Err(GetError::Unavailable(_))));
    assert!(matches!(
        r.read_with(Wait::Never),
        Err(GetError::Unavailable(_))
    ));
    thread::scope(|s| {
        let reader = s.spawn(|| r.read_timeout(LONG));
        thread::sleep(ms(20));
        w.write("new").unwrap();
        let (seq, item) = reader.join().unwrap().unwrap();
        assert_eq!((seq, text(&item)), (2, "new".into()));
    });
}

#[test]
fn read_timeout_expires_without_a_write() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let r = t.attach_input(&reg).unwrap();
    let start = Instant::now();
    assert!(matches!(r.read_timeout(ms(40)), Err(GetError::Timeout(_))));
    assert!(start.elapsed() >= ms(40));
    // An empty register is not readable at all.
    assert!(matches!(r.try_read(), Err(GetError::Unavailable(_))));
}

#[test]
fn last_read_is_per_connection() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let writer = rt.task(0).unwrap();
    let w = writer.attach_output(&reg).unwrap();
    let t = rt.task(0).unwrap();
    let a = t.attach_input(&reg).unwrap();
    let b = t.attach_input(&reg).unwrap();
    w.write("x").unwrap();
    assert_eq!(text(&a.read().unwrap().1), "x");
    // a's read does not mark it read on b.
    assert_eq!(text(&b.try_read().unwrap().1), "x");
    assert!(a.try_read().is_err());
    assert!(b.try_read().is_err());
    w.write("y").unwrap();
    assert_eq!(a.try_read().unwrap().0, 2);
    assert!(a.try_read().is_err());
    assert_eq!(b.try_read().unwrap().0, 2);
}

#[test]
fn a_new_reader_sees_the_current_value() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    w.write("1").unwrap();
    w.write("2").unwrap();
    let late = t.attach_input(&reg).unwrap();
    assert_eq!(late.try_read().unwrap().0, 2);
    assert!(late.try_read().is_err());
}

#[test]
fn peek_does_not_count_as_a_read() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    let r = t.attach_input(&reg).unwrap();
    w.write("v").unwrap();
    assert_eq!(reg.peek().unwrap().0, 1);
    assert_eq!(r.try_read().unwrap().0, 1);
}

#[test]
fn a_slow_reader_sees_only_the_latest_value() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    let r = t.attach_input(&reg).unwrap();
    for i in 0..100 {
        w.write(i.to_string()).unwrap();
    }
    let (seq, item) = r.read_timeout(LONG).unwrap();
    assert_eq!((seq, text(&item)), (100, "99".into()));
}

#[test]
fn close_fails_writes_and_wakes_readers() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let t = rt.task(0).unwrap();
    let w = t.attach_output(&reg).unwrap();
    let r = t.attach_input(&reg).unwrap();
    let waiting = t.attach_input(&reg).unwrap();
    w.write("last").unwrap();
    assert_eq!(text(&waiting.read().unwrap().1), "last");
    thread::scope(|s| {
        let reader = s.spawn(|| waiting.read_timeout(LONG));
        thread::sleep(ms(20));
        reg.close().unwrap();
        assert_eq!(reader.join().unwrap().unwrap_err(), GetError::Closed);
    });
    assert_eq!(w.write("more").unwrap_err(), StmError::Closed);
    // A write the reader has not seen is still delivered after close, then Closed.
    assert_eq!(text(&r.try_read().unwrap().1), "last");
    assert_eq!(r.try_read().unwrap_err(), GetError::Closed);
}

#[test]
fn exited_task_cannot_use_its_connections() {
    let rt = Runtime::new();
    let reg = rt.register(ContainerOptions::default()).unwrap();
    let writer = rt.task(0).unwrap();
    let reader = rt.task(0).unwrap();
    let w = writer.attach_output(&reg).unwrap();
    let r = reader.attach_input(&reg).unwrap();
    let blocked = reader.attach_input(&reg).unwrap();
    thread::scope(|s| {
        let waiting = s.spawn(|| blocked.read_timeout(LONG));
        thread::sleep(ms(20));
        drop(reader);
        assert_eq!(waiting.join().unwrap().unwrap_err(), GetError::Detached);
    });
    w.write("x").unwrap();
    assert_eq!(r.try_read().unwrap_err(), GetError::Detached);
    writer.exit();
    assert_eq!(w.write("y").unwrap_err(), StmError::Detached);
}

#[test]
fn registers_are_named_and_zoned() {
    let rt = Runtime::new();
    let reg = rt
        .register(ContainerOptions::default().name("mode").zone(ZoneId(3)))
        .unwrap();
    assert_eq!(reg.name(), Some("mode"));
    assert!(matches!(rt.lookup("mode"), Some(Named::Register(_))));
    assert_eq!(
        rt.register(ContainerOptions::default().name("mode"))
            .unwrap_err(),
        StmError::NameTaken("mode".into())
    );
    // Writers must be in the register's zone.
    let t = rt.task(0).unwrap();
    assert_eq!(
        t.attach_output(&reg).unwrap_err(),
        StmError::ZoneMismatch {
            task: ZoneId::DEFAULT,
            container: ZoneId(3)
        }
    );
    let z = rt
        .task_builder()
        .zone(ZoneId(3))
        .virtual_time(0)
        .create()
        .unwrap();
    z.attach_output(&reg).unwrap().write("on").unwrap();
    assert_eq!(text(&t.attach_input(&reg).unwrap().read().unwrap().1), "on");
}

#[test]
fn providers_see_each_write_and_replay_reads_made_elsewhere() {
    use std::sync::{Arc, Mutex};
    let rt = Runtime::new();
    let r = rt.register(ContainerOptions::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    stampede_core::provider::on_write(&r, move |seq| s.lock().unwrap().push(seq)).unwrap();
    let t = rt.task(0).unwrap();
    let (w, input) = (t.attach_output(&r).unwrap(), t.attach_input(&r).unwrap());
    for v in ["a", "b", "c"] {
        w.write(v).unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);
    // Write 2 was read in another space: the next read here still takes write 3.
    stampede_core::provider::replay_read(&input, 2).unwrap();
    assert_eq!(input.try_read().unwrap().0, 3);
    // Write 3 was read elsewhere too: nothing newer is left; a number past the last
    // write is taken as the last.
    w.write("d").unwrap();
    stampede_core::provider::replay_read(&input, 99).unwrap();
    assert!(matches!(input.try_read(), Err(GetError::Unavailable(_))));
    w.write("e").unwrap();
    assert_eq!(text(&input.try_read().unwrap().1), "e");
}
