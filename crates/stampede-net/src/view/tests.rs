//! The view against the local core on random traces: pushes delivered late, out of order
//! or never, snapshots, reference counts reclaimed by another reader, every selector.
//! Whatever the view answers itself must be what the core would answer; when the view has
//! every arrival, it must answer exactly as the core does.

use proptest::prelude::*;
use stampede_core::provider;
use stampede_core::{
    Channel, ContainerOptions, GetError, InputConnection, OutputConnection, PutOptions, Runtime,
    Selector, Task, Timestamp, INFINITY,
};

use super::{Answer, Arrival, View};

#[derive(Clone, Debug)]
enum Op {
    Put(Timestamp, bool),
    Deliver(usize),
    Lose(usize),
    Snapshot,
    Get(Selector),
    Consume(Timestamp),
    ConsumeUntil(Timestamp),
    /// Another reader consumes: a counted item may be reclaimed under the view.
    OtherConsume(Timestamp),
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        (0i64..16).prop_map(Selector::Exact),
        Just(Selector::Oldest),
        Just(Selector::Newest),
        Just(Selector::NewestUnseen),
        Just(Selector::NextUnseen),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => ((0i64..16), prop::bool::weighted(0.2)).prop_map(|(t, c)| Op::Put(t, c)),
        4 => (0usize..8).prop_map(Op::Deliver),
        1 => (0usize..8).prop_map(Op::Lose),
        1 => Just(Op::Snapshot),
        5 => selector().prop_map(Op::Get),
        2 => (0i64..16).prop_map(Op::Consume),
        1 => (0i64..16).prop_map(Op::ConsumeUntil),
        1 => (0i64..16).prop_map(Op::OtherConsume),
    ]
}

struct Owner {
    _rt: Runtime,
    _tasks: Vec<Task>,
    ch: Channel,
    out: OutputConnection<Channel>,
    input: InputConnection<Channel>,
    other: InputConnection<Channel>,
    /// Arrival numbers given.
    seq: u64,
}

impl Owner {
    fn new() -> Owner {
        let rt = Runtime::new();
        let ch = rt.channel(ContainerOptions::unbounded()).unwrap();
        let (p, r, o) = (
            rt.task(0).unwrap(),
            rt.task(INFINITY).unwrap(),
            rt.task(INFINITY).unwrap(),
        );
        let out = p.attach_output(&ch).unwrap();
        let input = r.attach_input(&ch).unwrap();
        let other = o.attach_input(&ch).unwrap();
        Owner {
            _rt: rt,
            _tasks: vec![p, r, o],
            ch,
            out,
            input,
            other,
            seq: 0,
        }
    }

    fn visible(&self) -> Vec<Timestamp> {
        provider::visible_after(&self.input, None).unwrap().0
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut owner = Owner::new();
    let mut view = View::new();
    view.snapshot(0, &[]);
    // Pushes on their way: (arrival, whether the item was counted).
    let mut pending: Vec<(u64, Timestamp, bool)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(ts, counted) => {
                let opts = if counted {
                    PutOptions::default().consumers(1)
                } else {
                    PutOptions::default()
                };
                if owner.out.put_with(ts, vec![ts as u8], opts).is_ok() {
                    owner.seq += 1;
                    pending.push((owner.seq, ts, counted));
                }
            }
            Op::Deliver(i) if !pending.is_empty() => {
                let (seq, ts, counted) = pending.remove(i % pending.len());
                // As the pusher does: a count is known only of an item still stored.
                let present = owner.ch.peek(ts).is_some();
                view.arrived(Arrival {
                    seq,
                    ts,
                    counted: counted && present,
                    present,
                });
            }
            Op::Lose(i) if !pending.is_empty() => {
                pending.remove(i % pending.len());
            }
            Op::Snapshot => view.snapshot(owner.seq, &owner.visible()),
            Op::Get(sel) => {
                let caught_up = pending.is_empty() && view.ahead.is_empty();
                match view.select(sel, false) {
                    Answer::Here(ts) => {
                        if caught_up && view.complete == Some(owner.seq) {
                            // With every arrival, the view answers exactly as the core.
                            let core = owner.input.try_get(sel).map(|g| g.0);
                            prop_assert_eq!(core, Ok(ts), "{:?}", sel);
                        } else {
                            let r = provider::replay_get(&owner.input, sel, ts);
                            prop_assert_eq!(r, Ok(()), "{:?} answered {} here", sel, ts);
                        }
                        view.got(ts);
                    }
                    Answer::Nothing => {
                        // Nothing the view knows answers: neither may anything the core
                        // held at the view's last arrival.
                        if caught_up && view.complete == Some(owner.seq) {
                            let core = owner.input.try_get(sel).map(|g| g.0);
                            prop_assert!(core.is_err(), "{:?}: the core has {:?}", sel, core);
                        }
                    }
                    Answer::Ask => match owner.input.try_get(sel) {
                        Ok((ts, _)) => {
                            view.reached(owner.seq);
                            view.got(ts);
                        }
                        Err(GetError::Unavailable(_) | GetError::Gone(_)) => {}
                        Err(e) => prop_assert!(false, "core get failed: {e}"),
                    },
                }
            }
            Op::Consume(ts) => {
                owner.input.consume(ts).unwrap();
                view.consume(ts);
            }
            Op::ConsumeUntil(ts) => {
                owner.input.consume_until(ts).unwrap();
                view.consume_until(ts);
            }
            Op::OtherConsume(ts) => owner.other.consume(ts).unwrap(),
            Op::Deliver(_) | Op::Lose(_) => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn the_view_answers_as_the_core_does(ops in prop::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

#[test]
fn a_lost_push_makes_the_owner_answer_until_a_snapshot() {
    let mut v = View::new();
    v.snapshot(0, &[]);
    let a = |seq, ts| Arrival {
        seq,
        ts,
        counted: false,
        present: true,
    };
    v.arrived(a(1, 10));
    assert_eq!(v.select(Selector::Newest, false), Answer::Here(10));
    // Arrival 2 is lost: 3 alone cannot be trusted.
    v.arrived(a(3, 30));
    assert_eq!(v.select(Selector::Newest, false), Answer::Ask);
    assert_eq!(v.select(Selector::NextUnseen, false), Answer::Ask);
    v.snapshot(3, &[10, 20, 30]);
    // 20 was only in the snapshot: its count is unknown, so it is asked for.
    assert_eq!(v.select(Selector::Newest, false), Answer::Here(30));
    assert_eq!(v.select(Selector::Exact(20), false), Answer::Ask);
    assert_eq!(v.select(Selector::Oldest, false), Answer::Here(10));
}

#[test]
fn an_owner_answer_newer_than_the_view_waits_for_its_pushes() {
    let mut v = View::new();
    v.snapshot(0, &[]);
    v.arrived(Arrival {
        seq: 1,
        ts: 1,
        counted: false,
        present: true,
    });
    v.reached(2);
    assert_eq!(v.select(Selector::Oldest, false), Answer::Ask);
    v.arrived(Arrival {
        seq: 2,
        ts: 2,
        counted: false,
        present: true,
    });
    assert_eq!(v.select(Selector::Newest, false), Answer::Here(2));
    // This space's own puts on their way: the owner answers.
    assert_eq!(v.select(Selector::Newest, true), Answer::Ask);
}

#[test]
fn a_snapshot_drops_what_a_covered_push_says_is_gone_and_never_goes_back() {
    let a = |seq, ts, present| Arrival {
        seq,
        ts,
        counted: false,
        present,
    };
    let mut v = View::new();
    v.snapshot(0, &[]);
    // Arrival 2 says item 20 was reclaimed before it could be sent; 1 is lost, so 2 waits.
    v.arrived(a(2, 20, false));
    // The snapshot was read before the reclaim and still names 20.
    v.snapshot(2, &[20]);
    assert_eq!(v.select(Selector::Oldest, false), Answer::Nothing);
    // Arrivals 3 and 4 come; a snapshot read earlier (at 3) must not undo 4.
    v.arrived(a(3, 30, true));
    v.arrived(a(4, 40, true));
    v.snapshot(3, &[30]);
    assert_eq!(v.select(Selector::Newest, false), Answer::Here(40));
}
