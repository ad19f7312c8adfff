//! Tests for queues: FIFO order, tickets, shared timestamps, exactly-once delivery,
//! redelivery when a getter goes away, capacity and closing.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{
    ContainerOptions, GetError, Item, PutErrorKind, Runtime, StmError, Wait, INFINITY,
};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn manual() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

fn text(item: &Item) -> String {
    item.as_str().expect("a UTF-8 item").to_owned()
}

#[test]
fn fifo_regardless_of_timestamp() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let out = p.attach_output(&q).unwrap();
    let input = w.attach_input(&q).unwrap();
    let puts: Vec<(i64, &str)> = vec![(5, "a"), (3, "b"), (9, "c"), (3, "d"), (0, "e")];
    let mut tickets = Vec::new();
    for (ts, v) in &puts {
        tickets.push(out.put(*ts, *v).unwrap());
    }
    assert_eq!(q.len(), 5);
    let unique: HashSet<u64> = tickets.iter().copied().collect();
    assert_eq!(unique.len(), tickets.len(), "tickets are unique");

    for ((ts, v), ticket) in puts.iter().zip(&tickets) {
        let got = input.try_get().unwrap();
        assert_eq!(
            (got.ts, text(&got.item), got.ticket),
            (*ts, v.to_string(), *ticket)
        );
        input.consume(got.ticket).unwrap();
    }
    assert!(q.is_empty());
    assert!(matches!(input.try_get(), Err(GetError::Unavailable(_))));
}

#[test]
fn items_may_share_a_timestamp() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let out = p.attach_output(&q).unwrap();
    let input = w.attach_input(&q).unwrap();
    for i in 0..4 {
        out.put(7, format!("part {i}")).unwrap();
    }
    let mut seen = Vec::new();
    while let Ok(got) = input.try_get() {
        assert_eq!(got.ts, 7);
        seen.push(text(&got.item));
        input.consume(got.ticket).unwrap();
    }
    assert_eq!(seen, vec!["part 0", "part 1", "part 2", "part 3"]);
    assert_eq!(q.stats().consumed, 4);
}

#[test]
fn each_item_goes_to_exactly_one_getter() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w1 = rt.task(INFINITY).unwrap();
    let w2 = rt.task(INFINITY).unwrap();
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    for i in 0..10 {
        out.put(i, i.to_string()).unwrap();
    }
    let mut got = Vec::new();
    for round in 0..5 {
        let x = a.try_get().unwrap();
        let y = b.try_get().unwrap();
        assert_eq!((x.ts, y.ts), (2 * round, 2 * round + 1));
        got.push(x.ticket);
        got.push(y.ticket);
        // Held items are not offered to anybody else.
        a.consume(x.ticket).unwrap();
    }
    assert!(matches!(a.try_get(), Err(GetError::Unavailable(_))));
    assert!(matches!(b.try_get(), Err(GetError::Unavailable(_))));
    let unique: HashSet<u64> = got.iter().copied().collect();
    assert_eq!(unique.len(), 10);
    let s = q.stats();
    assert_eq!(
        (s.puts, s.gets, s.consumed, s.held, s.waiting),
        (10, 10, 5, 5, 0)
    );
}

#[test]
fn consume_frees_the_item_and_runs_the_garbage_handler_once() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let freed = Arc::new(Mutex::new(Vec::new()));
    q.on_garbage({
        let freed = freed.clone();
        move |ts, item| freed.lock().unwrap().push((ts, text(item)))
    })
    .unwrap();
    let p = rt.task(0).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let out = p.attach_output(&q).unwrap();
    let input = w.attach_input(&q).unwrap();
    out.put(1, "one").unwrap();
    out.put(2, "two").unwrap();
    let first = input.get().unwrap();
    assert!(freed.lock().unwrap().is_empty(), "getting does not free");
    input.consume(first.ticket).unwrap();
    assert_eq!(*freed.lock().unwrap(), vec![(1, "one".to_owned())]);
    // A second consume of the same ticket is refused and frees nothing more.
    assert_eq!(
        input.consume(first.ticket).unwrap_err(),
        StmError::UnknownTicket(first.ticket)
    );
    assert_eq!(freed.lock().unwrap().len(), 1);
    assert_eq!(q.stats().consumed, 1);
}

#[test]
fn unknown_tickets_are_refused() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w1 = rt.task(INFINITY).unwrap();
    let w2 = rt.task(INFINITY).unwrap();
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    let held = out.put(1, "held").unwrap();
    let waiting = out.put(2, "waiting").unwrap();
    assert_eq!(a.get().unwrap().ticket, held);

    assert_eq!(a.consume(999).unwrap_err(), StmError::UnknownTicket(999));
    // Held by another connection.
    assert_eq!(b.consume(held).unwrap_err(), StmError::UnknownTicket(held));
    // Not gotten by anybody yet.
    assert_eq!(
        a.consume(waiting).unwrap_err(),
        StmError::UnknownTicket(waiting)
    );
    // Another connection of the same task is another connection.
    let a2 = w1.attach_input(&q).unwrap();
    assert_eq!(a2.consume(held).unwrap_err(), StmError::UnknownTicket(held));
    a.consume(held).unwrap();
    assert_eq!(q.stats().consumed, 1);
    assert_eq!(q.len(), 1);
}

#[test]
fn detach_redelivers_held_items_in_their_original_order() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w1 = rt.task(INFINITY).unwrap();
    let w2 = rt.task(INFINITY).unwrap();
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    let t1 = out.put(1, "1").unwrap();
    let t2 = out.put(2, "2").unwrap();
    let t3 = out.put(3, "3").unwrap();
    let t4 = out.put(4, "4").unwrap();
    assert_eq!(a.get().unwrap().ticket, t1);
    assert_eq!(a.get().unwrap().ticket, t2);
    let x = a.get().unwrap();
    assert_eq!(x.ticket, t3);
    a.consume(t3).unwrap(); // consumed: must not come back
    assert_eq!(w1.visibility(), 1);

    a.detach();
    assert_eq!(w1.visibility(), INFINITY);
    let s = q.stats();
    assert_eq!((s.redelivered, s.held, s.waiting), (2, 0, 3));
    let order: Vec<u64> = (0..3).map(|_| b.try_get().unwrap().ticket).collect();
    assert_eq!(order, vec![t1, t2, t4]);
    assert!(matches!(b.try_get(), Err(GetError::Unavailable(_))));
}

#[test]
fn redelivered_items_rejoin_the_waiting_items_in_ticket_order() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let (w1, w2, w3) = (
        rt.task(INFINITY).unwrap(),
        rt.task(INFINITY).unwrap(),
        rt.task(INFINITY).unwrap(),
    );
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    let c = w3.attach_input(&q).unwrap();
    let t1 = out.put(1, "1").unwrap();
    let t2 = out.put(2, "2").unwrap();
    let t3 = out.put(3, "3").unwrap();
    assert_eq!(b.get().unwrap().ticket, t1);
    assert_eq!(a.get().unwrap().ticket, t2);
    b.detach(); // t1 waits again, ahead of t3
    a.detach(); // t2 goes back between them, not in front of t1
    let order: Vec<u64> = (0..3).map(|_| c.try_get().unwrap().ticket).collect();
    assert_eq!(order, vec![t1, t2, t3]);
    assert_eq!(q.stats().redelivered, 2);
}

#[test]
fn task_exit_redelivers_held_items() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let crashing = rt.task(INFINITY).unwrap();
    let survivor = rt.task(INFINITY).unwrap();
    let a = crashing.attach_input(&q).unwrap();
    let b = survivor.attach_input(&q).unwrap();
    let ticket = out.put(5, "work").unwrap();
    assert_eq!(a.get().unwrap().ticket, ticket);
    assert!(matches!(b.try_get(), Err(GetError::Unavailable(_))));

    drop(crashing);
    let again = b.try_get().unwrap();
    assert_eq!(
        (again.ticket, again.ts, text(&again.item)),
        (ticket, 5, "work".into())
    );
    assert_eq!(q.stats().redelivered, 1);
    // The exited task's connection is detached.
    assert_eq!(a.try_get().unwrap_err(), GetError::Detached);
    assert_eq!(a.consume(ticket).unwrap_err(), StmError::Detached);
    b.consume(ticket).unwrap();
}

#[test]
fn redelivery_wakes_a_blocked_getter() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w1 = rt.task(INFINITY).unwrap();
    let w2 = rt.task(INFINITY).unwrap();
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    let ticket = out.put(1, "x").unwrap();
    a.get().unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| b.get_timeout(LONG));
        thread::sleep(ms(20));
        a.detach();
        assert_eq!(getter.join().unwrap().unwrap().ticket, ticket);
    });
}

#[test]
fn a_held_item_holds_its_getters_visibility() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let results = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    let res = w.attach_output(&results).unwrap();
    out.put(5, "job").unwrap();
    let job = input.get().unwrap();
    assert_eq!(w.visibility(), 5);
    let err = res.put(4, "too early").unwrap_err();
    assert_eq!(err.kind(), PutErrorKind::BelowVisibility { visibility: 5 });
    res.put(5, "result").unwrap();
    input.consume(job.ticket).unwrap();
    assert_eq!(w.visibility(), INFINITY);
    assert_eq!(
        res.put(6, "nothing held").unwrap_err().kind(),
        PutErrorKind::BelowVisibility {
            visibility: INFINITY
        }
    );
}

#[test]
fn invalid_timestamp_is_rejected() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    assert_eq!(
        out.put(INFINITY, "x").unwrap_err().kind(),
        PutErrorKind::InvalidTimestamp
    );
    assert!(matches!(
        rt.queue(ContainerOptions::bounded(0)),
        Err(StmError::InvalidArgument(_))
    ));
}

#[test]
fn capacity_counts_waiting_items_only() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(2)).unwrap();
    assert_eq!(q.capacity(), Some(2));
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    out.try_put(0, "0").unwrap();
    out.try_put(0, "1").unwrap();
    let err = out.try_put(0, "2").unwrap_err();
    assert!(err.is_full());
    assert_eq!(text(&err.into_item()), "2");
    assert_eq!(q.stats().full, 1);

    let start = Instant::now();
    assert!(out.put_timeout(0, "2", ms(40)).unwrap_err().is_full());
    assert!(start.elapsed() >= ms(40));
    assert_eq!(
        p.visibility(),
        0,
        "an abandoned put no longer holds visibility"
    );

    // A get moves an item from waiting to held, which makes room.
    let held = input.get().unwrap();
    out.try_put(0, "2").unwrap();
    let s = q.stats();
    assert_eq!((s.waiting, s.held, s.full), (2, 1, 2));
    input.consume(held.ticket).unwrap();
}

#[test]
fn blocked_put_completes_after_a_get() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    out.put(0, "first").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_with(1, "second", Wait::For(LONG)));
        thread::sleep(ms(20));
        assert_eq!(text(&input.get().unwrap().item), "first");
        putter.join().unwrap().unwrap();
    });
    assert_eq!(text(&input.try_get().unwrap().item), "second");
}

#[test]
fn blocking_get_returns_when_an_item_arrives() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(LONG));
        thread::sleep(ms(20));
        let ticket = out.put(3, "late").unwrap();
        let got = getter.join().unwrap().unwrap();
        assert_eq!((got.ticket, got.ts), (ticket, 3));
    });
    let start = Instant::now();
    assert!(matches!(
        input.get_timeout(ms(30)),
        Err(GetError::Timeout(_))
    ));
    assert!(start.elapsed() >= ms(30));
}

#[test]
fn close_fails_puts_drains_and_wakes_getters() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    let idle = w.attach_input(&q).unwrap();
    out.put(1, "left over").unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| {
            // Takes the left-over item, then waits for more.
            let first = idle.get_timeout(LONG);
            let second = idle.get_timeout(LONG);
            (first, second)
        });
        thread::sleep(ms(20));
        q.close().unwrap();
        let (first, second) = getter.join().unwrap();
        assert_eq!(text(&first.unwrap().item), "left over");
        assert_eq!(second.unwrap_err(), GetError::Closed);
    });
    assert_eq!(out.put(2, "x").unwrap_err().kind(), PutErrorKind::Closed);
    assert_eq!(input.try_get().unwrap_err(), GetError::Closed);
}

#[test]
fn close_wakes_a_blocked_putter() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    out.put(0, "0").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        thread::sleep(ms(20));
        q.close().unwrap();
        assert_eq!(
            putter.join().unwrap().unwrap_err().kind(),
            PutErrorKind::Closed
        );
    });
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
fn task_exit_wakes_a_blocked_getter_that_holds_nothing() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| input.get_timeout(LONG));
        thread::sleep(ms(20));
        drop(w);
        let prompt = finished_within(&getter, Duration::from_secs(2));
        if !prompt {
            q.close().unwrap(); // release the thread
        }
        let result = getter.join().unwrap();
        assert!(prompt, "the blocked get kept waiting after its task exited");
        assert_eq!(result.unwrap_err(), GetError::Detached);
    });
}

#[test]
fn task_exit_fails_a_blocked_put_at_once() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    out.put(0, "0").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        thread::sleep(ms(20));
        drop(p);
        let prompt = finished_within(&putter, Duration::from_secs(2));
        if !prompt {
            q.close().unwrap(); // release the thread
        }
        let result = putter.join().unwrap();
        assert!(prompt, "the blocked put kept waiting after its task exited");
        assert_eq!(result.unwrap_err().kind(), PutErrorKind::Detached);
    });
}

/// Long enough for a blocked get to stop spinning and park, even on a busy machine.
const PARK: Duration = Duration::from_millis(100);

/// Joins a helper thread blocked in an operation that the test has just released. A blocked
/// get re-checks the queue when its own timeout (`LONG`) ends, so a lost wake-up would only
/// make it late: fail if it is still blocked after half of that.
fn prompt<T>(h: thread::ScopedJoinHandle<'_, T>) -> T {
    assert!(
        finished_within(&h, LONG / 2),
        "the blocked operation was not woken"
    );
    h.join().unwrap()
}

/// A parked get wakes at once for a put, for a held item redelivered by another getter's
/// detach, and for its own task's exit.
#[test]
fn a_parked_get_is_woken_at_once() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w1 = rt.task(INFINITY).unwrap();
    let w2 = rt.task(INFINITY).unwrap();
    let a = w1.attach_input(&q).unwrap();
    let b = w2.attach_input(&q).unwrap();
    thread::scope(|s| {
        let getter = s.spawn(|| b.get_timeout(LONG));
        thread::sleep(PARK);
        let ticket = out.put(1, "put").unwrap();
        let got = prompt(getter).unwrap();
        assert_eq!(got.ticket, ticket);
        b.consume(ticket).unwrap();

        let ticket = out.put(2, "redelivered").unwrap();
        assert_eq!(a.get().unwrap().ticket, ticket);
        let getter = s.spawn(|| b.get_timeout(LONG));
        thread::sleep(PARK);
        a.detach();
        assert_eq!(prompt(getter).unwrap().ticket, ticket);
        b.consume(ticket).unwrap();

        let getter = s.spawn(|| b.get_timeout(LONG));
        thread::sleep(PARK);
        drop(w2);
        assert_eq!(prompt(getter).unwrap_err(), GetError::Detached);
    });
    assert!(q.is_empty());
    let s = q.stats();
    assert_eq!((s.held, s.redelivered), (0, 1));
}

#[test]
fn len_counts_waiting_items() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default().name("jobs")).unwrap();
    assert!(q.is_empty());
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let input = w.attach_input(&q).unwrap();
    out.put(1, "a").unwrap();
    out.put(1, "b").unwrap();
    assert_eq!((q.len(), q.is_empty()), (2, false));
    let held = input.get().unwrap();
    assert_eq!(q.len(), 1);
    input.consume(held.ticket).unwrap();
    input.get().unwrap();
    assert!(q.is_empty());
    assert!(format!("{q:?}").contains("jobs"));
}

/// A put blocked on a full queue gives up when its interrupt check says so, hands the item
/// back, and leaves the queue as it was.
#[test]
fn an_interrupted_put_hands_its_item_back_and_leaves_the_queue_usable() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let w = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    let input = w.attach_input(&q).unwrap();
    out.put(0, "a").unwrap();
    let stop = AtomicBool::new(false);
    let err = thread::scope(|s| {
        let blocked = s.spawn(|| {
            out.put_interruptible(1, "b", Wait::Forever, &|| stop.load(Ordering::SeqCst))
        });
        thread::sleep(ms(100));
        assert!(!blocked.is_finished(), "the put waits for space");
        stop.store(true, Ordering::SeqCst);
        blocked.join().unwrap().unwrap_err()
    });
    assert_eq!(err.kind(), PutErrorKind::Interrupted);
    assert_eq!(text(&err.into_item()), "b");
    assert_eq!(q.len(), 1);
    let got = input.get().unwrap();
    assert_eq!(text(&got.item), "a");
    input.consume(got.ticket).unwrap();
    out.put_timeout(1, "b", Duration::from_secs(10)).unwrap();
    assert_eq!(text(&input.get().unwrap().item), "b");
}
