//! The CableS programs (PN, PC, PIPE, SPMD) as cluster tasks, each with the driver that
//! spawns it and checks its result against sequential code; shared by the `cables` example
//! and the tests.

use std::time::Duration;

use bytes::Bytes;
use stampede_cluster::{Cluster, Placement, Registry, Segment, TaskContext, TaskError};

pub const T: Duration = Duration::from_secs(60);

fn get(s: &Segment, i: usize) -> Result<u64, TaskError> {
    let mut b = [0u8; 8];
    s.read(i * 8, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn put(s: &Segment, i: usize, v: u64) -> Result<(), TaskError> {
    s.write(i * 8, &v.to_le_bytes())?;
    Ok(())
}

fn num(b: &[u8]) -> Result<u64, TaskError> {
    Ok(u64::from_le_bytes(b.try_into()?))
}

fn is_prime(n: u64) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

// ---- PN: words 0 = next candidate, 1 = primes found.
const PN_LIMIT: u64 = 20_000;

fn pn_worker(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let c = ctx.cluster();
    let (m, seg) = (c.mutex("pn/lock")?, c.segment("pn/state", 16)?);
    let mut mine = 0u64;
    loop {
        // A block of candidates at a time, as the pthreads program grabs the next number.
        let start = {
            let _g = m.lock()?;
            let next = get(&seg, 0)?.max(2);
            put(&seg, 0, next + 100)?;
            next
        };
        if start >= PN_LIMIT {
            break;
        }
        let found = (start..(start + 100).min(PN_LIMIT))
            .filter(|&n| is_prime(n))
            .count() as u64;
        mine += found;
        let _g = m.lock()?;
        let total = get(&seg, 1)?;
        put(&seg, 1, total + found)?;
    }
    Ok(Bytes::copy_from_slice(&mine.to_le_bytes()))
}

pub fn pn(c: &Cluster, workers: usize) -> Result<String, TaskError> {
    let hs = (0..workers)
        .map(|_| c.spawn("pn", Bytes::new(), Placement::RoundRobin))
        .collect::<Result<Vec<_>, _>>()?;
    let mut by_tasks = 0;
    for h in hs {
        by_tasks += num(&h.join()?)?;
    }
    let m = c.mutex("pn/lock")?;
    let seg = c.segment("pn/state", 16)?;
    let total = {
        let _g = m.lock()?;
        get(&seg, 1)?
    };
    let want = (2..PN_LIMIT).filter(|&n| is_prime(n)).count() as u64;
    if total != want || by_tasks != want {
        return Err(
            format!("{total} primes counted ({by_tasks} by the tasks), {want} expected").into(),
        );
    }
    Ok(format!(
        "{want} primes below {PN_LIMIT}, by {workers} tasks"
    ))
}

// ---- PC: words 0 = count, 1 = in, 2 = out, 3.. = slots.
const PC_SLOTS: usize = 8;
const PC_ITEMS: u64 = 500;

fn pc_producer(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let c = ctx.cluster();
    let (m, not_full, not_empty) = (
        c.mutex("pc/lock")?,
        c.condition("pc/not-full")?,
        c.condition("pc/not-empty")?,
    );
    let seg = c.segment("pc/buffer", (3 + PC_SLOTS) * 8)?;
    for v in 1..=PC_ITEMS {
        let mut g = m.lock()?;
        while get(&seg, 0)? == PC_SLOTS as u64 {
            g = not_full.wait(g)?;
        }
        let at = get(&seg, 1)?;
        put(&seg, 3 + at as usize, v)?;
        put(&seg, 1, (at + 1) % PC_SLOTS as u64)?;
        put(&seg, 0, get(&seg, 0)? + 1)?;
        drop(g);
        not_empty.signal()?;
    }
    Ok(Bytes::new())
}

fn pc_consumer(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let c = ctx.cluster();
    let (m, not_full, not_empty) = (
        c.mutex("pc/lock")?,
        c.condition("pc/not-full")?,
        c.condition("pc/not-empty")?,
    );
    let seg = c.segment("pc/buffer", (3 + PC_SLOTS) * 8)?;
    let mut sum = 0u64;
    let mut last = 0u64;
    for _ in 0..PC_ITEMS {
        let mut g = m.lock()?;
        while get(&seg, 0)? == 0 {
            g = not_empty.wait(g)?;
        }
        let at = get(&seg, 2)?;
        let v = get(&seg, 3 + at as usize)?;
        put(&seg, 2, (at + 1) % PC_SLOTS as u64)?;
        put(&seg, 0, get(&seg, 0)? - 1)?;
        drop(g);
        not_full.signal()?;
        if v != last + 1 {
            return Err(format!("consumed {v} after {last}").into());
        }
        last = v;
        sum += v;
    }
    Ok(Bytes::copy_from_slice(&sum.to_le_bytes()))
}

pub fn pc(c: &Cluster, other: &str) -> Result<String, TaskError> {
    let consumer = c.spawn("pc/consumer", Bytes::new(), Placement::On(other.to_owned()))?;
    let producer = c.spawn("pc/producer", Bytes::new(), Placement::Here)?;
    producer.join()?;
    let sum = num(&consumer.join()?)?;
    let want = PC_ITEMS * (PC_ITEMS + 1) / 2;
    if sum != want {
        return Err(format!("sum {sum}, {want} expected").into());
    }
    Ok(format!(
        "{PC_ITEMS} items in order through {PC_SLOTS} slots, producer and consumer in two spaces"
    ))
}

// ---- PIPE: mailbox k is words 2k (full flag) and 2k + 1 (value), under mutex pipe/k.
const PIPE_STAGES: usize = 4;
const PIPE_ITEMS: u64 = 100;

fn mailbox(
    c: &Cluster,
    k: usize,
) -> Result<(stampede_cluster::Mutex, stampede_cluster::Condition), TaskError> {
    Ok((
        c.mutex(&format!("pipe/{k}"))?,
        c.condition(&format!("pipe/{k}/changed"))?,
    ))
}

fn pipe_take(c: &Cluster, seg: &Segment, k: usize) -> Result<u64, TaskError> {
    let (m, cv) = mailbox(c, k)?;
    let mut g = m.lock()?;
    while get(seg, 2 * k)? == 0 {
        g = cv.wait(g)?;
    }
    let v = get(seg, 2 * k + 1)?;
    put(seg, 2 * k, 0)?;
    drop(g);
    cv.broadcast()?;
    Ok(v)
}

fn pipe_give(c: &Cluster, seg: &Segment, k: usize, v: u64) -> Result<(), TaskError> {
    let (m, cv) = mailbox(c, k)?;
    let mut g = m.lock()?;
    while get(seg, 2 * k)? == 1 {
        g = cv.wait(g)?;
    }
    put(seg, 2 * k + 1, v)?;
    put(seg, 2 * k, 1)?;
    drop(g);
    cv.broadcast()?;
    Ok(())
}

fn stage_calc(k: usize, v: u64) -> u64 {
    v * 3 + k as u64
}

fn pipe_stage(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let k = num(&args)? as usize;
    let c = ctx.cluster();
    let seg = c.segment("pipe/mailboxes", (PIPE_STAGES + 1) * 16)?;
    for _ in 0..PIPE_ITEMS {
        let v = pipe_take(c, &seg, k)?;
        pipe_give(c, &seg, k + 1, stage_calc(k, v))?;
    }
    Ok(Bytes::new())
}

pub fn pipe(c: &Cluster) -> Result<String, TaskError> {
    let seg = c.segment("pipe/mailboxes", (PIPE_STAGES + 1) * 16)?;
    let stages = (0..PIPE_STAGES)
        .map(|k| {
            c.spawn(
                "pipe/stage",
                (k as u64).to_le_bytes().to_vec(),
                Placement::RoundRobin,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let feeder = {
        let (c, seg) = (c.clone(), seg.clone());
        std::thread::spawn(move || -> Result<(), String> {
            for i in 0..PIPE_ITEMS {
                pipe_give(&c, &seg, 0, i).map_err(|e| e.to_string())?;
            }
            Ok(())
        })
    };
    for i in 0..PIPE_ITEMS {
        let v = pipe_take(c, &seg, PIPE_STAGES)?;
        let want = (0..PIPE_STAGES).fold(i, |x, k| stage_calc(k, x));
        if v != want {
            return Err(format!("item {i} came out as {v}, {want} expected").into());
        }
    }
    feeder.join().map_err(|_| "the feeder panicked")??;
    let spaces: std::collections::BTreeSet<String> =
        stages.iter().map(|h| h.space().to_owned()).collect();
    for h in stages {
        h.join()?;
    }
    Ok(format!(
        "{PIPE_ITEMS} items through {PIPE_STAGES} stages in {} spaces",
        spaces.len()
    ))
}

// ---- SPMD: a rod of N cells relaxed by `members` tasks, each its own part.
const ROD: usize = 64;
const STEPS: usize = 30;

fn spmd_member(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let w = String::from_utf8(args.to_vec())?;
    let mut it = w.split(' ').map(str::parse::<usize>);
    let (r, p) = (it.next().ok_or("rank")??, it.next().ok_or("size")??);
    let c = ctx.cluster();
    let seg = c.segment("spmd/rod", ROD * 8)?;
    let b = c.barrier("spmd/step", p)?;
    if r == 0 {
        seg.write(0, &100f64.to_le_bytes())?;
    }
    b.wait()?;
    let (lo, hi) = (r * ROD / p, (r + 1) * ROD / p);
    for _ in 0..STEPS {
        let old: Vec<f64> = seg.with_as(<[f64]>::to_vec)?;
        b.wait()?;
        seg.with_mut_as(|rod: &mut [f64]| {
            for i in lo.max(1)..hi.min(ROD - 1) {
                rod[i] = (old[i - 1] + old[i + 1]) / 2.0;
            }
        })?;
        b.wait()?;
    }
    let mid = seg.with_as(|rod: &[f64]| rod[1])?;
    Ok(Bytes::copy_from_slice(&mid.to_le_bytes()))
}

pub fn spmd(c: &Cluster, members: usize) -> Result<String, TaskError> {
    let hs = (0..members)
        .map(|r| {
            c.spawn(
                "spmd",
                format!("{r} {members}").into_bytes(),
                Placement::RoundRobin,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut x: Vec<f64> = (0..ROD).map(|i| if i == 0 { 100.0 } else { 0.0 }).collect();
    for _ in 0..STEPS {
        let old = x.clone();
        for i in 1..ROD - 1 {
            x[i] = (old[i - 1] + old[i + 1]) / 2.0;
        }
    }
    for h in hs {
        let got = f64::from_le_bytes(h.join()?[..].try_into()?);
        if got != x[1] {
            return Err(format!("cell 1 is {got}, {} expected", x[1]).into());
        }
    }
    Ok(format!(
        "a rod of {ROD} cells, {STEPS} steps, {members} members"
    ))
}

pub fn registry() -> Registry {
    Registry::new()
        .task("pn", pn_worker)
        .task("pc/producer", pc_producer)
        .task("pc/consumer", pc_consumer)
        .task("pipe/stage", pipe_stage)
        .task("spmd", spmd_member)
}
