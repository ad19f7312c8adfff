//! Concurrent Collections semantics: single assignment, prescription, get-counts, the two
//! scheduling modes, failures, deadlock diagnosis, priorities and the trace.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use stampede_coord::{Executor, Graph, GraphError, ItemCollection, Priority, StepError, Tag};
use stampede_core::Item;

fn int(v: i64) -> Item {
    Item::from(v.to_le_bytes().to_vec())
}

fn val(item: &Item) -> i64 {
    i64::from_le_bytes(item.as_bytes().unwrap().as_ref().try_into().unwrap())
}

#[test]
fn an_item_is_written_once() {
    let g = Graph::new(Executor::new(2));
    let x = g.items("x");
    g.put(&x, 1, int(1));
    g.put(&x, 1, int(2));
    let e = g.wait().unwrap_err();
    assert_eq!(
        e,
        GraphError::DuplicatePut {
            collection: "x".into(),
            tag: Tag::from(1),
            by: "environment".into()
        }
    );
    assert_eq!(
        val(&g.get(&x, 1).unwrap().unwrap()),
        1,
        "the first put stays"
    );

    let g = Graph::new(Executor::new(2));
    let x = g.items("x");
    let t = g.tags("t");
    let xs = x.clone();
    let twice = g.steps("twice", move |ctx, _| {
        ctx.put(&xs, 7, int(7));
        Ok(())
    });
    t.prescribes(&twice);
    g.put_tag(&t, 1);
    g.put_tag(&t, 2);
    match g.wait().unwrap_err() {
        GraphError::DuplicatePut { collection, by, .. } => {
            assert_eq!((collection.as_str(), by.as_str()), ("x", "twice"));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_tag_prescribes_each_step_collection_once() {
    let g = Graph::new(Executor::new(2));
    let t = g.tags("t");
    let runs = Arc::new(AtomicUsize::new(0));
    let (a, b) = (runs.clone(), runs.clone());
    let s1 = g.steps("s1", move |_, _| {
        a.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let s2 = g.steps("s2", move |_, _| {
        b.fetch_add(10, Ordering::SeqCst);
        Ok(())
    });
    t.prescribes(&s1).prescribes(&s2);
    for _ in 0..3 {
        g.put_tag(&t, (4, 2));
    }
    g.wait().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 11);
    assert_eq!(t.len(), 1);
}

/// A chain x(i) = x(i-1) + i whose tags arrive last first, so that untuned steps find their
/// input missing and are suspended, while tuned ones wait before starting.
fn chain(tuned: bool, n: i64) -> (Graph, ItemCollection, usize) {
    let g = Graph::new(Executor::new(2));
    let x = g.items("x");
    let t = g.tags("t");
    let runs = Arc::new(AtomicUsize::new(0));
    let (xs, r) = (x.clone(), runs.clone());
    let step = g.steps("add", move |ctx, tag| {
        r.fetch_add(1, Ordering::SeqCst);
        let i = tag.int(0);
        let prev = ctx.get(&xs, i - 1)?;
        ctx.put(&xs, i, int(val(&prev) + i));
        Ok(())
    });
    if tuned {
        let xs = x.clone();
        step.depends(move |tag| vec![(xs.clone(), Tag::from(tag.int(0) - 1))]);
    }
    t.prescribes(&step);
    for i in (1..=n).rev() {
        g.put_tag(&t, i);
    }
    g.put(&x, 0, int(0));
    g.wait().unwrap();
    let runs = runs.load(Ordering::SeqCst);
    (g, x, runs)
}

#[test]
fn suspension_and_dependency_tuning_compute_the_same() {
    let n = 200;
    let (g1, x1, untuned_runs) = chain(false, n);
    let (g2, x2, tuned_runs) = chain(true, n);
    for i in 0..=n {
        assert_eq!(val(&g1.get(&x1, i).unwrap().unwrap()), i * (i + 1) / 2);
        assert_eq!(val(&g2.get(&x2, i).unwrap().unwrap()), i * (i + 1) / 2);
    }
    assert_eq!(tuned_runs, n as usize, "a tuned step runs once");
    assert!(untuned_runs >= n as usize, "{untuned_runs}");
}

#[test]
fn an_item_is_freed_after_its_declared_gets() {
    let g = Graph::new(Executor::new(2));
    let x = g.items("x");
    let y = g.items("y");
    let t = g.tags("t");
    let (xs, ys) = (x.clone(), y.clone());
    let reader = g.steps("reader", move |ctx, tag| {
        let v = ctx.get(&xs, 0)?;
        ctx.put(&ys, tag.clone(), v);
        Ok(())
    });
    t.prescribes(&reader);
    g.put_counted(&x, 0, int(5), 2);
    g.put_tag(&t, 1);
    g.put_tag(&t, 2);
    g.wait().unwrap();
    assert!(
        g.get(&x, 0).unwrap().is_none(),
        "freed after the second get"
    );
    assert_eq!(x.len(), 0);
    assert_eq!(val(&g.get(&y, 2).unwrap().unwrap()), 5);
    // A third get is one more than declared.
    g.put_tag(&t, 3);
    match g.wait().unwrap_err() {
        GraphError::Freed {
            collection, step, ..
        } => assert_eq!((collection.as_str(), step.as_str()), ("x", "reader")),
        other => panic!("{other}"),
    }
}

#[test]
fn a_graph_that_cannot_progress_reports_its_unmet_gets() {
    let g = Graph::new(Executor::new(2));
    let a = g.items("a");
    let b = g.items("b");
    let t = g.tags("t");
    let (as_, bs) = (a.clone(), b.clone());
    let s = g.steps("needs-a", move |ctx, tag| {
        let v = ctx.get(&as_, tag.clone())?;
        ctx.put(&bs, tag.clone(), v);
        Ok(())
    });
    t.prescribes(&s);
    g.put_tag(&t, 1);
    g.put_tag(&t, 2);
    g.put(&a, 1, int(1));
    match g.wait().unwrap_err() {
        GraphError::Deadlock(unmet) => {
            assert_eq!(unmet.len(), 1, "{unmet:?}");
            assert_eq!(unmet[0].collection, "a");
            assert_eq!(unmet[0].tag, Tag::from(2));
            assert_eq!(
                unmet[0].waiting,
                vec![("needs-a".to_string(), Tag::from(2))]
            );
        }
        other => panic!("{other}"),
    }
    // The environment can still supply it: the graph then finishes.
    g.put(&a, 2, int(2));
    g.wait().unwrap();
    assert_eq!(val(&g.get(&b, 2).unwrap().unwrap()), 2);
}

#[test]
fn failed_and_panicking_steps_fail_the_graph_with_their_tag() {
    let g = Graph::new(Executor::new(2));
    let t = g.tags("t");
    let s = g.steps("picky", |_, tag| {
        if tag.int(0) == 3 {
            return Err(StepError::failed("three is not allowed"));
        }
        Ok(())
    });
    t.prescribes(&s);
    for i in 0..5 {
        g.put_tag(&t, i);
    }
    assert_eq!(
        g.wait().unwrap_err(),
        GraphError::StepFailed {
            step: "picky".into(),
            tag: Tag::from(3),
            message: "three is not allowed".into()
        }
    );

    let g = Graph::new(Executor::new(2));
    let t = g.tags("t");
    let s = g.steps("boom", |_, tag| {
        assert!(tag.int(0) != 1, "tag one");
        Ok(())
    });
    t.prescribes(&s);
    g.put_tag(&t, 1);
    match g.wait().unwrap_err() {
        GraphError::StepFailed { step, message, .. } => {
            assert_eq!(step, "boom");
            assert!(message.contains("tag one"), "{message}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn high_priority_steps_run_first_and_the_trace_shows_every_run() {
    let exec = Executor::new(1);
    exec.set_tracing(true);
    let g = Graph::new(exec.clone());
    let t = g.tags("t");
    let gate = Arc::new(Mutex::new(()));
    let held = gate.lock().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (o, gt, st) = (order.clone(), gate.clone(), started.clone());
    let s = g.steps("s", move |_, tag| {
        // The first instance holds the only worker until every tag is queued.
        if tag.int(0) == 0 {
            st.store(true, Ordering::SeqCst);
            drop(gt.lock().unwrap());
        }
        o.lock().unwrap().push(tag.int(0));
        Ok(())
    });
    s.priority(|tag| {
        if tag.int(0) % 10 == 9 {
            Priority::High
        } else {
            Priority::Normal
        }
    });
    t.prescribes(&s);
    g.put_tag(&t, 0);
    while !started.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for i in 1..30 {
        g.put_tag(&t, i);
    }
    drop(held);
    g.wait().unwrap();
    let order = order.lock().unwrap().clone();
    assert_eq!(order[0], 0);
    assert_eq!(&order[1..4], &[9, 19, 29], "{order:?}");
    let trace = exec.take_trace();
    assert_eq!(trace.len(), 30, "{trace:?}");
    assert!(trace
        .iter()
        .all(|e| &*e.name == "s" && e.end >= e.start && e.worker == 0));
}

/// A random DAG: node i's value is 1 plus the sum of its inputs' values (inputs < i).
fn sequential(inputs: &[Vec<usize>]) -> Vec<i64> {
    let mut v = Vec::new();
    for ins in inputs {
        let x = 1 + ins.iter().map(|&j| v[j]).sum::<i64>() % 1_000_003;
        v.push(x);
    }
    v
}

fn dag() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<usize>, bool, usize)> {
    (1usize..40).prop_flat_map(|n| {
        let inputs = (0..n)
            .map(|i| {
                if i == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    proptest::collection::vec(0..i, 0..4).boxed()
                }
            })
            .collect::<Vec<_>>();
        (
            inputs,
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            any::<bool>(),
            1usize..4,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the order tags arrive in, the mode and the number of workers, the graph
    /// computes what a sequential evaluation does.
    #[test]
    fn random_dags_compute_what_a_sequential_evaluation_does(
        (inputs, order, tuned, workers) in dag()
    ) {
        let want = sequential(&inputs);
        let g = Graph::new(Executor::new(workers));
        let v = g.items("v");
        let t = g.tags("t");
        let ins = Arc::new(inputs.clone());
        let (vs, ins2) = (v.clone(), ins.clone());
        let node = g.steps("node", move |ctx, tag| {
            let i = tag.int(0) as usize;
            let mut sum = 0;
            for &j in &ins2[i] {
                sum += val(&ctx.get(&vs, j as i64)?);
            }
            ctx.put(&vs, i as i64, int(1 + sum % 1_000_003));
            Ok(())
        });
        if tuned {
            let vs = v.clone();
            node.depends(move |tag| {
                ins[tag.int(0) as usize].iter().map(|&j| (vs.clone(), Tag::from(j as i64))).collect()
            });
        }
        t.prescribes(&node);
        for i in order {
            g.put_tag(&t, i as i64);
        }
        g.wait().unwrap();
        let got: BTreeMap<usize, i64> =
            (0..want.len()).map(|i| (i, val(&g.get(&v, i as i64).unwrap().unwrap()))).collect();
        prop_assert_eq!(got.into_values().collect::<Vec<_>>(), want);
    }
}

/// Many threads putting critical-path tags at once make workers race for the high-priority
/// queue (crossbeam's `Steal::Retry`); every instance still runs, and promptly.
#[test]
fn contended_high_priority_work_completes() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let g = Graph::new(Executor::new(2));
        let t = g.tags("t");
        t.memoize(false);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let s = g.steps("urgent", move |_, _| {
            r.fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        s.priority(|_| Priority::High);
        t.prescribes(&s);
        let putters: Vec<_> = (0..4)
            .map(|p| {
                let (g, t) = (g.clone(), t.clone());
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        g.put_tag(&t, (p, i));
                    }
                })
            })
            .collect();
        for p in putters {
            p.join().unwrap();
        }
        g.wait().unwrap();
        let _ = done.send(runs.load(Ordering::Relaxed));
    });
    let runs = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the graph did not finish within two minutes");
    assert_eq!(runs, 80_000);
}
