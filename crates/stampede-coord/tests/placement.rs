//! Concurrent Collections across address spaces: graphs whose steps and items are placed in
//! two processes on loopback. This process is rank 0 (the environment, and a Zenoh router);
//! a child started from this test binary, with the scenario as its role, is rank 1 and
//! builds the same graph. Covered: a DAG alternating between the spaces against a sequential
//! evaluation, the tiled Cholesky placed by tile column, a deadlock across spaces, a step
//! failing remotely, a peer killed with SIGKILL, and the typed errors of bad placement.

#[path = "../../stampede-net/tests/common/mod.rs"]
mod common;
#[path = "../examples/cholesky/mod.rs"]
mod tiled;

use std::time::{Duration, Instant};

use common::{app, free_port, Proc};
use faer::Parallelism;
use stampede_coord::{Executor, Graph, GraphError, ItemCollection, StepError, Tag, Unmet};
use stampede_core::Item;
use stampede_net::{Config, Space};

const T: Duration = Duration::from_secs(30);

fn int(v: i64) -> Item {
    Item::from(v.to_le_bytes().to_vec())
}

fn val(item: &Item) -> i64 {
    i64::from_le_bytes(item.as_bytes().unwrap().as_ref().try_into().unwrap())
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("{key} not set"))
}

/// The entry point of the rank-1 process; does nothing when run as a test.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("STAMPEDE_TEST_ROLE") else {
        return;
    };
    // Ends the line the test harness started ("test child_entry ... ").
    println!();
    let space = Space::join(&env("APP"), Config::peer().connect(env("ROUTER"))).unwrap();
    println!("SPACE {}", space.id());
    if role == "cholesky" {
        for (run, tuned) in [false, true].into_iter().enumerate() {
            let out = tiled::factor_across(
                &space,
                &format!("cholesky-{run}"),
                1,
                2,
                CHOLESKY_N,
                None,
                cholesky_options(tuned),
            );
            assert!(out.unwrap().is_none());
        }
        println!("RELEASED");
    } else if role == "three" {
        // Rank 1 of three, of which rank 2 never comes: announced, and killed while waiting.
        let g = Graph::new(Executor::new(1));
        let r = g.distribute(&space, "three", 1, 3);
        println!("DISTRIBUTE {r:?}");
    } else {
        let g = match role.as_str() {
            "chain" => chain().g,
            "deadlock" => deadlock().0,
            "fails" => fails().0,
            "stalls" => stalls().0,
            other => panic!("unknown role {other}"),
        };
        g.distribute(&space, &role, 1, 2).unwrap();
        // The chain is served in slices of a millisecond, as a caller that also heeds its
        // own shutdown does; the others at once.
        let served = if role == "chain" {
            let mut slices = 0;
            loop {
                match g.serve_timeout(Duration::from_millis(1)) {
                    Ok(true) => break Ok(slices),
                    Ok(false) => slices += 1,
                    Err(e) => break Err(e),
                }
            }
        } else {
            g.serve().map(|()| 0)
        };
        match served {
            Ok(slices) => println!("RELEASED after {slices} slices"),
            Err(e) => println!("SERVE FAILED {e}"),
        }
    }
    space.leave();
}

/// This process as rank 0 and router, and the child as rank 1 of `scenario`, with the
/// child's address space id.
fn two_spaces(scenario: &str) -> (Space, Proc, String) {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app(scenario);
    let space = Space::join(&app, Config::router(ep.clone())).unwrap();
    let mut child = Proc::spawn(scenario, &[("ROUTER", ep), ("APP", app)]);
    let id = child.expect("SPACE", T);
    (space, child, id)
}

/// The graph of the alternating DAG: `add(i)` computes `x(i) = 3 x(i-1) + i` and puts the
/// tag of `double(i)`, which computes `y(i) = 2 x(i) + 1`. `add` runs on rank `i mod 2`,
/// `double` (dependency-tuned) on rank `(i / 3) mod 2`; `x` is homed by the default hash
/// and counted (each `x(i)` is read twice, the last once), `y` is homed with `add`.
struct Chain {
    g: Graph,
    x: ItemCollection,
    y: ItemCollection,
    adds: stampede_coord::TagCollection,
    doubles: stampede_coord::TagCollection,
}

const CHAIN: i64 = 120;

fn reads(i: i64) -> u32 {
    if i < CHAIN - 1 {
        2
    } else {
        1
    }
}

fn chain() -> Chain {
    let g = Graph::new(Executor::new(2));
    let (x, y) = (g.items("x"), g.items("y"));
    let (adds, doubles) = (g.tags("adds"), g.tags("doubles"));
    let add = {
        let (x, doubles) = (x.clone(), doubles.clone());
        g.steps("add", move |ctx, tag| {
            let i = tag.int(0);
            let prev = val(&ctx.get(&x, i - 1)?);
            ctx.put_counted(&x, i, int(prev.wrapping_mul(3).wrapping_add(i)), reads(i));
            ctx.put_tag(&doubles, i);
            Ok(())
        })
    };
    let double = {
        let (x, y) = (x.clone(), y.clone());
        g.steps("double", move |ctx, tag| {
            let i = tag.int(0);
            let v = val(&ctx.get(&x, i)?);
            ctx.put(&y, i, int(v.wrapping_mul(2).wrapping_add(1)));
            Ok(())
        })
    };
    let xs = x.clone();
    double.depends(move |tag| vec![(xs.clone(), tag.clone())]);
    add.compute_on(|tag| (tag.int(0) % 2) as usize);
    double.compute_on(|tag| (tag.int(0) / 3 % 2) as usize);
    y.home(|tag| (tag.int(0) % 2) as usize);
    adds.prescribes(&add);
    doubles.prescribes(&double);
    Chain {
        g,
        x,
        y,
        adds,
        doubles,
    }
}

#[test]
fn a_dag_alternating_between_two_spaces_computes_the_sequential_values() {
    let (space, mut child, _) = two_spaces("chain");
    let c = chain();
    c.g.distribute(&space, "chain", 0, 2).unwrap();
    assert_eq!(c.g.rank(), Some((0, 2)));
    let started = Instant::now();
    c.g.put_counted(&c.x, 0, int(5), reads(0));
    // Last first, so that instances wait for their inputs; every `doubles` tag is also put
    // by its `add`, in whichever space that runs: each `double` still runs once.
    for i in (1..CHAIN).rev() {
        c.g.put_tag(&c.adds, i);
    }
    for i in 0..CHAIN {
        c.g.put_tag(&c.doubles, i);
    }
    c.g.wait().unwrap();
    let took = started.elapsed();
    let mut x = 5i64;
    for i in 0..CHAIN {
        if i > 0 {
            x = x.wrapping_mul(3).wrapping_add(i);
        }
        let y =
            c.g.get(&c.y, i)
                .unwrap()
                .unwrap_or_else(|| panic!("y({i}) missing"));
        assert_eq!(val(&y), x.wrapping_mul(2).wrapping_add(1), "y({i})");
        // Every x was read as often as declared, wherever it lived, and freed there.
        assert!(c.g.get(&c.x, i).unwrap().is_none(), "x({i}) not freed");
    }
    assert!(c.x.is_empty(), "copies here were freed too");
    let stats = space.stats();
    assert!(stats.invocations_sent > 0 && stats.invocations_failed == 0);
    c.g.release().unwrap();
    let slices = child.expect("RELEASED after", T);
    let slices: u32 = slices.trim_end_matches(" slices").parse().unwrap();
    assert!(slices > 0, "serve_timeout returned before the release");
    child.finish(T);
    eprintln!(
        "{} adds and doubles across two spaces in {took:?}",
        2 * CHAIN - 1
    );
    space.leave();
}

const CHOLESKY_N: usize = 96;

fn cholesky_options(tuned: bool) -> tiled::Options {
    tiled::Options {
        tile: 16,
        workers: 2,
        tuned,
    }
}

#[test]
fn tiled_cholesky_placed_by_column_factors_the_matrix() {
    let (space, mut child, _) = two_spaces("cholesky");
    let a = tiled::random_spd(CHOLESKY_N, 11, Parallelism::None);
    for (run, tuned) in [false, true].into_iter().enumerate() {
        let out = tiled::factor_across(
            &space,
            &format!("cholesky-{run}"),
            0,
            2,
            CHOLESKY_N,
            Some(a.as_ref()),
            cholesky_options(tuned),
        )
        .unwrap()
        .expect("the environment's outcome");
        let res = tiled::residual(a.as_ref(), out.l.as_ref());
        assert!(res < 1e-10, "tuned={tuned}: residual {res:e}");
        assert_eq!(out.lkji_left, 0, "tuned={tuned}: tiles left here");
        eprintln!(
            "cholesky n={CHOLESKY_N} tile=16 tuned={tuned} across two spaces: {:?}",
            out.elapsed
        );
    }
    child.expect("RELEASED", T);
    child.finish(T);
    space.leave();
}

/// `lonely(t)` on rank 1 gets `z(t)`, homed on rank 0, and puts `out(t) = z(t) + 1`.
fn deadlock() -> (
    Graph,
    ItemCollection,
    ItemCollection,
    stampede_coord::TagCollection,
) {
    let g = Graph::new(Executor::new(2));
    let (z, out, t) = (g.items("z"), g.items("out"), g.tags("t"));
    let lonely = {
        let (z, out) = (z.clone(), out.clone());
        g.steps("lonely", move |ctx, tag| {
            let v = val(&ctx.get(&z, tag.clone())?);
            ctx.put(&out, tag.clone(), int(v + 1));
            Ok(())
        })
    };
    lonely.compute_on(|_| 1);
    z.home(|_| 0);
    out.home(|_| 1);
    t.prescribes(&lonely);
    (g, z, out, t)
}

#[test]
fn a_deadlock_across_spaces_is_diagnosed_and_can_be_resolved() {
    let (space, mut child, _) = two_spaces("deadlock");
    let (g, z, out, t) = deadlock();
    g.distribute(&space, "deadlock", 0, 2).unwrap();
    g.put_tag(&t, 7);
    let e = g.wait().unwrap_err();
    assert_eq!(
        e,
        GraphError::Deadlock(vec![Unmet {
            collection: "z".into(),
            tag: Tag::from(7),
            waiting: vec![("lonely".into(), Tag::from(7))],
        }])
    );
    // The environment puts what was missing, and the graph goes on.
    g.put(&z, 7, int(41));
    g.wait().unwrap();
    assert_eq!(g.get(&out, 7).unwrap().map(|v| val(&v)), Some(42));
    g.release().unwrap();
    child.expect("RELEASED", T);
    child.finish(T);
    space.leave();
}

#[test]
fn a_get_from_a_home_that_is_gone_is_an_error_not_an_absent_item() {
    let (space, mut child, _) = two_spaces("deadlock");
    let (g, z, out, t) = deadlock();
    g.distribute(&space, "deadlock", 0, 2).unwrap();
    g.put(&z, 7, int(41));
    g.put_tag(&t, 7);
    g.wait().unwrap();
    assert!(g.get(&out, 8).unwrap().is_none(), "never put: absent");
    child.kill9();
    let e = g.get(&out, 7).unwrap_err();
    assert!(
        matches!(
            e,
            GraphError::SpaceLost { rank: 1, .. } | GraphError::Network { rank: 1, .. }
        ),
        "{e:?}"
    );
    space.leave();
}

/// `boom(t)` on rank 1 fails for t = 3.
fn fails() -> (Graph, stampede_coord::TagCollection) {
    let g = Graph::new(Executor::new(2));
    let t = g.tags("t");
    let boom = g.steps("boom", |_, tag| {
        if tag.int(0) == 3 {
            return Err(StepError::failed(format!("boom at {tag}")));
        }
        Ok(())
    });
    boom.compute_on(|_| 1);
    t.prescribes(&boom);
    (g, t)
}

#[test]
fn a_step_failing_in_another_space_fails_the_graph_naming_it() {
    let (space, mut child, id) = two_spaces("fails");
    let (g, t) = fails();
    g.distribute(&space, "fails", 0, 2).unwrap();
    for i in 0..6 {
        g.put_tag(&t, i);
    }
    let e = g.wait().unwrap_err();
    assert_eq!(
        e,
        GraphError::Remote {
            space: id.clone(),
            rank: 1,
            error: Box::new(GraphError::StepFailed {
                step: "boom".into(),
                tag: Tag::from(3),
                message: "boom at (3)".into(),
            }),
        }
    );
    assert!(e.to_string().contains(&id), "{e}");
    g.release().unwrap();
    child.expect("RELEASED", T);
    child.finish(T);
    space.leave();
}

/// `stall(t)` on rank 1 says so and sleeps for a minute.
fn stalls() -> (Graph, stampede_coord::TagCollection) {
    let g = Graph::new(Executor::new(2));
    let t = g.tags("t");
    let stall = g.steps("stall", |_, _| {
        println!("STALLING");
        std::thread::sleep(Duration::from_secs(60));
        Ok(())
    });
    stall.compute_on(|_| 1);
    t.prescribes(&stall);
    (g, t)
}

#[test]
fn a_peer_killed_mid_run_fails_the_wait_instead_of_hanging() {
    let (space, mut child, id) = two_spaces("stalls");
    let (g, t) = stalls();
    g.distribute(&space, "stalls", 0, 2).unwrap();
    g.put_tag(&t, 1);
    let waiter = {
        let g = g.clone();
        std::thread::spawn(move || {
            let r = g.wait();
            (r, Instant::now())
        })
    };
    child.expect("STALLING", T);
    let killed = Instant::now();
    child.kill9();
    let (r, at) = waiter.join().unwrap();
    assert_eq!(r.unwrap_err(), GraphError::SpaceLost { space: id, rank: 1 });
    let took = at - killed;
    assert!(took < Duration::from_secs(10), "noticed after {took:?}");
    eprintln!("wait failed {took:?} after SIGKILL");
    space.leave();
}

/// A participant that announced itself and died while the others still waited for a rank
/// fails their `distribute` as lost when it is seen gone, not 30 s later as not joined.
#[test]
fn a_participant_lost_before_all_joined_fails_distribute_at_once() {
    let (space, mut child, id) = two_spaces("three");
    let g = Graph::new(Executor::new(1));
    let waiter = {
        let (g, space) = (g.clone(), space.clone());
        std::thread::spawn(move || g.distribute(&space, "three", 0, 3))
    };
    space.wait_for("cnc/three/rank/1", T).unwrap();
    // Rank 0 polls the names every 20 ms: it has read rank 1's by now.
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    child.kill9();
    let r = waiter.join().unwrap();
    let took = killed.elapsed();
    assert_eq!(r.unwrap_err(), GraphError::SpaceLost { space: id, rank: 1 });
    assert!(took < Duration::from_secs(15), "noticed after {took:?}");
    eprintln!("distribute failed {took:?} after SIGKILL");
    space.leave();
}

#[test]
fn bad_placement_and_bad_setup_are_typed_errors() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let space = Space::join(&app("setup"), Config::router(ep)).unwrap();
    let g = Graph::new(Executor::new(1));
    let dist = |r: Result<(), GraphError>| match r {
        Err(GraphError::Distribution(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(dist(g.distribute(&space, "g", 2, 2)).contains("rank 2 of 2"));
    assert!(dist(g.distribute(&space, "a/b", 0, 1)).contains("cannot name"));
    assert!(dist(g.serve()).contains("not distributed"));
    let twice = Graph::new(Executor::new(1));
    twice.items("x");
    twice.items("x");
    assert!(dist(twice.distribute(&space, "twice", 0, 1)).contains("two item collections"));

    // One rank: every placement is here, and a rank beyond it is refused.
    let x = g.items("x");
    let t = g.tags("t");
    let xs = x.clone();
    let put = g.steps("put", move |ctx, tag| {
        ctx.put(&xs, tag.clone(), int(tag.int(0)));
        Ok(())
    });
    put.compute_on(|tag| tag.int(0) as usize);
    t.prescribes(&put);
    g.distribute(&space, "g", 0, 1).unwrap();
    assert!(dist(g.distribute(&space, "g", 0, 1)).contains("already"));
    assert!(dist(g.serve()).contains("environment"));
    g.put_tag(&t, 0);
    g.wait().unwrap();
    assert_eq!(g.get(&x, 0).unwrap().map(|v| val(&v)), Some(0));
    g.put_tag(&t, 5);
    assert_eq!(
        g.wait().unwrap_err(),
        GraphError::NoSuchRank {
            tuner: "put".into(),
            tag: Tag::from(5),
            rank: 5,
            ranks: 1
        }
    );
    let h = Graph::new(Executor::new(1));
    let y = h.items("y");
    y.home(|_| 3);
    h.distribute(&space, "h", 0, 1).unwrap();
    h.put(&y, 1, int(1));
    assert!(matches!(
        h.wait().unwrap_err(),
        GraphError::NoSuchRank { rank: 3, .. }
    ));
    g.release().unwrap();
    space.leave();
}
