//! Tests for temporal correlation: exact matches, matches within a tolerance, skipped
//! counting and closed inputs.

use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{
    Channel, ContainerOptions, Correlated, Correlator, GetError, Match, OutputConnection, Runtime,
    Selector, Task, INFINITY,
};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Setup {
    rt: Runtime,
    chans: Vec<Channel>,
    _src: Task,
    outs: Vec<OutputConnection<Channel>>,
    sink: Task,
}

fn setup(n: usize) -> Setup {
    let rt = Runtime::new();
    let chans: Vec<Channel> = (0..n)
        .map(|_| rt.channel(ContainerOptions::default()).unwrap())
        .collect();
    let src = rt.task(0).unwrap();
    let outs = chans
        .iter()
        .map(|c| src.attach_output(c).unwrap())
        .collect();
    let sink = rt.task(INFINITY).unwrap();
    Setup {
        rt,
        chans,
        _src: src,
        outs,
        sink,
    }
}

fn correlator(s: &Setup, mode: Match) -> Correlator {
    let inputs = s
        .chans
        .iter()
        .map(|c| s.sink.attach_input(c).unwrap())
        .collect();
    Correlator::new(inputs, mode).unwrap()
}

fn stamps(set: &Correlated) -> Vec<i64> {
    set.items.iter().map(|(ts, _)| *ts).collect()
}

fn texts(set: &Correlated) -> Vec<String> {
    set.items
        .iter()
        .map(|(_, i)| i.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn exact_match_delivers_sets_in_timestamp_order() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Exact);
    assert_eq!(corr.inputs().len(), 2);
    for ts in [1, 2, 3] {
        s.outs[0].put(ts, format!("v{ts}")).unwrap();
    }
    for ts in [3, 2] {
        s.outs[1].put(ts, format!("a{ts}")).unwrap();
    }
    let set = corr.try_get().unwrap();
    // Video 1 has no partner, and audio has moved past it: skipped.
    assert_eq!((set.ts, stamps(&set)), (2, vec![2, 2]));
    assert_eq!(texts(&set), vec!["v2", "a2"]);
    let set = corr.try_get().unwrap();
    assert_eq!((set.ts, stamps(&set)), (3, vec![3, 3]));
    assert_eq!(corr.skipped(), 1);
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
}

#[test]
fn exact_match_waits_for_a_missing_partner() {
    let s = setup(3);
    let mut corr = correlator(&s, Match::Exact);
    s.outs[0].put(5, "a").unwrap();
    s.outs[1].put(5, "b").unwrap();
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
    let start = Instant::now();
    assert!(matches!(
        corr.get_timeout(ms(30)),
        Err(GetError::Timeout(_))
    ));
    assert!(start.elapsed() >= ms(30));
    assert_eq!(corr.skipped(), 0, "a pending item is not skipped");

    thread::scope(|sc| {
        sc.spawn(|| {
            thread::sleep(ms(20));
            s.outs[2].put(5, "c").unwrap();
        });
        let set = corr.get_timeout(LONG).unwrap();
        assert_eq!(
            (set.ts, texts(&set)),
            (5, vec!["a".into(), "b".into(), "c".into()])
        );
    });
}

#[test]
fn within_tolerance_picks_the_nearest_and_the_older_on_a_tie() {
    let s = setup(3);
    let mut corr = correlator(&s, Match::Within(2));
    s.outs[0].put(10, "frame").unwrap();
    for ts in [8, 11, 12] {
        s.outs[1].put(ts, ts.to_string()).unwrap();
    }
    for ts in [9, 11] {
        s.outs[2].put(ts, ts.to_string()).unwrap();
    }
    let set = corr.try_get().unwrap();
    // Input 1: 11 is nearest. Input 2: 9 and 11 tie; the older wins.
    assert_eq!((set.ts, stamps(&set)), (10, vec![10, 11, 9]));
}

#[test]
fn within_tolerance_never_reuses_an_item() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Within(3));
    s.outs[0].put(10, "f10").unwrap();
    s.outs[0].put(11, "f11").unwrap();
    s.outs[1].put(10, "a10").unwrap();
    let set = corr.try_get().unwrap();
    assert_eq!(stamps(&set), vec![10, 10]);
    // 11 could only match audio 10, which is taken: wait for a newer one.
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
    s.outs[1].put(13, "a13").unwrap();
    assert_eq!(stamps(&corr.try_get().unwrap()), vec![11, 13]);
}

#[test]
fn items_outside_the_tolerance_are_skipped_and_counted() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Within(1));
    for ts in [0, 10, 20, 30] {
        s.outs[0].put(ts, ts.to_string()).unwrap();
    }
    for ts in [5, 21, 40] {
        s.outs[1].put(ts, ts.to_string()).unwrap();
    }
    let set = corr.try_get().unwrap();
    assert_eq!(stamps(&set), vec![20, 21]);
    assert_eq!(corr.skipped(), 2, "0 and 10 cannot be matched any more");
    // 30: the other input has 40 beyond the window, so it can never match.
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
    assert_eq!(corr.skipped(), 3);
    assert!(format!("{corr:?}").contains("skipped: 3"));
}

#[test]
fn consume_marks_exactly_the_matched_items() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Exact);
    let other = s.sink.attach_input(&s.chans[0]).unwrap();
    for ts in [1, 2] {
        s.outs[0].put(ts, "v").unwrap();
        s.outs[1].put(ts, "a").unwrap();
    }
    let first = corr.try_get().unwrap();
    let second = corr.try_get().unwrap();
    corr.consume(&second).unwrap();
    let inputs = corr.inputs();
    assert_eq!(
        inputs[0].try_get(Selector::Exact(2)).unwrap_err(),
        GetError::Gone(2)
    );
    assert_eq!(inputs[0].try_get(Selector::Exact(1)).unwrap().0, 1);
    corr.consume_until(&first).unwrap();
    assert_eq!(
        inputs[1].try_get(Selector::Exact(1)).unwrap_err(),
        GetError::Gone(1)
    );
    // Other connections are unaffected.
    assert_eq!(other.try_get(Selector::Exact(1)).unwrap().0, 1);
}

#[test]
fn a_closed_reference_input_ends_the_correlation() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Exact);
    s.outs[0].put(1, "v").unwrap();
    s.outs[1].put(1, "a").unwrap();
    s.chans[0].close().unwrap();
    // What is left is still delivered, then Closed.
    assert_eq!(stamps(&corr.try_get().unwrap()), vec![1, 1]);
    assert_eq!(corr.try_get().unwrap_err(), GetError::Closed);
    assert_eq!(corr.get_timeout(LONG).unwrap_err(), GetError::Closed);
}

#[test]
fn a_closed_partner_input_skips_what_it_can_no_longer_match() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Exact);
    s.outs[0].put(1, "v").unwrap();
    s.outs[0].put(2, "v").unwrap();
    s.outs[1].put(2, "a").unwrap();
    s.chans[1].close().unwrap();
    let set = corr.try_get().unwrap();
    assert_eq!(stamps(&set), vec![2, 2]);
    assert_eq!(corr.skipped(), 1);
    s.outs[0].put(3, "v").unwrap();
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
    assert_eq!(corr.skipped(), 2);
    s.chans[0].close().unwrap();
    assert_eq!(corr.try_get().unwrap_err(), GetError::Closed);
}

#[test]
fn closing_wakes_a_waiting_correlator() {
    let s = setup(2);
    let mut corr = correlator(&s, Match::Exact);
    thread::scope(|sc| {
        sc.spawn(|| {
            thread::sleep(ms(20));
            s.chans[0].close().unwrap();
        });
        assert_eq!(corr.get_timeout(LONG).unwrap_err(), GetError::Closed);
    });
}

#[test]
fn dropping_the_correlator_detaches_its_inputs() {
    let s = setup(2);
    let corr = correlator(&s, Match::Exact);
    drop(corr);
    // Its connections are gone with it; puts still work and nothing holds the watermark.
    s.outs[0].put(1, "v").unwrap();
    assert_eq!(s.chans[0].stats().connections, 0);
    let _ = &s.rt;
}

#[test]
fn a_single_input_correlates_with_itself() {
    let s = setup(1);
    let mut corr = correlator(&s, Match::Within(5));
    s.outs[0].put(4, "x").unwrap();
    let set = corr.get_timeout(LONG).unwrap();
    assert_eq!((set.ts, stamps(&set)), (4, vec![4]));
}
