//! Where a network meets Space-Time Memory: records in from a channel or a queue, records out
//! into one, so that an S-Net stage can sit inside a Stampede pipeline. The connections may
//! be local or another address space's: the loops below run on the calling (task's) thread.

use stampede_core::{
    Channel, GetError, InputConnection, OutputConnection, PutError, Queue, Selector, StmError,
    Timestamp,
};

use super::record::Record;
use super::run::Run;
use crate::error::SnetError;

fn stm(what: &str, e: impl std::fmt::Display) -> SnetError {
    SnetError::Stream(format!("{what}: {e}"))
}

impl Run {
    /// Sends every item of a channel, in timestamp order, as the record `{field, <ts_tag>}`
    /// (the tag holds the item's timestamp), consuming each once the network has it. Returns
    /// how many were sent once the channel is closed and drained; the run stays open.
    pub fn feed_channel(
        &self,
        input: &InputConnection<Channel>,
        field: &str,
        ts_tag: &str,
    ) -> Result<usize, SnetError> {
        let mut sent = 0;
        loop {
            match input.get(Selector::NextUnseen) {
                Ok((ts, item)) => {
                    self.send(Record::new().field(field, item).tag(ts_tag, ts))?;
                    input
                        .consume(ts)
                        .map_err(|e: StmError| stm("consuming from the channel", e))?;
                    sent += 1;
                }
                Err(GetError::Closed) => return Ok(sent),
                Err(e) => return Err(stm("getting from the channel", e)),
            }
        }
    }

    /// As [`Run::feed_channel`], from a queue: each item goes to the network once, whichever
    /// other consumers the queue has.
    pub fn feed_queue(
        &self,
        input: &InputConnection<Queue>,
        field: &str,
        ts_tag: &str,
    ) -> Result<usize, SnetError> {
        let mut sent = 0;
        loop {
            match input.get() {
                Ok(q) => {
                    self.send(Record::new().field(field, q.item).tag(ts_tag, q.ts))?;
                    input
                        .consume(q.ticket)
                        .map_err(|e| stm("consuming from the queue", e))?;
                    sent += 1;
                }
                Err(GetError::Closed) => return Ok(sent),
                Err(e) => return Err(stm("getting from the queue", e)),
            }
        }
    }

    /// Puts every record the network emits into a channel at the timestamp its tag `ts_tag`
    /// holds, the field `field` as the item, until the run is closed and quiet. A record
    /// without them is an error that names it (the records before it were put).
    pub fn drain_into_channel(
        &self,
        output: &OutputConnection<Channel>,
        field: &str,
        ts_tag: &str,
    ) -> Result<usize, SnetError> {
        self.drain(field, ts_tag, |ts, item| output.put(ts, item).map(drop))
    }

    /// As [`Run::drain_into_channel`], into a queue.
    pub fn drain_into_queue(
        &self,
        output: &OutputConnection<Queue>,
        field: &str,
        ts_tag: &str,
    ) -> Result<usize, SnetError> {
        self.drain(field, ts_tag, |ts, item| output.put(ts, item).map(drop))
    }

    fn drain(
        &self,
        field: &str,
        ts_tag: &str,
        mut put: impl FnMut(Timestamp, stampede_core::Item) -> Result<(), PutError>,
    ) -> Result<usize, SnetError> {
        let mut put_count = 0;
        while let Some(r) = self.recv() {
            let (Some(item), Some(ts)) = (r.get_field(field), r.get_tag(ts_tag)) else {
                return Err(SnetError::Stream(format!(
                    "the network emitted {r}, which lacks field `{field}` or tag `<{ts_tag}>`"
                )));
            };
            put(ts, item.clone()).map_err(|e| stm("putting the network's output", e))?;
            put_count += 1;
        }
        Ok(put_count)
    }
}
