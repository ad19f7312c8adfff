//! The synchronous global operations (thesis §6.1.1) as state machines that advance when
//! messages arrive, so every one has a split-phase form: start, query, complete.

use std::time::Instant;

use crate::error::StrataError;
use crate::member::Member;
use crate::op::Combiner;
use crate::tree::Place;
use crate::wire::{signature, Message, Part};

/// What a tree operation computes for this member.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Want {
    pub prefix: bool,
    pub suffix: bool,
    pub total: bool,
}

/// What a tree operation leaves this member: the combine of everything left of it
/// (`prefix`), right of it (`suffix`), of the whole group (`total`), each `None` when it
/// covers nobody or was not asked for, and this member's own contribution.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub prefix: Option<Vec<u8>>,
    pub suffix: Option<Vec<u8>>,
    pub total: Option<Vec<u8>>,
    pub own: Vec<u8>,
}

enum Stage {
    /// Waiting for the children's subtree values.
    Up(Vec<Option<Vec<u8>>>),
    /// Sent up (or skipped it); waiting for the parent's message.
    Down(Vec<Option<Vec<u8>>>),
    Done,
}

/// A combine, broadcast or barrier over the binomial tree: values go up to the root
/// combined in rank order, then what each member needs comes down.
pub(crate) struct TreeOp {
    step: u64,
    signature: u32,
    name: &'static str,
    place: Place,
    combiner: Box<dyn Combiner>,
    own: Vec<u8>,
    want: Want,
    stage: Stage,
    outcome: Option<Outcome>,
}

/// The dissemination barrier: in round k each member tells member `rank + 2^k` and waits
/// for member `rank - 2^k`; after ⌈log₂ P⌉ rounds everyone has heard from everyone,
/// in half the message latency of the tree's up and down.
pub(crate) struct Dissemination {
    step: u64,
    signature: u32,
    distance: usize,
    sent: bool,
}

pub(crate) enum Engine {
    Tree(Box<TreeOp>),
    Dissemination(Dissemination),
}

fn join(c: &dyn Combiner, a: Option<&[u8]>, b: Option<&[u8]>) -> Result<Option<Vec<u8>>, String> {
    Ok(match (a, b) {
        (None, None) => None,
        (Some(a), None) => Some(a.to_vec()),
        (None, Some(b)) => Some(b.to_vec()),
        (Some(a), Some(b)) => Some(c.combine(a, b)?),
    })
}

/// The message of `step` from `from`, if it arrived, checked to be of the same operation.
fn receive(
    m: &Member,
    step: u64,
    signature: u32,
    name: &str,
    from: usize,
) -> Result<Option<Message>, StrataError> {
    let Some(bytes) = m.take_message(step, from) else {
        return Ok(None);
    };
    let msg = Message::decode(&bytes).map_err(|detail| StrataError::Mismatch { from, detail })?;
    if msg.signature != signature {
        return Err(StrataError::Mismatch {
            from,
            detail: format!(
                "at step {step} this member runs {name}, member {from} another operation"
            ),
        });
    }
    Ok(Some(msg))
}

impl TreeOp {
    /// A combine rooted at 0 (or a broadcast from `root` when `broadcast`), as step `step`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        m: &Member,
        name: &'static str,
        description: &str,
        root: usize,
        broadcast: bool,
        combiner: Box<dyn Combiner>,
        own: Vec<u8>,
        want: Want,
    ) -> TreeOp {
        let place = Place::new(m.rank(), m.size(), root);
        let stage = if broadcast {
            Stage::Down(Vec::new())
        } else {
            Stage::Up(vec![None; place.children.len()])
        };
        TreeOp {
            step: m.step(),
            signature: signature(description),
            name,
            place,
            combiner,
            own,
            want,
            stage,
            outcome: None,
        }
    }

    fn message(&self, m: &Member, from: usize) -> Result<Option<Message>, StrataError> {
        receive(m, self.step, self.signature, self.name, from)
    }

    fn mismatch(&self, from: usize) -> impl Fn(String) -> StrataError {
        move |detail| StrataError::Mismatch { from, detail }
    }

    /// Advances as far as the arrived messages allow; true once done.
    fn advance(&mut self, m: &Member) -> Result<bool, StrataError> {
        loop {
            match &mut self.stage {
                Stage::Done => return Ok(true),
                Stage::Up(got) => {
                    let mut got = std::mem::take(got);
                    for (i, &c) in self.place.children.iter().enumerate() {
                        if got[i].is_none() {
                            if let Some(mut msg) = self.message(m, c)? {
                                got[i] = Some(msg.take(Part::Up).unwrap_or_default());
                            }
                        }
                    }
                    if got.iter().any(Option::is_none) {
                        self.stage = Stage::Up(got);
                        return Ok(false);
                    }
                    if let Some(parent) = self.place.parent {
                        let mut agg = self.own.clone();
                        for (i, v) in got.iter().enumerate() {
                            let v = v.as_deref().expect("every child arrived");
                            agg = self
                                .combiner
                                .combine(&agg, v)
                                .map_err(self.mismatch(self.place.children[i]))?;
                        }
                        let msg = Message::new(self.signature).with(Part::Up, Some(agg));
                        m.send_message(parent, self.step, msg.encode())?;
                        self.stage = Stage::Down(got);
                    } else {
                        self.down(m, got, None, None, None)?;
                    }
                }
                Stage::Down(got) => {
                    let got = std::mem::take(got);
                    let Some(parent) = self.place.parent else {
                        // A broadcast's root: its own value is the total.
                        let own = Some(self.own.clone());
                        self.down(m, got, None, None, own)?;
                        continue;
                    };
                    let Some(mut msg) = self.message(m, parent)? else {
                        self.stage = Stage::Down(got);
                        return Ok(false);
                    };
                    let (p, s, t) = (
                        msg.take(Part::Prefix),
                        msg.take(Part::Suffix),
                        msg.take(Part::Total),
                    );
                    self.down(m, got, p, s, t)?;
                }
            }
        }
    }

    /// Sends each child what it needs and keeps this member's outcome. `got` holds the
    /// children's subtree values (empty for a broadcast).
    fn down(
        &mut self,
        m: &Member,
        got: Vec<Option<Vec<u8>>>,
        prefix: Option<Vec<u8>>,
        suffix: Option<Vec<u8>>,
        total: Option<Vec<u8>>,
    ) -> Result<(), StrataError> {
        let c = &*self.combiner;
        let kids = &self.place.children;
        let n = kids.len();
        let sub = |i: usize| got.get(i).and_then(|v| v.as_deref());
        let total = if self.place.parent.is_none() && total.is_none() && self.want.total {
            // The root of a combine: its subtree is the whole group.
            let mut agg = Some(self.own.clone());
            for (i, &kid) in kids.iter().enumerate() {
                agg = join(c, agg.as_deref(), sub(i)).map_err(self.mismatch(kid))?;
            }
            agg
        } else {
            total
        };
        let mut prefixes = vec![None; n];
        if self.want.prefix {
            let mut acc =
                join(c, prefix.as_deref(), Some(&self.own)).map_err(self.mismatch(m.rank()))?;
            for i in 0..n {
                prefixes[i] = acc.clone();
                acc = join(c, acc.as_deref(), sub(i)).map_err(self.mismatch(kids[i]))?;
            }
        }
        let mut suffixes = vec![None; n];
        let mut own_suffix = suffix;
        if self.want.suffix {
            for i in (0..n).rev() {
                suffixes[i] = own_suffix.clone();
                own_suffix =
                    join(c, sub(i), own_suffix.as_deref()).map_err(self.mismatch(kids[i]))?;
            }
        }
        for (i, &child) in kids.iter().enumerate() {
            let msg = Message::new(self.signature)
                .with(Part::Prefix, prefixes[i].take())
                .with(Part::Suffix, suffixes[i].take())
                .with(Part::Total, total.clone());
            m.send_message(child, self.step, msg.encode())?;
        }
        self.outcome = Some(Outcome {
            prefix,
            suffix: own_suffix,
            total,
            own: std::mem::take(&mut self.own),
        });
        self.stage = Stage::Done;
        Ok(())
    }

    fn waiting_for(&self) -> Vec<usize> {
        match &self.stage {
            Stage::Up(got) => self
                .place
                .children
                .iter()
                .zip(got)
                .filter(|(_, g)| g.is_none())
                .map(|(&c, _)| c)
                .collect(),
            Stage::Down(_) => self.place.parent.into_iter().collect(),
            Stage::Done => Vec::new(),
        }
    }
}

impl Dissemination {
    pub fn new(m: &Member) -> Dissemination {
        Dissemination {
            step: m.step(),
            signature: signature("barrier"),
            distance: 1,
            sent: false,
        }
    }

    fn advance(&mut self, m: &Member) -> Result<bool, StrataError> {
        let (rank, size) = (m.rank(), m.size());
        while self.distance < size {
            if !self.sent {
                let to = (rank + self.distance) % size;
                m.send_message(to, self.step, Message::new(self.signature).encode())?;
                self.sent = true;
            }
            let from = (rank + size - self.distance) % size;
            if receive(m, self.step, self.signature, "a barrier", from)?.is_none() {
                return Ok(false);
            }
            self.distance <<= 1;
            self.sent = false;
        }
        Ok(true)
    }

    fn waiting_for(&self, m: &Member) -> Vec<usize> {
        if self.distance >= m.size() {
            return Vec::new();
        }
        vec![(m.rank() + m.size() - self.distance) % m.size()]
    }
}

impl Engine {
    fn advance(&mut self, m: &Member) -> Result<bool, StrataError> {
        match self {
            Engine::Tree(t) => t.advance(m),
            Engine::Dissemination(d) => d.advance(m),
        }
    }

    fn waiting_for(&self, m: &Member) -> Vec<usize> {
        match self {
            Engine::Tree(t) => t.waiting_for(),
            Engine::Dissemination(d) => d.waiting_for(m),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Engine::Tree(t) => t.name,
            Engine::Dissemination(_) => "barrier",
        }
    }

    fn outcome(&mut self) -> Outcome {
        match self {
            Engine::Tree(t) => t.outcome.take().unwrap_or_default(),
            Engine::Dissemination(_) => Outcome::default(),
        }
    }
}

type Finish<'m, R> = Box<dyn FnOnce(Outcome) -> Result<R, StrataError> + 'm>;

/// A collective operation started and not yet complete (the split-phase form): this member
/// has contributed; [`query`](Pending::query) tests whether the operation has completed
/// here without waiting, [`complete`](Pending::complete) waits for it. Meanwhile the member
/// may do other work, including block transfers, which waiting also serves. Dropping an
/// incomplete operation completes it (the others need this member's part).
pub struct Pending<'m, R> {
    member: &'m Member,
    engine: Engine,
    finish: Option<Finish<'m, R>>,
    started: Instant,
    failed: Option<StrataError>,
    done: bool,
}

impl<R> std::fmt::Debug for Pending<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("operation", &self.engine.name())
            .field("done", &self.done)
            .finish()
    }
}

impl<'m, R> Pending<'m, R> {
    pub(crate) fn start(
        member: &'m Member,
        engine: Engine,
        finish: impl FnOnce(Outcome) -> Result<R, StrataError> + 'm,
    ) -> Result<Pending<'m, R>, StrataError> {
        let mut p = Pending {
            member,
            engine,
            finish: Some(Box::new(finish)),
            started: Instant::now(),
            failed: None,
            done: false,
        };
        // Contribute now: a leaf sends its value up at once.
        p.step(false)?;
        Ok(p)
    }

    fn step(&mut self, poll: bool) -> Result<bool, StrataError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.done {
            return Ok(true);
        }
        let r = (|| {
            if poll {
                self.member.poll(stampede_core::Wait::Never)?;
            }
            self.engine.advance(self.member)
        })();
        match r {
            Ok(done) => {
                self.done = done;
                Ok(done)
            }
            Err(e) => {
                self.done = true;
                Err(self.member.fail(e))
            }
        }
    }

    /// Whether the operation has completed here, without waiting.
    pub fn query(&mut self) -> Result<bool, StrataError> {
        self.step(true)
    }

    /// Waits for the operation to complete and returns its result.
    pub fn complete(mut self) -> Result<R, StrataError> {
        self.wait()?;
        let outcome = self.engine.outcome();
        self.member.count(|s| s.operations += 1);
        let finish = self.finish.take().expect("completed once");
        finish(outcome)
    }

    fn wait(&mut self) -> Result<(), StrataError> {
        while !self.step(true)? {
            let waiting = self.engine.waiting_for(self.member);
            if let Err(e) = self
                .member
                .wait_for(self.engine.name(), &waiting, self.started)
            {
                self.done = true;
                return Err(self.member.fail(e));
            }
        }
        Ok(())
    }
}

impl<R> Drop for Pending<'_, R> {
    fn drop(&mut self) {
        if self.finish.is_some() && !self.done {
            self.member.count(|s| s.completed_on_drop += 1);
            // Errors have no one to go to; the next operation meets the same cause.
            let _ = self.wait();
        }
    }
}
