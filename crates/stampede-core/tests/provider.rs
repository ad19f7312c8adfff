//! The provider interface: what the core keeps for connections to containers served
//! elsewhere (design §1.1). A backend over a plain map records what each call saw.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use stampede_core::provider::{self, Backend, Consume, Got, Link, Put, TaskRef};
use stampede_core::{
    Container, ContainerId, ContainerOptions, Correlator, GetError, HoldCause, Item, Match,
    Neighbors, PutError, Runtime, Selector, StmError, Timestamp, Wait, ZoneId, INFINITY,
};

#[derive(Default)]
struct Log {
    items: BTreeMap<Timestamp, Item>,
    /// Whether each put found a pending-put term in the watermark while in flight.
    held: Vec<bool>,
    /// What the put itself reported as the task's visibility before it.
    reported: Vec<Timestamp>,
    refuse_consume: Option<StmError>,
    detached: usize,
}

#[derive(Clone, Default)]
struct MapBackend {
    log: Arc<Mutex<Log>>,
    no_hooks: bool,
}

struct MapLink {
    log: Arc<Mutex<Log>>,
    task: TaskRef,
}

impl Backend for MapBackend {
    fn id(&self) -> ContainerId {
        ContainerId(7)
    }
    fn zone(&self) -> ZoneId {
        ZoneId::DEFAULT
    }
    fn name(&self) -> Option<&str> {
        None
    }
    fn owner(&self) -> &str {
        "map"
    }
    fn close(&self) -> Result<(), StmError> {
        Ok(())
    }
    fn attach(&self, task: &TaskRef, _input: bool) -> Result<Box<dyn Link>, StmError> {
        Ok(Box::new(MapLink {
            log: self.log.clone(),
            task: task.clone(),
        }))
    }
    fn on_arrival(&self, f: provider::ArrivalCallback) -> Result<u64, StmError> {
        drop(f);
        if self.no_hooks {
            Err(StmError::Unreachable("the map went away".into()))
        } else {
            Ok(1)
        }
    }
}

impl Link for MapLink {
    fn put(&self, p: Put<'_>) -> Result<u64, PutError> {
        let mut l = self.log.lock().unwrap();
        let report = self.task.runtime().explain(ZoneId::DEFAULT);
        l.held.push(
            report
                .holds
                .iter()
                .any(|h| h.ts == p.ts && matches!(h.cause, HoldCause::PendingPut { .. })),
        );
        l.reported.push(p.visibility);
        l.items.insert(p.ts, p.item);
        Ok(0)
    }
    fn get(&self, sel: Selector, _: Wait) -> Result<Got, GetError> {
        let l = self.log.lock().unwrap();
        let (ts, item) = match sel {
            Selector::Exact(t) => l.items.get_key_value(&t),
            _ => l.items.iter().next(),
        }
        .ok_or(GetError::Unavailable(Neighbors::default()))?;
        Ok(Got {
            ts: *ts,
            seq: *ts as u64,
            item: item.clone(),
        })
    }
    fn consume(&self, _: Consume) -> Result<(), StmError> {
        match self.log.lock().unwrap().refuse_consume.clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn detach(&self) {
        self.log.lock().unwrap().detached += 1;
    }
}

#[test]
fn puts_in_flight_hold_the_watermark_but_register_writes_do_not() {
    let rt = Runtime::new();
    let b = MapBackend::default();
    let ch = provider::channel(Arc::new(b.clone()));
    let reg = provider::register(Arc::new(b.clone()));
    let t = rt.task(5).unwrap();
    t.attach_output(&ch).unwrap().put(9, "x").unwrap();
    t.attach_output(&reg).unwrap().write("mode").unwrap();
    let l = b.log.lock().unwrap();
    // In flight, the channel put was a watermark term; the register write was none.
    assert_eq!(l.held, vec![true, false]);
    assert_eq!(l.reported, vec![5, 5]);
    drop(l);
    assert_eq!(t.visibility(), 5);
    assert!(!ch.is_local() && ch.owner() == Some("map"));
}

#[test]
fn open_items_count_until_consumed_or_detached() {
    let rt = Runtime::new();
    let b = MapBackend::default();
    b.log.lock().unwrap().items.insert(3, Item::from("three"));
    let ch = provider::channel(Arc::new(b.clone()));
    let t = rt.task(INFINITY).unwrap();
    let input = t.attach_input(&ch).unwrap();
    assert_eq!(input.get(Selector::Oldest).unwrap().0, 3);
    assert_eq!(t.visibility(), 3); // the open item holds the task
                                   // A refusal keeps the item open; a connection the owner no longer has releases it.
    b.log.lock().unwrap().refuse_consume = Some(StmError::Closed);
    assert_eq!(input.consume(3), Err(StmError::Closed));
    assert_eq!(t.visibility(), 3);
    b.log.lock().unwrap().refuse_consume = Some(StmError::Detached);
    assert_eq!(input.consume(3), Err(StmError::Detached));
    assert_eq!(t.visibility(), INFINITY);
    // The task's exit detaches each link once, and its connections then report it.
    let input2 = t.attach_input(&ch).unwrap();
    drop(t);
    assert_eq!(b.log.lock().unwrap().detached, 2);
    assert_eq!(
        input2.try_get(Selector::Oldest).unwrap_err(),
        GetError::Detached
    );
    drop(input);
    drop(input2);
    assert_eq!(b.log.lock().unwrap().detached, 2);
}

#[test]
fn a_correlator_whose_input_cannot_subscribe_fails_with_the_reason() {
    let rt = Runtime::new();
    let local = rt.channel(ContainerOptions::default()).unwrap();
    let remote = provider::channel(Arc::new(MapBackend {
        no_hooks: true,
        ..MapBackend::default()
    }));
    let t = rt.task(0).unwrap();
    let e = Correlator::new(
        vec![
            t.attach_input(&local).unwrap(),
            t.attach_input(&remote).unwrap(),
        ],
        Match::Exact,
    )
    .unwrap_err();
    assert!(matches!(e, StmError::Unreachable(_)), "{e:?}");
}
