//! Tests for channels: selectors, "gone" versus "unavailable" versus "timeout", duplicate
//! timestamps, puts in any order, bounded capacity and closing.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{
    Channel, Container, ContainerOptions, GetError, Hold, HoldCause, Item, Neighbors,
    OutputConnection, PutErrorKind, PutOptions, Runtime, Selector, StmError, Wait, ZoneId,
    INFINITY,
};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A runtime without the background collector: passes run only on demand.
fn manual() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

fn nb(below: Option<i64>, above: Option<i64>) -> Neighbors {
    Neighbors { below, above }
}

fn text(item: &Item) -> String {
    item.as_str().expect("a UTF-8 item").to_owned()
}

/// Polls `explain` until a put is pending in `zone`, and returns its term.
fn pending_put(rt: &Runtime, zone: ZoneId) -> Hold {
    let deadline = Instant::now() + LONG;
    loop {
        let report = rt.explain(zone);
        if let Some(h) = report
            .holds
            .iter()
            .find(|h| matches!(h.cause, HoldCause::PendingPut { .. }))
        {
            return h.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no put became pending:\n{report}"
        );
        thread::sleep(ms(1));
    }
}

/// With item 0 filling a bounded(1) channel, blocks a put of 1, runs `release`, and checks
/// that the put completes and 0 was reclaimed to make room for it.
fn blocked_put_completes_after(
    rt: &Runtime,
    ch: &Channel,
    out: &OutputConnection<Channel>,
    release: impl FnOnce(),
) {
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        pending_put(rt, ZoneId::DEFAULT);
        release();
        putter.join().unwrap().unwrap();
    });
    assert_eq!(ch.timestamps(), vec![1]);
}

#[test]
fn smoke() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let producer = rt.task(0).unwrap();
    let consumer = rt.task(INFINITY).unwrap();
    let input = consumer.attach_input(&ch).unwrap();
    let out = producer.attach_output(&ch).unwrap();

    let item = Item::from("hello");
    out.put(0, item.clone()).unwrap();
    let (ts, got) = input.get(Selector::Exact(0)).unwrap();
    assert_eq!(ts, 0);
    assert_eq!(text(&got), "hello");
    // Copy-in/copy-out by sharing one immutable value.
    assert!(Item::ptr_eq(&item, &got));
    assert_eq!(ch.len(), 1);
    assert!(!ch.is_empty());
    assert_eq!(ch.capacity(), None);
}

#[test]
fn exact_gets_the_same_open_item_again() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(1, "a").unwrap();
    out.put(3, "c").unwrap();

    assert_eq!(text(&input.get(Selector::Exact(3)).unwrap().1), "c");
    // Open but not consumed: still visible.
    assert_eq!(text(&input.try_get(Selector::Exact(3)).unwrap().1), "c");
    assert_eq!(text(&input.try_get(Selector::Exact(1)).unwrap().1), "a");
    let stats = ch.stats();
    assert_eq!(stats.gets, 3);
    assert_eq!(stats.open, 2);
}

#[test]
fn oldest_and_newest_skip_consumed_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let other = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 1..=5 {
        out.put(ts, ts.to_string()).unwrap();
    }
    input.consume(1).unwrap();
    input.consume(5).unwrap();

    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 2);
    assert_eq!(input.try_get(Selector::Newest).unwrap().0, 4);
    // Newest does not care whether the item is already open.
    assert_eq!(input.try_get(Selector::Newest).unwrap().0, 4);
    // Consumption is per connection: another connection of the same task still sees them.
    assert_eq!(other.try_get(Selector::Oldest).unwrap().0, 1);
    assert_eq!(other.try_get(Selector::Newest).unwrap().0, 5);
}

#[test]
fn newest_unseen_skips_stale_and_open_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 1..=5 {
        out.put(ts, ts.to_string()).unwrap();
    }

    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 5);
    // 5 is open now, so the newest item never gotten is 4.
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 4);
    out.put(6, "6").unwrap();
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 6);
    // The first get passed over 1..=4 unseen.
    assert_eq!(ch.stats().skipped, 4);

    for want in [3, 2, 1] {
        assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, want);
    }
    // Everything has been gotten: nothing unseen; the nearest available below is reported.
    assert_eq!(
        input.try_get(Selector::NewestUnseen).unwrap_err(),
        GetError::Unavailable(nb(Some(6), None))
    );
}

#[test]
fn next_unseen_streams_in_timestamp_order() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in [2, 0, 1] {
        out.put(ts, ts.to_string()).unwrap();
    }
    for want in 0..3 {
        let (ts, item) = input.try_get(Selector::NextUnseen).unwrap();
        assert_eq!((ts, text(&item)), (want, want.to_string()));
    }
    assert!(matches!(
        input.try_get(Selector::NextUnseen),
        Err(GetError::Unavailable(_))
    ));
    out.put(10, "10").unwrap();
    assert_eq!(input.try_get(Selector::NextUnseen).unwrap().0, 10);
    // An older item arriving later is not "next" any more, but is still there.
    out.put(5, "5").unwrap();
    assert_eq!(
        input.try_get(Selector::NextUnseen).unwrap_err(),
        GetError::Unavailable(nb(Some(5), None))
    );
    assert_eq!(input.try_get(Selector::Exact(5)).unwrap().0, 5);
}

#[test]
fn next_unseen_continues_after_the_last_get_of_any_selector() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in [1, 5, 6] {
        out.put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(input.get(Selector::Exact(5)).unwrap().0, 5);
    assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 6);
}

#[test]
fn failed_try_get_reports_neighbours() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();

    assert_eq!(
        input.try_get(Selector::Exact(6)).unwrap_err(),
        GetError::Unavailable(nb(None, None))
    );
    assert_eq!(
        input.try_get(Selector::Oldest).unwrap_err(),
        GetError::Unavailable(nb(None, None))
    );
    for ts in [9, 2, 5] {
        out.put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(
        input.try_get(Selector::Exact(6)).unwrap_err(),
        GetError::Unavailable(nb(Some(5), Some(9)))
    );
    assert_eq!(
        input.try_get(Selector::Exact(1)).unwrap_err(),
        GetError::Unavailable(nb(None, Some(2)))
    );
    assert_eq!(
        input.try_get(Selector::Exact(10)).unwrap_err(),
        GetError::Unavailable(nb(Some(9), None))
    );
    // Consumed items are not available to this connection, so they are no neighbours.
    input.consume(5).unwrap();
    assert_eq!(
        input.try_get(Selector::Exact(6)).unwrap_err(),
        GetError::Unavailable(nb(Some(2), Some(9)))
    );
    // NextUnseen reports around the last get.
    assert_eq!(input.try_get(Selector::NextUnseen).unwrap().0, 2);
    assert_eq!(input.try_get(Selector::NextUnseen).unwrap().0, 9);
    assert_eq!(
        input.try_get(Selector::NextUnseen).unwrap_err(),
        GetError::Unavailable(nb(Some(2), None))
    );
}

#[test]
fn timeout_reports_neighbours() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(5, "5").unwrap();
    out.put(9, "9").unwrap();

    let start = Instant::now();
    assert_eq!(
        input.get_timeout(Selector::Exact(6), ms(40)).unwrap_err(),
        GetError::Timeout(nb(Some(5), Some(9)))
    );
    assert!(start.elapsed() >= ms(40));
    assert_eq!(
        input.get_with(Selector::Exact(6), Wait::Never).unwrap_err(),
        GetError::Unavailable(nb(Some(5), Some(9)))
    );
}

#[test]
fn blocking_get_returns_when_the_item_arrives() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(Selector::Exact(7), LONG));
        thread::sleep(ms(20));
        out.put(3, "not this one").unwrap();
        out.put(7, "seven").unwrap();
        let (ts, item) = getter.join().unwrap().unwrap();
        assert_eq!((ts, text(&item)), (7, "seven".to_owned()));
    });
}

#[test]
fn consumed_item_is_gone_not_unavailable() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let other = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(1, "1").unwrap();
    input.get(Selector::Exact(1)).unwrap();
    input.consume(1).unwrap();

    assert_eq!(
        input.try_get(Selector::Exact(1)).unwrap_err(),
        GetError::Gone(1)
    );
    // A blocking get fails at once instead of waiting forever.
    assert_eq!(
        input.get_timeout(Selector::Exact(1), LONG).unwrap_err(),
        GetError::Gone(1)
    );
    // Only on that connection.
    assert_eq!(other.try_get(Selector::Exact(1)).unwrap().0, 1);
    // A timestamp that never held an item and was not consumed is merely unavailable.
    assert!(matches!(
        input.try_get(Selector::Exact(2)),
        Err(GetError::Unavailable(_))
    ));
}

#[test]
fn consume_before_arrival_and_consume_until_cover_later_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let other = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();

    input.consume(7).unwrap(); // need not be present
    input.consume_until(5).unwrap();
    for ts in [3, 5, 6, 7] {
        out.put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(
        input.try_get(Selector::Exact(3)).unwrap_err(),
        GetError::Gone(3)
    );
    assert_eq!(
        input.try_get(Selector::Exact(5)).unwrap_err(),
        GetError::Gone(5)
    );
    assert_eq!(
        input.try_get(Selector::Exact(7)).unwrap_err(),
        GetError::Gone(7)
    );
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 6);
    assert_eq!(input.try_get(Selector::Newest).unwrap().0, 6);
    assert_eq!(other.try_get(Selector::Oldest).unwrap().0, 3);
}

#[test]
fn below_the_watermark_is_gone() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..3 {
        out.put(ts, ts.to_string()).unwrap();
    }
    p.set_virtual_time(2).unwrap();
    assert_eq!(rt.collect(), 2);
    assert_eq!(ch.timestamps(), vec![2]);

    // A task at the floor attaches: nothing below its visibility is present, so nothing is
    // consumed on the connection; the reclaimed timestamps are gone because of the watermark.
    let late = rt.task(2).unwrap();
    let input = late.attach_input(&ch).unwrap();
    assert_eq!(
        input.try_get(Selector::Exact(0)).unwrap_err(),
        GetError::Gone(0)
    );
    assert_eq!(
        input.try_get(Selector::Exact(-5)).unwrap_err(),
        GetError::Gone(-5)
    );
    assert_eq!(
        input.get_timeout(Selector::Exact(1), LONG).unwrap_err(),
        GetError::Gone(1)
    );
    assert_eq!(input.try_get(Selector::Exact(2)).unwrap().0, 2);
}

#[test]
fn blocked_get_becomes_gone_when_the_watermark_passes() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    // Something newer exists, so the floor may rise past 1 (it never passes the horizon,
    // one above the newest timestamp put).
    out.put(6, "6").unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(Selector::Exact(1), LONG));
        thread::sleep(ms(20));
        p.set_virtual_time(5).unwrap();
        assert_eq!(rt.collect(), 5);
        assert_eq!(getter.join().unwrap().unwrap_err(), GetError::Gone(1));
    });
}

#[test]
fn refcounted_item_is_gone_for_everyone_once_reclaimed() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let a = c.attach_input(&ch).unwrap();
    let b = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put_with(4, "once", PutOptions::default().consumers(1))
        .unwrap();
    a.get(Selector::Exact(4)).unwrap();
    a.consume(4).unwrap();
    assert!(ch.is_empty());
    // b never consumed it, but it was reclaimed by its count: gone, not unavailable.
    assert_eq!(
        b.try_get(Selector::Exact(4)).unwrap_err(),
        GetError::Gone(4)
    );
    // And its timestamp cannot be reused.
    let err = out.put(4, "again").unwrap_err();
    assert_eq!(err.kind(), PutErrorKind::DuplicateTimestamp);
}

#[test]
fn duplicate_timestamp_hands_the_item_back() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(3, "first").unwrap();
    let second = Item::from("second");
    let err = out.put(3, second.clone()).unwrap_err();
    assert_eq!(err.kind(), PutErrorKind::DuplicateTimestamp);
    assert_eq!(err.timestamp(), 3);
    assert!(!err.is_full());
    assert!(err.to_string().contains('3'));
    assert!(Item::ptr_eq(&err.into_item(), &second));
    assert_eq!(text(&input.get(Selector::Exact(3)).unwrap().1), "first");

    // Consumed but not reclaimed: still a duplicate.
    input.consume(3).unwrap();
    assert_eq!(
        out.try_put(3, "third").unwrap_err().kind(),
        PutErrorKind::DuplicateTimestamp
    );
    assert_eq!(ch.stats().puts, 1);
}

#[test]
fn puts_in_any_order() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(5)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in [5, 1, 3, 2, 4] {
        out.try_put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(ch.timestamps(), vec![1, 2, 3, 4, 5]);
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 1);
    assert_eq!(input.try_get(Selector::Newest).unwrap().0, 5);
}

#[test]
fn invalid_puts_are_rejected() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    assert_eq!(
        out.put(INFINITY, "x").unwrap_err().kind(),
        PutErrorKind::InvalidTimestamp
    );
    assert_eq!(
        out.put_with(1, "x", PutOptions::default().consumers(0))
            .unwrap_err()
            .kind(),
        PutErrorKind::ZeroConsumers
    );
    assert!(ch.is_empty());
    assert_eq!(ch.stats().puts, 0);
}

#[test]
fn zero_capacity_is_rejected() {
    let rt = manual();
    assert!(matches!(
        rt.channel(ContainerOptions::bounded(0)),
        Err(StmError::InvalidArgument(_))
    ));
}

#[test]
fn names_are_unique_and_looked_up() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::bounded(3).name("video/frames"))
        .unwrap();
    assert_eq!(ch.name(), Some("video/frames"));
    assert_eq!(ch.capacity(), Some(3));
    assert_eq!(
        rt.channel(ContainerOptions::default().name("video/frames"))
            .unwrap_err(),
        StmError::NameTaken("video/frames".into())
    );
    let found = rt.lookup_channel("video/frames", Duration::ZERO).unwrap();
    assert_eq!(found.name(), Some("video/frames"));
    assert_eq!(rt.names(), vec!["video/frames".to_owned()]);
    assert_eq!(
        rt.lookup_channel("nothing", Duration::ZERO).unwrap_err(),
        StmError::NotFound("nothing".into())
    );

    // A name is free again once its container is gone.
    drop((ch, found));
    assert!(rt.names().is_empty());
    rt.channel(ContainerOptions::default().name("video/frames"))
        .unwrap();
}

#[test]
fn try_put_into_a_full_channel_fails_with_full() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(2)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let _input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.try_put(0, "0").unwrap();
    out.try_put(1, "1").unwrap();
    let item = Item::from("2");
    let err = out.try_put(2, item.clone()).unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.kind(), PutErrorKind::Full);
    assert!(Item::ptr_eq(&err.into_item(), &item));
    assert_eq!(ch.len(), 2);
    assert_eq!(ch.stats().full, 1);
    assert_eq!(p.visibility(), 0);
}

#[test]
fn put_timeout_into_a_full_channel_fails_with_full() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let _input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    p.set_virtual_time(1).unwrap();

    let start = Instant::now();
    let err = out.put_timeout(5, "5", ms(50)).unwrap_err();
    assert!(start.elapsed() >= ms(50));
    assert_eq!(err.kind(), PutErrorKind::Full);
    assert_eq!(ch.stats().full, 1);
    assert_eq!(ch.timestamps(), vec![0]);
    // The abandoned put no longer counts in the task's visibility or the watermark.
    assert_eq!(p.visibility(), 1);
    assert!(!rt
        .explain(ZoneId::DEFAULT)
        .holds
        .iter()
        .any(|h| matches!(h.cause, HoldCause::PendingPut { .. })));
    let err = out
        .put_with(5, "5", PutOptions::default().wait(Wait::For(ms(1))))
        .unwrap_err();
    assert!(err.is_full());
}

#[test]
fn blocking_put_completes_when_gc_frees_space() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(2)).unwrap();
    let freed = Arc::new(Mutex::new(Vec::new()));
    ch.on_garbage({
        let freed = freed.clone();
        move |ts, _| freed.lock().unwrap().push(ts)
    })
    .unwrap();
    let p = rt
        .task_builder()
        .name("producer")
        .virtual_time(0)
        .create()
        .unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    out.put(1, "1").unwrap();
    p.set_virtual_time(2).unwrap();
    input.get(Selector::Oldest).unwrap();

    thread::scope(|s| {
        let putter = s.spawn(|| out.put(2, "2"));
        let hold = pending_put(&rt, ZoneId::DEFAULT);
        assert_eq!(hold.ts, 2);
        assert!(matches!(
            &hold.cause,
            HoldCause::PendingPut { task, container, .. } if *task == p.id() && *container == ch.id()
        ));
        assert!(!putter.is_finished());
        assert_eq!(ch.len(), 2);

        // The consumer lets item 0 go; the watermark rises to 1 and frees a slot.
        input.consume(0).unwrap();
        putter.join().unwrap().unwrap();
    });
    assert_eq!(ch.timestamps(), vec![1, 2]);
    assert_eq!(*freed.lock().unwrap(), vec![0]);
    assert_eq!(p.visibility(), 2);
}

#[test]
fn close_fails_puts_and_drains_then_reports_closed() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(1, "1").unwrap();
    out.put(2, "2").unwrap();
    assert!(!ch.is_closed());
    ch.close().unwrap();
    assert!(ch.is_closed());

    let err = out.put(3, "3").unwrap_err();
    assert_eq!(err.kind(), PutErrorKind::Closed);
    assert_eq!(text(&err.into_item()), "3");

    assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 1);
    assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 2);
    assert_eq!(
        input.get(Selector::NextUnseen).unwrap_err(),
        GetError::Closed
    );
    assert_eq!(
        input.try_get(Selector::Exact(9)).unwrap_err(),
        GetError::Closed
    );
    // Remaining items can still be read by timestamp.
    assert_eq!(input.try_get(Selector::Exact(1)).unwrap().0, 1);
    input.consume_until(2).unwrap();
    assert_eq!(input.get(Selector::Oldest).unwrap_err(), GetError::Closed);
}

#[test]
fn close_wakes_a_blocked_getter() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(Selector::NextUnseen, LONG));
        thread::sleep(ms(20));
        ch.close().unwrap();
        assert_eq!(getter.join().unwrap().unwrap_err(), GetError::Closed);
    });
}

#[test]
fn close_wakes_a_blocked_putter() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let _input = c.attach_input(&ch).unwrap();
    out.put(0, "0").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        pending_put(&rt, ZoneId::DEFAULT);
        ch.close().unwrap();
        assert_eq!(
            putter.join().unwrap().unwrap_err().kind(),
            PutErrorKind::Closed
        );
    });
    assert_eq!(p.visibility(), 0);
}

#[test]
fn connections_of_an_exited_task_are_detached() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    assert_eq!(ch.stats().connections, 1);

    let blocked = c.attach_input(&ch).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| blocked.get_timeout(Selector::Exact(9), LONG));
        thread::sleep(ms(20));
        drop(c);
        assert_eq!(getter.join().unwrap().unwrap_err(), GetError::Detached);
    });
    assert_eq!(ch.stats().connections, 0);
    assert_eq!(
        input.try_get(Selector::Oldest).unwrap_err(),
        GetError::Detached
    );
    assert_eq!(input.consume(0).unwrap_err(), StmError::Detached);
    assert_eq!(input.consume_until(0).unwrap_err(), StmError::Detached);

    p.exit();
    assert_eq!(out.put(1, "1").unwrap_err().kind(), PutErrorKind::Detached);
}

#[test]
fn detach_closes_open_items_and_releases_visibility() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(4, "4").unwrap();
    input.get(Selector::Exact(4)).unwrap();
    assert_eq!(c.visibility(), 4);
    assert_eq!(ch.stats().open, 1);
    input.detach();
    assert_eq!(c.visibility(), INFINITY);
    let stats = ch.stats();
    assert_eq!((stats.open, stats.connections), (0, 0));
}

#[test]
fn stats_count_operations() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let a = c.attach_input(&ch).unwrap();
    let b = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..4 {
        out.put(ts, ts.to_string()).unwrap();
    }
    a.get(Selector::Exact(0)).unwrap();
    a.get(Selector::Exact(1)).unwrap();
    b.get(Selector::Exact(1)).unwrap();
    let _ = b.try_get(Selector::Exact(9));
    let s = ch.stats();
    assert_eq!(s.items, 4);
    assert_eq!(s.connections, 2);
    assert_eq!(s.open, 3);
    assert_eq!(s.puts, 4);
    assert_eq!(s.gets, 3);
    assert_eq!(s.reclaimed, 0);
    a.consume_until(3).unwrap();
    b.consume_until(3).unwrap();
    p.set_virtual_time(INFINITY).unwrap();
    rt.collect();
    let s = ch.stats();
    assert_eq!((s.items, s.open, s.reclaimed), (0, 0, 4));
}

/// Waits up to `limit` for a helper thread to finish; `limit` is generous, the operation
/// under test is expected to return at once.
fn finished_within<T>(h: &thread::ScopedJoinHandle<'_, T>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(ms(1));
    }
    true
}

#[test]
fn exact_infinity_is_gone() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    assert_eq!(
        input.try_get(Selector::Exact(INFINITY)).unwrap_err(),
        GetError::Gone(INFINITY)
    );
    assert_eq!(
        input
            .get_timeout(Selector::Exact(INFINITY), ms(100))
            .unwrap_err(),
        GetError::Gone(INFINITY)
    );
}

#[test]
fn task_exit_fails_a_blocked_put_at_once() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let _input = c.attach_input(&ch).unwrap(); // holds item 0: no space will come
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        pending_put(&rt, ZoneId::DEFAULT);
        drop(p);
        let prompt = finished_within(&putter, Duration::from_secs(2));
        if !prompt {
            ch.close().unwrap(); // release the thread
        }
        let result = putter.join().unwrap();
        assert!(prompt, "the blocked put kept waiting after its task exited");
        assert_eq!(result.unwrap_err().kind(), PutErrorKind::Detached);
    });
}

#[test]
fn containers_have_unique_ids_and_share_one_name_space() {
    use stampede_core::Named;
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default().name("c")).unwrap();
    let q = rt.queue(ContainerOptions::default().name("q")).unwrap();
    let reg = rt.register(ContainerOptions::default().name("r")).unwrap();
    let anonymous = rt.channel(ContainerOptions::default()).unwrap();
    let ids = [ch.id(), q.id(), reg.id(), anonymous.id()];
    for (i, a) in ids.iter().enumerate() {
        assert!(!ids[i + 1..].contains(a), "container ids repeat: {ids:?}");
    }
    assert_eq!(anonymous.name(), None);
    assert_eq!(q.name(), Some("q"));
    assert!(matches!(rt.lookup("q"), Some(Named::Queue(found)) if found.id() == q.id()));
    assert!(matches!(rt.lookup("c"), Some(Named::Channel(found)) if found.id() == ch.id()));
    assert!(matches!(rt.lookup("r"), Some(Named::Register(found)) if found.id() == reg.id()));
    // A queue is not a channel, and every kind of container shares one name space.
    assert!(matches!(
        rt.lookup_channel("q", Duration::ZERO),
        Err(StmError::WrongKind {
            is: stampede_core::Kind::Queue,
            ..
        })
    ));
    assert_eq!(
        rt.queue(ContainerOptions::default().name("c")).unwrap_err(),
        StmError::NameTaken("c".into())
    );
    assert_eq!(rt.names(), vec!["c", "q", "r"]);
}

/// The slot of a full bounded channel is held only by a reader's unconsumed item; with no
/// background collector, the reader going away must run the pass that lets the put in.
#[test]
fn blocked_put_completes_when_the_holding_reader_detaches() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    p.set_virtual_time(1).unwrap();
    blocked_put_completes_after(&rt, &ch, &out, || input.detach());
}

/// Here a task without connections holds the watermark by its virtual time: its exit must
/// run the pass.
#[test]
fn blocked_put_completes_when_the_holding_task_exits() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let slow = rt.task(0).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    p.set_virtual_time(1).unwrap();
    blocked_put_completes_after(&rt, &ch, &out, || slow.exit());
}

/// The producer stays at virtual time 0, so the watermark frees nothing: only the item's
/// reference count can make room, and reaching it must wake the blocked put.
#[test]
fn blocked_put_completes_when_a_counted_item_is_consumed() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put_with(0, "0", PutOptions::default().consumers(1))
        .unwrap();
    blocked_put_completes_after(&rt, &ch, &out, || {
        input.get(Selector::Exact(0)).unwrap();
        input.consume(0).unwrap();
    });
}

#[test]
fn a_channel_accepts_64_input_connections_and_reuses_freed_places() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let readers = rt.task(0).unwrap();
    let mut inputs: Vec<_> = (0..64)
        .map(|_| readers.attach_input(&ch).unwrap())
        .collect();
    assert_eq!(
        readers.attach_input(&ch).unwrap_err(),
        StmError::TooManyConnections(64)
    );
    // A freed place starts clean: the new connection sees nothing consumed by the old one.
    out.put(0, "x").unwrap();
    inputs[5].get(Selector::Exact(0)).unwrap();
    inputs[5].consume(0).unwrap();
    drop(inputs.remove(5));
    let fresh = readers.attach_input(&ch).unwrap();
    assert_eq!(fresh.try_get(Selector::Oldest).unwrap().0, 0);
    assert_eq!(inputs[0].try_get(Selector::Oldest).unwrap().0, 0);
}

/// `NewestUnseen` counts each item it passes over once, when it first passes over it.
#[test]
fn newest_unseen_counts_each_skipped_item_once() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in [10, 20, 30] {
        out.put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 30);
    assert_eq!(ch.stats().skipped, 2, "10 and 20");
    // 30 is open: the newest unseen is 20, and nothing is passed over.
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 20);
    assert_eq!(ch.stats().skipped, 2);
    // 40 passes over 10 again, which was counted already.
    out.put(40, "40").unwrap();
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 40);
    assert_eq!(ch.stats().skipped, 2);
    // Consumed items are never counted.
    out.put(50, "50").unwrap();
    out.put(60, "60").unwrap();
    input.consume(50).unwrap();
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 60);
    assert_eq!(ch.stats().skipped, 2);
    // Other selectors never count.
    out.put(70, "70").unwrap();
    out.put(80, "80").unwrap();
    assert_eq!(input.try_get(Selector::Newest).unwrap().0, 80);
    assert_eq!(ch.stats().skipped, 2);
}

/// Puts come in any order. 20 arrives after a `NewestUnseen` get returned 30, and the next
/// such get (of 40) passes over it unseen; the consumer then lets everything up to 40 go,
/// so 20 was dropped without ever being seen, yet `skipped` never counts it: the get only
/// counts items above the newest item it returned before (`skip_mark`), assuming that
/// everything below was counted or seen already.
#[test]
fn newest_unseen_counts_a_late_item_it_passes_over() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(10, "10").unwrap();
    out.put(30, "30").unwrap();
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 30);
    assert_eq!(ch.stats().skipped, 1, "10");
    out.put(20, "late").unwrap();
    out.put(40, "40").unwrap();
    assert_eq!(input.try_get(Selector::NewestUnseen).unwrap().0, 40);
    input.consume_until(40).unwrap();
    assert_eq!(
        ch.stats().skipped,
        2,
        "20 was passed over unseen and dropped"
    );
}

/// Joins a helper thread blocked in an operation that the test has just released. A blocked
/// get or put re-checks its condition when its own timeout (`LONG`) ends, so a lost wake-up
/// would only make it late: fail if it is still blocked after half of that.
fn prompt<T>(h: thread::ScopedJoinHandle<'_, T>) -> T {
    assert!(
        finished_within(&h, LONG / 2),
        "the blocked operation was not woken"
    );
    h.join().unwrap()
}

/// Long enough for a blocked get to stop spinning and park, even on a busy machine.
const PARK: Duration = Duration::from_millis(100);

/// Every kind of put wakes a get parked on the channel: a put above every timestamp so far
/// (which may bypass the channel's state lock), a put out of order, and a put that is
/// reclaimed at once because its reference count is already reached (the parked `Exact`
/// get must then learn that the timestamp is gone).
#[test]
fn every_put_wakes_a_parked_get_at_once() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let early = c.attach_input(&ch).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(Selector::NextUnseen, LONG));
        thread::sleep(PARK);
        out.put(10, "in order").unwrap();
        assert_eq!(prompt(getter).unwrap().0, 10);

        let getter = s.spawn(|| input.get_timeout(Selector::Exact(5), LONG));
        thread::sleep(PARK);
        out.put(5, "out of order").unwrap();
        assert_eq!(prompt(getter).unwrap().0, 5);

        early.consume(4).unwrap();
        let getter = s.spawn(|| input.get_timeout(Selector::Exact(4), LONG));
        thread::sleep(PARK);
        out.put_with(4, "counted", PutOptions::default().consumers(1))
            .unwrap();
        assert_eq!(prompt(getter).unwrap_err(), GetError::Gone(4));
    });
    assert_eq!(ch.timestamps(), vec![5, 10]);
}

/// Puts that take the channel's slower path (out of order, with a reference count, into a
/// bounded channel) count in the statistics like the others, and an item reclaimed at its
/// put counts as reclaimed, in the channel and in the zone.
#[test]
fn stats_count_puts_of_every_kind() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let bounded = rt.channel(ContainerOptions::bounded(4)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(5, "in order").unwrap();
    out.put(3, "out of order").unwrap();
    out.put_with(6, "counted", PutOptions::default().consumers(2))
        .unwrap();
    input.consume(1).unwrap();
    out.put_with(1, "reclaimed at once", PutOptions::default().consumers(1))
        .unwrap();
    let s = ch.stats();
    assert_eq!((s.puts, s.items, s.reclaimed), (4, 3, 1));
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 1);

    let bout = p.attach_output(&bounded).unwrap();
    for ts in [2, 1, 3] {
        bout.try_put(ts, ts.to_string()).unwrap();
    }
    assert_eq!(bounded.stats().puts, 3);
}

/// A get parked for `Exact(t)` learns at once when `t` can no longer appear for it (its
/// connection consumed `t`, or the watermark passed it) and when its task exits.
#[test]
fn a_parked_get_learns_at_once_that_it_can_never_succeed() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let doomed = rt.task(INFINITY).unwrap();
    let doomed_input = doomed.attach_input(&ch).unwrap();
    out.put(9, "9").unwrap(); // lets the floor rise past what the gets wait for
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(Selector::Exact(5), LONG));
        thread::sleep(PARK);
        input.consume(5).unwrap();
        assert_eq!(prompt(getter).unwrap_err(), GetError::Gone(5));

        let getter = s.spawn(|| input.get_timeout(Selector::Exact(3), LONG));
        thread::sleep(PARK);
        p.set_virtual_time(4).unwrap();
        assert_eq!(rt.collect(), 4);
        assert_eq!(prompt(getter).unwrap_err(), GetError::Gone(3));

        let getter = s.spawn(|| doomed_input.get_timeout(Selector::Exact(7), LONG));
        thread::sleep(PARK);
        drop(doomed);
        assert_eq!(prompt(getter).unwrap_err(), GetError::Detached);
    });
}

/// Item states are per connection: however one connection consumes (one item, or up to a
/// timestamp), the others keep theirs.
#[test]
fn consuming_on_one_connection_leaves_the_others_alone() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let a = c.attach_input(&ch).unwrap();
    let b = c.attach_input(&ch).unwrap();
    let fresh = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 1..=6 {
        out.put(ts, ts.to_string()).unwrap();
    }
    a.consume(3).unwrap();
    b.get(Selector::Exact(2)).unwrap();
    b.consume_until(4).unwrap();
    a.consume_until(1).unwrap();
    b.consume(6).unwrap();

    assert_eq!(
        a.try_get(Selector::Exact(3)).unwrap_err(),
        GetError::Gone(3)
    );
    assert_eq!(a.try_get(Selector::Exact(6)).unwrap().0, 6);
    assert_eq!(a.try_get(Selector::Oldest).unwrap().0, 2);
    assert_eq!(
        b.try_get(Selector::Exact(2)).unwrap_err(),
        GetError::Gone(2)
    );
    assert_eq!(b.try_get(Selector::Oldest).unwrap().0, 5);
    assert_eq!(b.try_get(Selector::Newest).unwrap().0, 5);
    assert_eq!(fresh.try_get(Selector::Oldest).unwrap().0, 1);
    assert_eq!(fresh.try_get(Selector::Newest).unwrap().0, 6);
    // The oldest item unconsumed on some connection (1, on `fresh`) holds the watermark.
    p.set_virtual_time(INFINITY).unwrap();
    assert_eq!(rt.collect(), 1);
    drop(fresh);
    assert_eq!(rt.collect(), 2);
    assert_eq!(ch.timestamps(), vec![2, 3, 4, 5, 6]);
}

#[test]
fn debug_output_identifies_containers() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::default().name("video/frames"))
        .unwrap();
    let reg = rt
        .register(ContainerOptions::default().name("mode"))
        .unwrap();
    assert!(format!("{ch:?}").contains("video/frames"));
    assert!(format!("{reg:?}").contains("mode"));
}

/// A put blocked on a full channel asks its interrupt check while it waits, keeps its
/// pending term until it gives up, then hands the item back and leaves nothing behind.
#[test]
fn an_interrupted_put_hands_its_item_back_and_leaves_the_channel_usable() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let input = c.attach_input(&ch).unwrap();
    out.put(0, "a").unwrap();
    let stop = AtomicBool::new(false);
    let asked = AtomicUsize::new(0);
    let err = thread::scope(|s| {
        let blocked = s.spawn(|| {
            out.put_interruptible(1, "b", PutOptions::default(), &|| {
                asked.fetch_add(1, Ordering::SeqCst);
                stop.load(Ordering::SeqCst)
            })
        });
        pending_put(&rt, ZoneId::DEFAULT); // waits until the put is a watermark term
        assert!(!blocked.is_finished());
        stop.store(true, Ordering::SeqCst);
        blocked.join().unwrap().unwrap_err()
    });
    assert_eq!(err.kind(), PutErrorKind::Interrupted);
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert_eq!(text(&err.into_item()), "b");
    assert!(asked.load(Ordering::SeqCst) >= 1);
    assert!(!rt
        .explain(ZoneId::DEFAULT)
        .holds
        .iter()
        .any(|h| matches!(h.cause, HoldCause::PendingPut { .. })));
    assert_eq!(ch.timestamps(), vec![0]);
    // The channel works as before.
    input.get(Selector::Exact(0)).unwrap();
    input.consume(0).unwrap();
    p.set_virtual_time(1).unwrap();
    out.put_timeout(1, "b", LONG).unwrap();
    assert_eq!(ch.timestamps(), vec![1]);
    // A put that need not wait never asks.
    let never = AtomicBool::new(false);
    let ch2 = rt.channel(ContainerOptions::bounded(4)).unwrap();
    p.attach_output(&ch2)
        .unwrap()
        .put_interruptible(1, "c", PutOptions::default(), &|| {
            never.store(true, Ordering::SeqCst);
            true
        })
        .unwrap();
    assert!(!never.load(Ordering::SeqCst));
}
