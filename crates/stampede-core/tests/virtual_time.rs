//! Tests for virtual time: the four rules and their typed errors, child tasks, and root
//! tasks against their zone's floor.

use stampede_core::{
    ContainerOptions, GetError, Item, PutErrorKind, PutOptions, Runtime, Selector, StmError,
    ZoneId, INFINITY,
};

fn manual() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

fn below(requested: i64, visibility: i64) -> StmError {
    StmError::BelowVisibility {
        requested,
        visibility,
    }
}

#[test]
fn tasks_report_their_identity_and_times() {
    let rt = manual();
    let a = rt
        .task_builder()
        .name("digitizer")
        .virtual_time(3)
        .create()
        .unwrap();
    let b = rt.task(INFINITY).unwrap();
    assert_ne!(a.id(), b.id());
    assert_eq!(a.name(), "digitizer");
    assert!(!b.name().is_empty());
    assert_eq!((a.virtual_time(), a.visibility()), (3, 3));
    assert_eq!((b.virtual_time(), b.visibility()), (INFINITY, INFINITY));
    assert_eq!(a.zone(), ZoneId::DEFAULT);
    // The default virtual time of a built task is INFINITY.
    let c = rt.task_builder().create().unwrap();
    assert_eq!(c.virtual_time(), INFINITY);
    let _ = c.runtime().channel(ContainerOptions::default()).unwrap();
}

#[test]
fn rule_1_put_below_visibility_is_refused() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let t = rt.task(5).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let qout = t.attach_output(&q).unwrap();

    let item = Item::from("early");
    let err = out.put(4, item.clone()).unwrap_err();
    assert_eq!(err.kind(), PutErrorKind::BelowVisibility { visibility: 5 });
    assert_eq!(err.timestamp(), 4);
    assert!(Item::ptr_eq(&err.into_item(), &item));
    assert_eq!(
        qout.put(4, "early").unwrap_err().kind(),
        PutErrorKind::BelowVisibility { visibility: 5 }
    );
    out.put(5, "on time").unwrap();
    qout.put(5, "on time").unwrap();

    t.set_virtual_time(10).unwrap();
    assert_eq!(
        out.put(7, "late").unwrap_err().kind(),
        PutErrorKind::BelowVisibility { visibility: 10 }
    );
    assert_eq!(ch.timestamps(), vec![5]);
}

#[test]
fn rule_1_open_items_lower_visibility() {
    let rt = manual();
    let frames = rt.channel(ContainerOptions::default()).unwrap();
    let tracks = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let tracker = rt.task(20).unwrap();
    let input = tracker.attach_input(&frames).unwrap();
    let out = tracker.attach_output(&tracks).unwrap();
    let frames_out = src.attach_output(&frames).unwrap();
    frames_out.put(3, "frame").unwrap();

    input.get(Selector::Exact(3)).unwrap();
    assert_eq!(tracker.virtual_time(), 20);
    assert_eq!(tracker.visibility(), 3);
    assert_eq!(
        out.put(2, "x").unwrap_err().kind(),
        PutErrorKind::BelowVisibility { visibility: 3 }
    );
    // A result inherits its input's timestamp.
    out.put(3, "track").unwrap();
    input.consume(3).unwrap();
    assert_eq!(tracker.visibility(), 20);
    assert_eq!(
        out.put(4, "x").unwrap_err().kind(),
        PutErrorKind::BelowVisibility { visibility: 20 }
    );
}

#[test]
fn rule_2_child_starts_at_or_above_parent_visibility() {
    let rt = manual();
    let parent = rt.task(5).unwrap();
    assert_eq!(
        parent.child().virtual_time(4).create().unwrap_err(),
        below(4, 5)
    );
    let child = parent.child().name("kid").virtual_time(5).create().unwrap();
    assert_eq!((child.name(), child.virtual_time()), ("kid", 5));
    assert_eq!(child.zone(), parent.zone());
    assert_eq!(parent.child().create().unwrap().virtual_time(), INFINITY);

    // Open items count in the parent's visibility.
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let other = rt.task(0).unwrap();
    let input = parent.attach_input(&ch).unwrap();
    other.attach_output(&ch).unwrap().put(7, "x").unwrap();
    parent.set_virtual_time(10).unwrap();
    input.get(Selector::Exact(7)).unwrap();
    assert_eq!(parent.visibility(), 7);
    assert_eq!(
        parent.child().virtual_time(6).create().unwrap_err(),
        below(6, 7)
    );
    parent.child().virtual_time(7).create().unwrap();

    // A spawned child obeys the same rule.
    assert_eq!(
        parent.child().virtual_time(1).spawn(|_| ()).unwrap_err(),
        below(1, 7)
    );
    let h = parent
        .child()
        .name("worker")
        .virtual_time(8)
        .spawn(|t| {
            (
                t.virtual_time(),
                std::thread::current().name().map(String::from),
            )
        })
        .unwrap();
    assert_eq!(h.join().unwrap(), (8, Some("worker".to_owned())));
}

#[test]
fn rule_2_child_in_another_zone_starts_at_that_zones_floor() {
    let rt = manual();
    let parent = rt.task(100).unwrap();
    // Another zone's time base is unrelated to the parent's.
    let child = parent
        .child()
        .zone(ZoneId(7))
        .virtual_time(0)
        .create()
        .unwrap();
    assert_eq!(child.zone(), ZoneId(7));
    assert_eq!(child.virtual_time(), 0);

    // Raise zone 7's floor to 5; a child there must start at or above it.
    let ch = rt
        .channel(ContainerOptions::default().zone(ZoneId(7)))
        .unwrap();
    child.attach_output(&ch).unwrap().put(10, "x").unwrap();
    child.set_virtual_time(5).unwrap();
    assert_eq!(rt.collect_zone(ZoneId(7)), 5);
    assert_eq!(
        parent
            .child()
            .zone(ZoneId(7))
            .virtual_time(4)
            .create()
            .unwrap_err(),
        below(4, 5)
    );
    parent
        .child()
        .zone(ZoneId(7))
        .virtual_time(5)
        .create()
        .unwrap();
}

#[test]
fn rule_3_attach_consumes_items_present_below_visibility() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    for ts in [3, 5, 7] {
        out.put(ts, ts.to_string()).unwrap();
    }
    let late = rt.task(5).unwrap();
    let input = late.attach_input(&ch).unwrap();
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 5);
    assert_eq!(
        input.try_get(Selector::Exact(3)).unwrap_err(),
        GetError::Gone(3)
    );
    assert_eq!(input.try_get(Selector::Exact(7)).unwrap().0, 7);
}

#[test]
fn rule_3_a_task_at_infinity_sees_only_later_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    out.put(1, "before").unwrap();
    let sink = rt.task(INFINITY).unwrap();
    let input = sink.attach_input(&ch).unwrap();
    assert_eq!(
        input.try_get(Selector::Exact(1)).unwrap_err(),
        GetError::Gone(1)
    );
    assert!(matches!(
        input.try_get(Selector::Oldest),
        Err(GetError::Unavailable(_))
    ));
    out.put(2, "after").unwrap();
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 2);
}

#[test]
fn rule_3_uses_visibility_including_open_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    let t = rt.task(INFINITY).unwrap();
    let a = t.attach_input(&ch).unwrap();
    for ts in [2, 4, 6] {
        out.put(ts, ts.to_string()).unwrap();
    }
    a.get(Selector::Exact(4)).unwrap();
    assert_eq!(t.visibility(), 4);
    let b = t.attach_input(&ch).unwrap();
    assert_eq!(
        b.try_get(Selector::Exact(2)).unwrap_err(),
        GetError::Gone(2)
    );
    assert_eq!(b.try_get(Selector::Oldest).unwrap().0, 4);
}

#[test]
fn rule_3_marking_is_not_a_consume_for_reference_counts() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    let reader = rt.task(INFINITY).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    out.put_with(3, "x", PutOptions::default().consumers(1))
        .unwrap();
    // The late connection could never have read 3, so attaching does not count for it.
    let late = rt.task(5).unwrap();
    let late_input = late.attach_input(&ch).unwrap();
    assert_eq!(
        late_input.try_get(Selector::Exact(3)).unwrap_err(),
        GetError::Gone(3)
    );
    assert_eq!(ch.timestamps(), vec![3]);
    assert_eq!(ch.stats().reclaimed, 0);
    // The one real consume does.
    input.consume(3).unwrap();
    assert!(ch.is_empty());
    assert_eq!(ch.stats().reclaimed, 1);
}

#[test]
fn rule_3_across_zones_uses_the_containers_floor() {
    let rt = manual();
    let audio = rt
        .channel(ContainerOptions::default().zone(ZoneId(1)))
        .unwrap();
    let mic = rt
        .task_builder()
        .zone(ZoneId(1))
        .virtual_time(0)
        .create()
        .unwrap();
    let out = mic.attach_output(&audio).unwrap();
    out.put(3, "sample").unwrap();
    // A reader in the default zone at INFINITY: timestamps of zone 1 are not comparable to
    // its visibility, so nothing present is consumed on attach.
    let reader = rt.task(INFINITY).unwrap();
    let input = reader.attach_input(&audio).unwrap();
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 3);
    // And the item does not lower the reader's visibility in its own zone.
    assert_eq!(reader.visibility(), INFINITY);
}

#[test]
fn rule_4_virtual_time_never_below_visibility() {
    let rt = manual();
    let t = rt.task(5).unwrap();
    assert_eq!(t.set_virtual_time(4).unwrap_err(), below(4, 5));
    t.set_virtual_time(5).unwrap();
    t.set_virtual_time(9).unwrap();
    assert_eq!(t.set_virtual_time(8).unwrap_err(), below(8, 9));
    assert_eq!(t.virtual_time(), 9);

    // With an open item, virtual time may go down, but not below the item.
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let input = t.attach_input(&ch).unwrap();
    src.attach_output(&ch).unwrap().put(6, "x").unwrap();
    input.get(Selector::Exact(6)).unwrap();
    assert_eq!(t.visibility(), 6);
    assert_eq!(t.set_virtual_time(5).unwrap_err(), below(5, 6));
    t.set_virtual_time(6).unwrap();
    assert_eq!(t.virtual_time(), 6);
    t.set_virtual_time(INFINITY).unwrap();
    assert_eq!(t.visibility(), 6);
    input.consume(6).unwrap();
    assert_eq!(t.visibility(), INFINITY);
    let msg = below(5, 6).to_string();
    assert!(msg.contains('5') && msg.contains('6'), "{msg}");
}

#[test]
fn root_tasks_start_at_or_above_the_zone_floor() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    for ts in 0..20 {
        out.put(ts, ts.to_string()).unwrap();
    }
    src.set_virtual_time(10).unwrap();
    assert_eq!(rt.collect(), 10);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 10);

    assert_eq!(rt.task(5).unwrap_err(), below(5, 10));
    assert!(rt.spawn(9, |_| ()).is_err());
    assert_eq!(rt.task(10).unwrap().virtual_time(), 10);
    // Other zones have their own floor.
    rt.task_builder()
        .zone(ZoneId(1))
        .virtual_time(5)
        .create()
        .unwrap();
    // A child of a task at the floor cannot go below it either.
    let at_floor = rt.task(10).unwrap();
    assert_eq!(
        at_floor.child().virtual_time(9).create().unwrap_err(),
        below(9, 10)
    );
}

#[test]
fn the_floor_stops_one_above_the_newest_put() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    src.attach_output(&ch).unwrap().put(3, "x").unwrap();
    src.set_virtual_time(100).unwrap();
    // The watermark would be 100, but nothing at or above 4 exists: the floor stops at 4
    // so that a source joining later may start right after the existing data.
    assert_eq!(rt.collect(), 4);
    assert!(ch.is_empty());
    let late = rt.task(4).unwrap();
    late.attach_output(&ch).unwrap().put(4, "y").unwrap();
}

#[test]
fn a_zone_without_live_tasks_keeps_its_floor() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let src = rt.task(0).unwrap();
    let out = src.attach_output(&ch).unwrap();
    for ts in 0..5 {
        out.put(ts, ts.to_string()).unwrap();
    }
    src.set_virtual_time(2).unwrap();
    assert_eq!(rt.collect(), 2);
    drop(out);
    drop(src);
    assert_eq!(rt.collect(), 2);
    assert_eq!(ch.timestamps(), vec![2, 3, 4]);
    // A late joiner can still read what is left.
    let t = rt.task(2).unwrap();
    let input = t.attach_input(&ch).unwrap();
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 2);
}

#[test]
fn outputs_only_into_the_tasks_own_zone() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::default().zone(ZoneId(2)))
        .unwrap();
    let q = rt
        .queue(ContainerOptions::default().zone(ZoneId(2)))
        .unwrap();
    let t = rt.task(0).unwrap();
    let want = StmError::ZoneMismatch {
        task: ZoneId::DEFAULT,
        container: ZoneId(2),
    };
    assert_eq!(t.attach_output(&ch).unwrap_err(), want);
    assert_eq!(t.attach_output(&q).unwrap_err(), want);
    // Inputs from another zone are allowed.
    t.attach_input(&ch).unwrap();
    t.attach_input(&q).unwrap();
}

#[test]
fn a_task_belongs_to_its_runtime() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::default().name("frames"))
        .unwrap();
    let t = rt.task_builder().name("tracker").create().unwrap();
    let found = t
        .runtime()
        .lookup_channel("frames", std::time::Duration::ZERO)
        .unwrap();
    assert_eq!(
        stampede_core::Container::id(&found),
        stampede_core::Container::id(&ch)
    );
    assert!(format!("{t:?}").contains("tracker"));
}
