//! A deterministic simulation of three spaces exchanging marks: a putter moves holds to an
//! owner by puts while a third space watches, and every message is delivered in an
//! adversarial order (each sender's messages in order, as Zenoh delivers them).

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::*;

const O: usize = 0;
const P: usize = 1;
const T: usize = 2;
const NAMES: [&str; 3] = ["owner", "putter", "third"];
/// A high mark: what a space with nothing low holds.
const HIGH: Timestamp = 1000;

/// One simulated address space.
struct Sim {
    book: Book,
    /// The zone-0 terms its core holds for the other spaces.
    terms: BTreeMap<String, Timestamp>,
    passes: u64,
}

impl Sim {
    fn apply(&mut self, effects: Vec<Effect>) {
        for (space, zone, term) in effects {
            assert_eq!(zone, 0);
            match term {
                Some(t) => self.terms.insert(space, t),
                None => self.terms.remove(&space),
            };
        }
    }
}

/// A step the world can take.
type Action = Box<dyn Fn(&mut World)>;

struct World {
    sims: Vec<Sim>,
    /// Each directed link's marks messages in flight, in order.
    links: BTreeMap<(usize, usize), VecDeque<Marks>>,
    /// The acknowledgement of the put in flight (the owner's covering version), which
    /// travels apart from the marks.
    ack: Option<u64>,
    /// Items stored at the owner and not consumed.
    held: Vec<Timestamp>,
    /// The putter's task's virtual time.
    putter_vt: Timestamp,
    /// Puts still to make, and whether one is in flight.
    puts: Vec<Timestamp>,
    in_flight: Option<Timestamp>,
}

impl World {
    fn new(puts: Vec<Timestamp>) -> World {
        let mut w = World {
            sims: NAMES
                .iter()
                .map(|n| Sim {
                    book: Book::new(n),
                    terms: BTreeMap::new(),
                    passes: 0,
                })
                .collect(),
            links: BTreeMap::new(),
            ack: None,
            held: Vec::new(),
            putter_vt: puts[0],
            puts,
            in_flight: None,
        };
        // Everyone has run a pass and heard the others before the puts begin.
        for s in 0..3 {
            w.pass(s);
            w.publish(s);
        }
        while w.deliver_any() {}
        w
    }

    /// What a space's own core holds now.
    fn true_local(&self, s: usize) -> Timestamp {
        match s {
            O => self.held.iter().copied().min().unwrap_or(HIGH),
            P => self.putter_vt,
            _ => HIGH,
        }
    }

    /// The watermark a pass at `s` would compute.
    fn watermark(&self, s: usize) -> Timestamp {
        let others = self.sims[s]
            .terms
            .values()
            .copied()
            .min()
            .unwrap_or(INFINITY);
        self.true_local(s).min(others)
    }

    fn pass(&mut self, s: usize) {
        let local = self.true_local(s);
        let sim = &mut self.sims[s];
        sim.passes += 1;
        sim.book.noted(0, local, sim.passes);
    }

    fn publish(&mut self, s: usize) -> u64 {
        let msg = self.sims[s].book.message();
        let v = msg.version;
        for to in 0..3 {
            if to != s {
                self.links
                    .entry((s, to))
                    .or_default()
                    .push_back(msg.clone());
            }
        }
        v
    }

    fn deliver(&mut self, link: (usize, usize)) {
        let Some(m) = self.links.get_mut(&link).and_then(VecDeque::pop_front) else {
            return;
        };
        let (from, to) = link;
        let e = self.sims[to].book.received(NAMES[from], &m);
        self.sims[to].apply(e);
    }

    /// The putter gets the acknowledgement.
    fn acknowledged(&mut self) {
        let v = self.ack.take().expect("an acknowledgement");
        let ts = self.in_flight.take().expect("an acknowledged put");
        let e = self.sims[P].book.transfer(NAMES[O], 0, ts, v);
        self.sims[P].apply(e);
        // Only now does the putter's task move on.
        self.putter_vt = self.puts.first().copied().unwrap_or(HIGH / 2);
    }

    fn deliver_any(&mut self) -> bool {
        let Some(&link) = self
            .links
            .iter()
            .find(|(_, q)| !q.is_empty())
            .map(|(k, _)| k)
        else {
            return false;
        };
        self.deliver(link);
        true
    }

    /// The owner stores the next put and acknowledges it.
    fn store(&mut self) {
        let ts = self.puts.remove(0);
        self.in_flight = Some(ts);
        self.held.push(ts);
        let after = self.sims[O].passes;
        let v = match self.sims[O].book.pin(0, ts, after) {
            Some(v) => v,
            None => self.publish(O),
        };
        self.ack = Some(v);
    }

    fn step(&mut self, choice: u8) {
        let mut actions: Vec<Action> = Vec::new();
        if self.in_flight.is_none() && !self.puts.is_empty() {
            actions.push(Box::new(World::store));
        }
        if self.ack.is_some() {
            actions.push(Box::new(World::acknowledged));
        }
        if !self.held.is_empty() {
            actions.push(Box::new(|w: &mut World| {
                w.held.remove(0);
            }));
        }
        for s in 0..3 {
            actions.push(Box::new(move |w: &mut World| w.pass(s)));
            actions.push(Box::new(move |w: &mut World| {
                w.publish(s);
            }));
        }
        for (&link, q) in &self.links {
            if !q.is_empty() {
                actions.push(Box::new(move |w: &mut World| w.deliver(link)));
            }
        }
        let a = &actions[choice as usize % actions.len()];
        a(self);
    }

    /// No space's watermark passes what some space still holds.
    fn check(&self) -> Result<(), TestCaseError> {
        let held = (0..3).map(|s| self.true_local(s)).min().unwrap();
        for (s, name) in NAMES.iter().enumerate() {
            prop_assert!(
                self.watermark(s) <= held,
                "{}'s watermark {} passes {held}, still held; its terms: {:?}",
                name,
                self.watermark(s),
                self.sims[s].terms
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Safety under every delivery order, and the bounds go once every message arrived.
    #[test]
    fn no_space_reclaims_a_moved_hold(
        n in 1usize..4,
        choices in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let puts: Vec<Timestamp> = (0..n as i64).map(|i| 10 * (i + 1)).collect();
        let mut w = World::new(puts);
        w.check()?;
        for c in choices {
            w.step(c);
            w.check()?;
        }
        // Then everything completes: puts, consumes, passes and every message.
        loop {
            if w.ack.is_some() {
                w.acknowledged();
            } else if w.in_flight.is_none() && !w.puts.is_empty() {
                w.store();
            } else if !w.deliver_any() {
                break;
            }
            w.check()?;
        }
        w.held.clear();
        for s in 0..3 {
            w.pass(s);
            w.publish(s);
        }
        while w.deliver_any() {}
        for s in 0..3 {
            w.pass(s);
            w.publish(s);
        }
        while w.deliver_any() {}
        // Nothing is held low any more, so no bound lingers anywhere.
        for (s, name) in NAMES.iter().enumerate() {
            prop_assert_eq!(w.watermark(s), HIGH / 2, "{} still held: {:?}", name, w.sims[s].terms);
        }
        prop_assert!(w.sims[P].book.transfers.is_empty(), "transfers kept: {:?}", w.sims[P].book.transfers);
    }
}

/// The race this module closes: the putter's raised mark reaches a third space before the
/// owner's lowered one.
#[test]
fn a_raised_mark_arriving_first_carries_the_bound() {
    let mut w = World::new(vec![10]);
    w.store();
    // The acknowledgement arrives; the putter moves on and publishes at once.
    w.acknowledged();
    w.pass(P);
    w.publish(P);
    // The putter's message overtakes the owner's.
    w.deliver((P, T));
    assert_eq!(w.sims[T].book.term("putter", 0), HIGH / 2);
    assert_eq!(w.sims[T].book.term("owner", 0), 10, "bound kept");
    assert!(w.watermark(T) <= 10);
    // The owner's covering message arrives: the bound gives way to the report itself.
    w.deliver((O, T));
    assert_eq!(w.sims[T].book.term("owner", 0), 10);
    assert!(w.sims[T].book.peers["owner"].bounds.is_empty());
}

#[test]
fn a_space_that_left_takes_its_bounds_and_transfers() {
    let mut w = World::new(vec![10]);
    w.store();
    w.acknowledged();
    assert_eq!(w.sims[P].book.term("owner", 0), 10);
    let e = w.sims[P].book.left("owner");
    assert_eq!(e, vec![("owner".to_owned(), 0, None)]);
    assert!(w.sims[P].book.transfers.is_empty());
}

#[test]
fn a_pass_older_than_the_newest_noted_is_ignored() {
    let mut b = Book::new("me");
    b.noted(0, 5, 2);
    b.noted(0, 9, 1);
    assert_eq!(b.own()[&0], 5);
}

#[test]
fn a_pin_lowers_the_marks_until_a_later_pass() {
    let mut b = Book::new("me");
    b.noted(0, 100, 1);
    b.message();
    assert_eq!(b.pin(0, 50, 1), None, "the last message said 100");
    assert!(b.lowered(0));
    let m = b.message();
    assert_eq!(m.marks, vec![(0, 50)]);
    assert_eq!(b.pin(0, 60, 1), Some(m.version), "already covered");
    // A pass that counted before the store releases nothing.
    b.noted(0, 100, 1);
    assert_eq!(b.own()[&0], 50);
    b.noted(0, 100, 2);
    assert_eq!(b.own()[&0], 100);
}
