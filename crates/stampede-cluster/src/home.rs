//! The state of the synchronisation objects an address space is home to, as a plain state
//! machine: each request returns what to send, so the rules are tested without a network.
//!
//! A waiter is a request: the space that sent it and the sequence number that space gave
//! it. A mutex is held by one request at a time and granted to waiters in arrival order; a
//! semaphore holds a count and grants waiters while it is positive; a condition queues its
//! waiters until signalled. When a space leaves or dies, the mutexes its requests hold are
//! released and the next holder is told the previous owner died (the state they protect
//! may be inconsistent); its waiting requests are forgotten.

use std::collections::{HashMap, VecDeque};

/// A request: its space and that space's sequence number for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Waiter {
    pub space: String,
    pub seq: u64,
}

/// What the home tells a waiter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Grant { to: Waiter, owner_died: bool },
    Wake { to: Waiter },
    Refuse { to: Waiter, why: String },
}

impl Action {
    pub fn to(&self) -> &Waiter {
        match self {
            Action::Grant { to, .. } | Action::Wake { to } | Action::Refuse { to, .. } => to,
        }
    }
}

/// Why a try-lock was refused.
pub(crate) const BUSY: &str = "busy";

/// The kinds of object, one table for the kinds and their names in the name server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex = 1,
    Condition = 2,
    Semaphore = 3,
    Barrier = 4,
    Segment = 5,
}

impl Kind {
    /// Its code in messages.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Condition => "condition",
            Kind::Semaphore => "semaphore",
            Kind::Barrier => "barrier",
            Kind::Segment => "segment",
        }
    }
}

enum Object {
    Mutex {
        holder: Option<Waiter>,
        queue: VecDeque<Waiter>,
        /// The next grant tells its holder the previous owner died.
        owner_died: bool,
        /// The holder was told so (given back if its grant comes back unclaimed).
        holder_told: bool,
    },
    Condition {
        queue: VecDeque<Waiter>,
    },
    Semaphore {
        count: u64,
        queue: VecDeque<Waiter>,
    },
    Barrier {
        size: u32,
        next: u32,
    },
    /// A global memory segment's bytes and the number of releases applied to them.
    Segment {
        data: Vec<u8>,
        version: u64,
    },
}

impl Object {
    fn kind(&self) -> Kind {
        match self {
            Object::Mutex { .. } => Kind::Mutex,
            Object::Condition { .. } => Kind::Condition,
            Object::Semaphore { .. } => Kind::Semaphore,
            Object::Barrier { .. } => Kind::Barrier,
            Object::Segment { .. } => Kind::Segment,
        }
    }
}

/// The objects this space is home to.
#[derive(Default)]
pub(crate) struct Homes {
    objects: HashMap<String, Object>,
}

impl Homes {
    /// Makes `name` an object of `kind` here (`initial`: a semaphore's count, a barrier's
    /// size); an error if it exists with another kind.
    pub fn create(&mut self, name: &str, kind: Kind, initial: u64) -> Result<(), String> {
        if let Some(o) = self.objects.get(name) {
            return if o.kind() == kind {
                Ok(())
            } else {
                Err(format!(
                    "{name:?} is a {}, not a {}",
                    o.kind().name(),
                    kind.name()
                ))
            };
        }
        let o = match kind {
            Kind::Mutex => Object::Mutex {
                holder: None,
                queue: VecDeque::new(),
                owner_died: false,
                holder_told: false,
            },
            Kind::Condition => Object::Condition {
                queue: VecDeque::new(),
            },
            Kind::Semaphore => Object::Semaphore {
                count: initial,
                queue: VecDeque::new(),
            },
            Kind::Barrier => Object::Barrier {
                size: initial as u32,
                next: 0,
            },
            Kind::Segment => Object::Segment {
                data: vec![0; initial as usize],
                version: 0,
            },
        };
        self.objects.insert(name.to_owned(), o);
        Ok(())
    }

    /// `w` asks for mutex or semaphore `name`.
    /// As [`lock`](Homes::lock), but refused with [`BUSY`] instead of queued when the
    /// mutex is held or the semaphore has no permit.
    pub fn try_lock(&mut self, name: &str, w: Waiter) -> Vec<Action> {
        let busy = match self.objects.get(name) {
            Some(Object::Mutex { holder, .. }) => holder.is_some(),
            Some(Object::Semaphore { count, .. }) => *count == 0,
            _ => false,
        };
        if busy {
            vec![Action::Refuse {
                to: w,
                why: BUSY.into(),
            }]
        } else {
            self.lock(name, w)
        }
    }

    pub fn lock(&mut self, name: &str, w: Waiter) -> Vec<Action> {
        match self.objects.get_mut(name) {
            Some(Object::Mutex {
                holder,
                queue,
                owner_died,
                holder_told,
            }) => {
                if holder.is_none() {
                    *holder = Some(w.clone());
                    let died = std::mem::take(owner_died);
                    *holder_told = died;
                    vec![Action::Grant {
                        to: w,
                        owner_died: died,
                    }]
                } else {
                    queue.push_back(w);
                    Vec::new()
                }
            }
            Some(Object::Semaphore { count, queue }) => {
                if *count > 0 {
                    *count -= 1;
                    vec![Action::Grant {
                        to: w,
                        owner_died: false,
                    }]
                } else {
                    queue.push_back(w);
                    Vec::new()
                }
            }
            other => vec![refuse(name, other.map(|o| o.kind()), "locked", w)],
        }
    }

    /// Whether `w` holds mutex `name`.
    pub fn holds(&self, name: &str, w: &Waiter) -> bool {
        matches!(self.objects.get(name), Some(Object::Mutex { holder: Some(h), .. }) if h == w)
    }

    /// The holder granted by `w` releases mutex `name`.
    pub fn unlock(&mut self, name: &str, w: &Waiter) -> Vec<Action> {
        match self.objects.get_mut(name) {
            Some(Object::Mutex {
                holder,
                holder_told,
                ..
            }) if holder.as_ref() == Some(w) => {
                *holder = None;
                *holder_told = false;
                self.hand_on(name)
            }
            // Not held by `w`: the sender checked it held the mutex, so this is a release
            // already made by a withdrawal or a departure; nothing to do.
            _ => Vec::new(),
        }
    }

    /// `w` gave up waiting for `name`: forgotten if queued, released if granted meanwhile.
    pub fn withdraw(&mut self, name: &str, w: &Waiter) -> Vec<Action> {
        match self.objects.get_mut(name) {
            Some(Object::Mutex {
                holder,
                queue,
                owner_died,
                holder_told,
            }) => {
                queue.retain(|q| q != w);
                if holder.as_ref() == Some(w) {
                    // Its grant was never taken: a death it carried goes to the next.
                    *holder = None;
                    *owner_died |= std::mem::take(holder_told);
                    return self.hand_on(name);
                }
                Vec::new()
            }
            Some(Object::Semaphore { queue, .. }) | Some(Object::Condition { queue }) => {
                queue.retain(|q| q != w);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The grant to `w` arrived after it gave up: a mutex it holds is released, a
    /// semaphore gets the unit back.
    pub fn returned(&mut self, name: &str, w: &Waiter) -> Vec<Action> {
        match self.objects.get(name) {
            Some(Object::Mutex { holder, .. }) if holder.as_ref() == Some(w) => {
                self.withdraw(name, w)
            }
            Some(Object::Semaphore { .. }) => self.post(name),
            _ => Vec::new(),
        }
    }

    /// Adds one to semaphore `name`, granting the next waiter.
    pub fn post(&mut self, name: &str) -> Vec<Action> {
        match self.objects.get_mut(name) {
            Some(Object::Semaphore { count, queue }) => match queue.pop_front() {
                Some(w) => vec![Action::Grant {
                    to: w,
                    owner_died: false,
                }],
                None => {
                    *count += 1;
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }

    /// `w` waits on condition `name`.
    pub fn cond_wait(&mut self, name: &str, w: Waiter) -> Result<(), String> {
        match self.objects.get_mut(name) {
            Some(Object::Condition { queue }) => {
                queue.push_back(w);
                Ok(())
            }
            other => Err(refuse_text(name, other.map(|o| o.kind()), "waited on")),
        }
    }

    /// Wakes the first waiter of condition `name`, or all of them.
    pub fn signal(&mut self, name: &str, all: bool) -> Vec<Action> {
        match self.objects.get_mut(name) {
            Some(Object::Condition { queue }) => {
                let n = if all { queue.len() } else { queue.len().min(1) };
                queue.drain(..n).map(|to| Action::Wake { to }).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The next rank of barrier `name`, for a barrier of `size` members.
    /// The next place of barrier `name` of `size` members: place `k` is rank `k % size` of
    /// generation `k / size`, so once all places of one group are taken the next joiners
    /// form a new group (a barrier made again per phase, or after a failure).
    pub fn rank(&mut self, name: &str, size: u32) -> Result<u32, String> {
        match self.objects.get_mut(name) {
            Some(Object::Barrier { size: s, next }) => {
                if *s != size {
                    return Err(format!("barrier {name:?} has {s} members, not {size}"));
                }
                *next = next
                    .checked_add(1)
                    .ok_or_else(|| format!("barrier {name:?} was joined too often"))?;
                Ok(*next - 1)
            }
            other => Err(refuse_text(name, other.map(|o| o.kind()), "joined")),
        }
    }

    /// Segment `name`'s version, and its bytes unless the asker has version `have`.
    pub fn fetch(&self, name: &str, have: u64) -> Result<(u64, Option<Vec<u8>>), String> {
        match self.objects.get(name) {
            Some(Object::Segment { data, version }) => {
                Ok((*version, (*version != have).then(|| data.clone())))
            }
            other => Err(refuse_text(name, other.map(|o| o.kind()), "read")),
        }
    }

    /// Applies one release's writes to segment `name` at once; returns the new version.
    pub fn store(&mut self, name: &str, writes: &[(u64, &[u8])]) -> Result<u64, String> {
        match self.objects.get_mut(name) {
            Some(Object::Segment { data, version }) => {
                for (at, bytes) in writes {
                    // All checked before any is applied.
                    let fits = usize::try_from(*at)
                        .ok()
                        .and_then(|a| a.checked_add(bytes.len()))
                        .is_some_and(|e| e <= data.len());
                    if !fits {
                        return Err(format!(
                            "{} bytes at {at} of segment {name:?} of {}",
                            bytes.len(),
                            data.len()
                        ));
                    }
                }
                for (at, bytes) in writes {
                    let at = *at as usize;
                    data[at..at + bytes.len()].copy_from_slice(bytes);
                }
                *version += 1;
                Ok(*version)
            }
            other => Err(refuse_text(name, other.map(|o| o.kind()), "written")),
        }
    }

    /// Space `space` left or died: its mutexes are released (the next holder told), its
    /// waiting requests forgotten. Returns what to send, with the object it is about.
    pub fn space_left(&mut self, space: &str) -> Vec<(String, Action)> {
        let mut freed = Vec::new();
        for (name, o) in self.objects.iter_mut() {
            match o {
                Object::Mutex {
                    holder,
                    queue,
                    owner_died,
                    holder_told,
                } => {
                    queue.retain(|w| w.space != space);
                    if holder.as_ref().is_some_and(|h| h.space == space) {
                        *holder = None;
                        *holder_told = false;
                        *owner_died = true;
                        freed.push(name.clone());
                    }
                }
                Object::Condition { queue } | Object::Semaphore { queue, .. } => {
                    queue.retain(|w| w.space != space);
                }
                Object::Barrier { .. } | Object::Segment { .. } => {}
            }
        }
        freed.sort();
        freed
            .into_iter()
            .flat_map(|n| {
                let acts = self.hand_on(&n);
                acts.into_iter().map(move |a| (n.clone(), a))
            })
            .collect()
    }

    /// Grants free mutex `name` to its next waiter.
    fn hand_on(&mut self, name: &str) -> Vec<Action> {
        if let Some(Object::Mutex {
            holder,
            queue,
            owner_died,
            holder_told,
        }) = self.objects.get_mut(name)
        {
            if holder.is_none() {
                if let Some(w) = queue.pop_front() {
                    *holder = Some(w.clone());
                    let died = std::mem::take(owner_died);
                    *holder_told = died;
                    return vec![Action::Grant {
                        to: w,
                        owner_died: died,
                    }];
                }
            }
        }
        Vec::new()
    }
}

fn refuse_text(name: &str, kind: Option<Kind>, what: &str) -> String {
    match kind {
        Some(k) => format!("{name:?} is a {} and cannot be {what}", k.name()),
        None => format!("no object {name:?} here"),
    }
}

fn refuse(name: &str, kind: Option<Kind>, what: &str, w: Waiter) -> Action {
    Action::Refuse {
        why: refuse_text(name, kind, what),
        to: w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(space: &str, seq: u64) -> Waiter {
        Waiter {
            space: space.into(),
            seq,
        }
    }

    #[test]
    fn a_mutex_is_granted_in_arrival_order_and_released_to_the_next() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        assert_eq!(
            h.lock("m", w("a", 1)),
            vec![Action::Grant {
                to: w("a", 1),
                owner_died: false
            }]
        );
        assert!(h.lock("m", w("b", 1)).is_empty());
        assert!(h.lock("c", w("c", 1)).len() == 1, "no such object: refused");
        assert!(h.lock("m", w("c", 7)).is_empty());
        assert!(h.unlock("m", &w("b", 1)).is_empty(), "b does not hold it");
        assert_eq!(
            h.unlock("m", &w("a", 1)),
            vec![Action::Grant {
                to: w("b", 1),
                owner_died: false
            }]
        );
        assert_eq!(h.withdraw("m", &w("c", 7)), vec![]);
        assert!(h.unlock("m", &w("b", 1)).is_empty());
        assert_eq!(
            h.lock("m", w("d", 1)),
            vec![Action::Grant {
                to: w("d", 1),
                owner_died: false
            }]
        );
    }

    #[test]
    fn a_try_lock_is_granted_when_free_and_refused_never_queued_when_held() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        h.create("s", Kind::Semaphore, 1).unwrap();
        assert_eq!(
            h.try_lock("m", w("a", 1)),
            vec![Action::Grant {
                to: w("a", 1),
                owner_died: false
            }]
        );
        assert_eq!(
            h.try_lock("m", w("b", 1)),
            vec![Action::Refuse {
                to: w("b", 1),
                why: BUSY.into()
            }]
        );
        // The refused request is not queued: the unlock frees the mutex for nobody.
        assert!(h.unlock("m", &w("a", 1)).is_empty());
        assert_eq!(h.try_lock("m", w("b", 2)).len(), 1);
        assert!(matches!(
            h.try_lock("s", w("a", 3))[..],
            [Action::Grant { .. }]
        ));
        assert!(matches!(
            h.try_lock("s", w("a", 4))[..],
            [Action::Refuse { .. }]
        ));
    }

    #[test]
    fn a_dead_holder_releases_and_the_next_holder_is_told() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        h.lock("m", w("a", 1));
        h.lock("m", w("a", 2));
        h.lock("m", w("b", 1));
        assert_eq!(
            h.space_left("a"),
            vec![(
                "m".to_string(),
                Action::Grant {
                    to: w("b", 1),
                    owner_died: true
                }
            )]
        );
        h.unlock("m", &w("b", 1));
        assert_eq!(
            h.lock("m", w("c", 1)),
            vec![Action::Grant {
                to: w("c", 1),
                owner_died: false
            }],
            "told once"
        );
        // Died with nobody waiting: the next to come is told.
        h.space_left("c");
        assert_eq!(
            h.lock("m", w("d", 1)),
            vec![Action::Grant {
                to: w("d", 1),
                owner_died: true
            }]
        );
    }

    #[test]
    fn an_owner_death_carried_by_a_grant_that_came_back_goes_to_the_next_holder() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        h.lock("m", w("a", 1));
        h.lock("m", w("b", 1));
        h.lock("m", w("c", 1));
        h.space_left("a");
        // b was told, but had given up as the grant travelled.
        assert_eq!(
            h.withdraw("m", &w("b", 1)),
            vec![Action::Grant {
                to: w("c", 1),
                owner_died: true
            }]
        );
    }

    #[test]
    fn a_withdrawn_grant_is_passed_on() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        h.lock("m", w("a", 1));
        h.lock("m", w("b", 1));
        h.lock("m", w("c", 1));
        h.unlock("m", &w("a", 1));
        // b had timed out as its grant travelled.
        assert_eq!(
            h.withdraw("m", &w("b", 1)),
            vec![Action::Grant {
                to: w("c", 1),
                owner_died: false
            }]
        );
    }

    #[test]
    fn a_returned_grant_releases_a_mutex_once_and_gives_a_semaphore_its_unit_back() {
        let mut h = Homes::default();
        h.create("m", Kind::Mutex, 0).unwrap();
        h.create("s", Kind::Semaphore, 1).unwrap();
        h.lock("m", w("a", 1));
        h.lock("m", w("b", 1));
        // a withdrew after its grant left, then the grant came back.
        assert_eq!(
            h.withdraw("m", &w("a", 1)),
            vec![Action::Grant {
                to: w("b", 1),
                owner_died: false
            }]
        );
        assert!(h.returned("m", &w("a", 1)).is_empty(), "released once");
        assert_eq!(h.lock("s", w("a", 2)).len(), 1);
        assert!(h.lock("s", w("b", 2)).is_empty());
        assert!(h.withdraw("s", &w("a", 2)).is_empty());
        assert_eq!(
            h.returned("s", &w("a", 2)),
            vec![Action::Grant {
                to: w("b", 2),
                owner_died: false
            }]
        );
    }

    #[test]
    fn conditions_wake_one_or_all_in_order() {
        let mut h = Homes::default();
        h.create("c", Kind::Condition, 0).unwrap();
        assert!(
            h.signal("c", false).is_empty(),
            "a signal with no waiter is lost"
        );
        for s in 1..=3 {
            h.cond_wait("c", w("a", s)).unwrap();
        }
        assert_eq!(h.signal("c", false), vec![Action::Wake { to: w("a", 1) }]);
        h.withdraw("c", &w("a", 2));
        assert_eq!(h.signal("c", true), vec![Action::Wake { to: w("a", 3) }]);
        assert!(h.create("c", Kind::Mutex, 0).is_err());
        assert!(h.cond_wait("m", w("a", 9)).is_err());
    }

    #[test]
    fn a_segment_applies_a_release_whole_or_not_at_all() {
        let mut h = Homes::default();
        h.create("s", Kind::Segment, 8).unwrap();
        assert_eq!(h.fetch("s", 7).unwrap(), (0, Some(vec![0; 8])));
        assert_eq!(h.fetch("s", 0).unwrap(), (0, None), "unchanged");
        assert_eq!(h.store("s", &[(0, &[1, 2]), (6, &[9, 9])]).unwrap(), 1);
        assert_eq!(
            h.fetch("s", 0).unwrap().1,
            Some(vec![1, 2, 0, 0, 0, 0, 9, 9])
        );
        assert!(h.store("s", &[(0, &[5]), (7, &[1, 1])]).is_err());
        assert_eq!(
            h.fetch("s", 0).unwrap(),
            (1, Some(vec![1, 2, 0, 0, 0, 0, 9, 9])),
            "nothing applied"
        );
        assert!(h.fetch("m", 0).is_err());
    }

    #[test]
    fn barrier_places_are_handed_out_in_groups() {
        let mut h = Homes::default();
        h.create("b", Kind::Barrier, 2).unwrap();
        assert_eq!(h.rank("b", 2), Ok(0));
        assert!(h.rank("b", 3).is_err());
        assert_eq!(h.rank("b", 2), Ok(1));
        assert_eq!(h.rank("b", 2), Ok(2), "the first place of the next group");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Lock(u8),
        Unlock(u8),
        Withdraw(u8, u64),
        Post,
        Leave(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3).prop_map(Op::Lock),
            (0u8..3).prop_map(Op::Unlock),
            (0u8..3, 0u64..4).prop_map(|(s, q)| Op::Withdraw(s, q)),
            Just(Op::Post),
            (0u8..3).prop_map(Op::Leave),
        ]
    }

    proptest! {
        /// Against a reference model (a holder and a queue in arrival order): the home
        /// grants exactly when the model's holder changes to a new request, to that
        /// request, and sends nothing otherwise.
        #[test]
        fn mutex_matches_a_queue_model(ops in proptest::collection::vec(op(), 1..60)) {
            let mut h = Homes::default();
            h.create("m", Kind::Mutex, 0).unwrap();
            let mut holder: Option<Waiter> = None;
            let mut queue: VecDeque<Waiter> = VecDeque::new();
            let mut next = 0u64;
            for op in ops {
                let before = holder.clone();
                let acts = match op {
                    Op::Lock(s) => {
                        next += 1;
                        let x = w(&s.to_string(), next);
                        if holder.is_none() { holder = Some(x.clone()); } else { queue.push_back(x.clone()); }
                        h.lock("m", x)
                    }
                    Op::Unlock(s) => match holder.clone() {
                        Some(x) if x.space == s.to_string() => {
                            holder = queue.pop_front();
                            h.unlock("m", &x)
                        }
                        _ => h.unlock("m", &w(&s.to_string(), next + 1)),
                    },
                    Op::Withdraw(s, k) => {
                        let x = w(&s.to_string(), k);
                        queue.retain(|q| *q != x);
                        if holder.as_ref() == Some(&x) { holder = queue.pop_front(); }
                        h.withdraw("m", &x)
                    }
                    Op::Post => h.post("m"),
                    Op::Leave(s) => {
                        let s = s.to_string();
                        queue.retain(|q| q.space != s);
                        if holder.as_ref().is_some_and(|x| x.space == s) { holder = queue.pop_front(); }
                        h.space_left(&s).into_iter().map(|(_, a)| a).collect()
                    }
                };
                if holder != before && holder.is_some() {
                    prop_assert_eq!(acts.len(), 1);
                    match &acts[0] {
                        Action::Grant { to, .. } => prop_assert_eq!(Some(to), holder.as_ref()),
                        a => prop_assert!(false, "unexpected {:?}", a),
                    }
                } else {
                    prop_assert!(acts.is_empty(), "nothing to send, but {:?}", acts);
                }
            }
        }
    }
}
