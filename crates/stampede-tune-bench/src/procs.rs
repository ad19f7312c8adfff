//! The processes platform: a group of address spaces, one per process, on this host over
//! Zenoh (loopback TCP, shared memory for large items). This process is member 0 and
//! drives; the others are this binary started again as workers. Each measurement is one
//! command broadcast to every member; the members of the sub-group it names sort, and the
//! slowest one's time comes back as a reduction.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use stampede_net::{Config, Space};

use crate::netns::Network;
use stampede_strata::models::{time_member, Operation};
use stampede_strata::{Combine, Exchange, GroupOptions, Member, Op, StrataError};
use stampede_tuned::sort::Algorithm;
use stampede_tuned::stencil::Layout;
use stampede_tuned::{time_sort_member, time_stencil_member};

const ROLE: &str = "STAMPEDE_TUNE_WORKER";

fn opts() -> GroupOptions {
    GroupOptions::default().timeout(Some(Duration::from_secs(120)))
}

/// What the members measure.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// Sort `n` keys per member in a group of `p`.
    Sort(Algorithm, usize, usize, u64),
    /// Relax an `n × n` grid `t` times with ghost zones `extra` wide, over every member.
    Stencil(Layout, usize, usize, usize, u64),
    /// Time a collective `reps` times with `n` elements or bytes in a group of `p`.
    Strata(Operation, usize, usize, usize),
}

/// A command: `None` stops the workers.
fn encode(job: Option<Job>) -> Vec<u8> {
    let words = |out: &mut Vec<u8>, ws: &[u64]| {
        for w in ws {
            out.extend_from_slice(&w.to_le_bytes());
        }
    };
    let mut out = Vec::new();
    match job {
        None => out.push(0),
        Some(Job::Sort(a, p, n, seed)) => {
            out.extend([
                1,
                match a {
                    Algorithm::Radix(b) => b as u8,
                    Algorithm::Sample => 255,
                },
            ]);
            words(&mut out, &[p as u64, n as u64, seed]);
        }
        Some(Job::Strata(op, p, n, reps)) => {
            let code = Operation::ALL
                .iter()
                .position(|&x| x == op)
                .expect("an operation") as u8;
            out.extend([3, code]);
            words(&mut out, &[p as u64, n as u64, reps as u64]);
        }
        Some(Job::Stencil(l, n, t, extra, seed)) => {
            let code = Layout::ALL.iter().position(|&x| x == l).expect("a layout") as u8;
            out.extend([2, code]);
            words(&mut out, &[n as u64, t as u64, extra as u64, seed]);
        }
    }
    out
}

fn decode(b: &[u8]) -> Option<Job> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(2 + 8 * i..10 + 8 * i)?.try_into().ok()?,
        ))
    };
    match b.first()? {
        1 => {
            let a = match b[1] {
                255 => Algorithm::Sample,
                bits => Algorithm::Radix(bits as u32),
            };
            Some(Job::Sort(a, word(0)? as usize, word(1)? as usize, word(2)?))
        }
        2 => Some(Job::Stencil(
            *Layout::ALL.get(b[1] as usize)?,
            word(0)? as usize,
            word(1)? as usize,
            word(2)? as usize,
            word(3)?,
        )),
        3 => Some(Job::Strata(
            *Operation::ALL.get(b[1] as usize)?,
            word(0)? as usize,
            word(1)? as usize,
            word(2)? as usize,
        )),
        _ => None,
    }
}

/// One measurement as member `rank`: the sort's seconds here, or zero outside the
/// sub-group.
fn take_part(
    space: &Space,
    subs: &mut HashMap<usize, Member>,
    all: &Member,
    job: Job,
) -> Result<f64, StrataError> {
    let rank = all.rank();
    let p = match job {
        Job::Sort(_, p, ..) | Job::Strata(_, p, ..) => p,
        Job::Stencil(..) => all.size(),
    };
    if rank >= p {
        return Ok(0.0);
    }
    let sub = match subs.entry(p) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(Member::join(space, &format!("sub{p}"), rank, p, opts())?)
        }
    };
    match job {
        Job::Strata(op, _, n, reps) => time_member(sub, op, n, reps),
        Job::Sort(a, _, n, seed) => time_sort_member(sub, a, n, Exchange::Interleaved, seed),
        Job::Stencil(layout, n, t, extra, seed) => {
            time_stencil_member(sub, layout, n, t, extra, seed)
        }
    }
}

/// Runs a worker if this process was started as one; returns whether it was.
pub fn worker() -> bool {
    let Ok(rank) = std::env::var(ROLE) else {
        return false;
    };
    let rank: usize = rank.parse().expect("a worker's rank");
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let size: usize = env("SIZE").parse().expect("a size");
    let cfg = match std::env::var("THROUGH") {
        // An emulated host: one link, through its relay, every byte on the wire.
        Ok(relay) => Config {
            shm_pool: 0,
            ..Config::client(relay)
        },
        Err(_) => Config::peer().connect(env("ROUTER")),
    };
    let space = Space::join(&env("APP"), cfg).expect("joining");
    let all = Member::join(&space, "all", rank, size, opts()).expect("the group");
    let mut subs = HashMap::new();
    loop {
        let cmd = all.broadcast_bytes(0, Vec::new()).expect("a command");
        let Some(job) = decode(&cmd) else { break };
        let t = take_part(&space, &mut subs, &all, job).expect("a measurement");
        all.combine_one(Combine::Reduce, Op::Max, t)
            .expect("the time");
    }
    drop(subs);
    drop(all);
    space.leave();
    true
}

/// Member 0 of a group of `size` processes.
pub struct Processes {
    // Dropped after the workers have stopped.
    _network: Option<Network>,
    space: Space,
    all: Option<Member>,
    subs: HashMap<usize, Member>,
    kids: Vec<Child>,
}

impl Processes {
    /// `size` processes on this host, over loopback and shared memory.
    pub fn start(size: usize) -> Processes {
        Self::launch(size, None).expect("processes on this host")
    }

    /// `size` processes, member 0 here and each other on an emulated host of its own (see
    /// [`Network`]).
    pub fn start_hosts(size: usize, rate: &str, delay: Duration) -> Result<Processes, String> {
        Self::launch(size, Some((rate, delay)))
    }

    fn launch(size: usize, hosts: Option<(&str, Duration)>) -> Result<Processes, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let ep = format!("tcp/127.0.0.1:{port}");
        let app = format!("tune-{}-{port}", std::process::id());
        let mut cfg = Config::router(ep.clone());
        let network = match hosts {
            Some((rate, delay)) => {
                cfg.shm_pool = 0;
                Some(Network::new(size - 1, rate, delay, port)?)
            }
            None => None,
        };
        let space = Space::join(&app, cfg).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut kids = Vec::new();
        for rank in 1..size {
            let mut cmd = match &network {
                Some(net) => {
                    let (prefix, relay) = &net.hosts[rank - 1];
                    let mut c = Command::new(&prefix[0]);
                    c.args(&prefix[1..]).arg(&exe).env("THROUGH", relay);
                    c
                }
                None => Command::new(&exe),
            };
            cmd.env(ROLE, rank.to_string())
                .env("SIZE", size.to_string())
                .env("APP", &app)
                .env("ROUTER", &ep)
                .stdout(Stdio::null());
            kids.push(cmd.spawn().map_err(|e| format!("a worker: {e}"))?);
        }
        let all = Member::join(&space, "all", 0, size, opts()).map_err(|e| e.to_string())?;
        Ok(Processes {
            _network: network,
            space,
            all: Some(all),
            subs: HashMap::new(),
            kids,
        })
    }

    /// The slowest member's seconds to sort `n` keys each in a group of `p` processes.
    pub fn time_sort(
        &mut self,
        a: Algorithm,
        p: usize,
        n: usize,
        seed: u64,
    ) -> Result<f64, StrataError> {
        self.run(Job::Sort(a, p, n, seed))
    }

    /// The members in the group.
    pub fn size(&self) -> usize {
        self.all.as_ref().expect("running").size()
    }

    /// The slowest member's seconds to relax an `n × n` grid `t` times over every member.
    pub fn time_stencil(
        &mut self,
        layout: Layout,
        n: usize,
        t: usize,
        extra: usize,
        seed: u64,
    ) -> Result<f64, StrataError> {
        self.run(Job::Stencil(layout, n, t, extra, seed))
    }

    /// The slowest member's seconds per collective `op` in a group of `p` processes.
    pub fn time_strata(
        &mut self,
        op: Operation,
        p: usize,
        n: usize,
        reps: usize,
    ) -> Result<f64, StrataError> {
        self.run(Job::Strata(op, p, n, reps))
    }

    fn run(&mut self, job: Job) -> Result<f64, StrataError> {
        let all = self.all.as_ref().expect("running");
        all.broadcast_bytes(0, encode(Some(job)))?;
        let t = take_part(&self.space, &mut self.subs, all, job)?;
        all.combine_one(Combine::Reduce, Op::Max, t)
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        if let Some(all) = self.all.take() {
            let _ = all.broadcast_bytes(0, encode(None));
        }
        for k in &mut self.kids {
            let _ = k.wait();
        }
        self.subs.clear();
    }
}
