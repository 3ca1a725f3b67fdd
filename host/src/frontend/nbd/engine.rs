//! The NBD server as the engine's front-end: bios from the connections' inbox into the
//! engine, each finished bio back to the connection that sent it, and the server's
//! observers (metrics scrapes, the event file) served between turns.

use std::sync::atomic::Ordering;

use super::hub::{Event, Hub, Owner};
use crate::backend::ring::{Lease, RingBackend};
use crate::engine::{Done, Engine, Flow, Frontend};
use crate::frontend::jobs::real::RealError;
use crate::observe::events::file::Writer;
use crate::observe::metrics::{Endpoint, exposition};

/// The ring thread's side of the server.
pub struct Front<'a> {
    hub: &'a Hub,
    /// Per buffer slot, who hears when its bio finishes.
    owners: Vec<Option<Owner>>,
    inbox: Vec<super::hub::Submission>,
    events: Option<&'a mut Writer>,
    metrics: Option<&'a Endpoint>,
}

impl<'a> Front<'a> {
    /// The server's side over `hub`, whose arena has `slots` buffer slots.
    pub fn new(
        hub: &'a Hub,
        slots: usize,
        events: Option<&'a mut Writer>,
        metrics: Option<&'a Endpoint>,
    ) -> Self {
        Self {
            hub,
            owners: (0..slots).map(|_| None).collect(),
            inbox: Vec::new(),
            events,
            metrics,
        }
    }
}

impl Frontend<RingBackend> for Front<'_> {
    type Error = RealError;

    fn complete(&mut self, _now: u64, done: &[Done]) -> Result<(), RealError> {
        for finished in done {
            let lease = Lease::of_bio(finished.bio.bio);
            let Some(owner) = self.owners.get_mut(lease.index()).and_then(Option::take) else {
                continue;
            };
            if owner.frees {
                self.hub.pools.put(lease.slot(), &owner.quota);
            }
            // A connection whose replier is gone has nobody left to tell.
            let _ = owner.to.send(Event::Done {
                seq: owner.seq,
                status: finished.bio.status,
            });
        }
        Ok(())
    }

    fn issue(&mut self, now: u64, engine: &mut Engine<RingBackend>) -> Result<(), RealError> {
        self.hub.take_inbox(&mut self.inbox);
        for s in self.inbox.drain(..) {
            let lease = Lease::new(s.slot);
            self.owners[lease.index()] = Some(s.owner);
            engine.submit::<RealError>(now, s.bio)?;
        }
        Ok(())
    }

    fn settle(&mut self, _now: u64, engine: &mut Engine<RingBackend>) -> Result<(), RealError> {
        if let Some(metrics) = self.metrics {
            for scrape in metrics.take() {
                let page = exposition::render(&engine.views(), engine.swaps().len());
                let _ = scrape.send(page);
            }
        }
        if let Some(writer) = self.events.as_deref_mut() {
            let events = engine.take_events();
            writer.write(&events).map_err(|source| RealError::Ring {
                action: "writing --trace-events",
                source,
            })?;
        }
        Ok(())
    }

    /// Over once the server is stopping, no connection is left and no I/O is anywhere.
    fn flow(&mut self, engine: &Engine<RingBackend>) -> Flow {
        use crate::engine::Backend;
        let hub = self.hub;
        let quiet = engine.backend.inflight() == 0 && engine.queued() == 0;
        if hub.stopping.load(Ordering::Acquire)
            && hub.live.load(Ordering::Acquire) == 0
            && quiet
            && hub.inbox_is_empty()
        {
            Flow::Done
        } else {
            Flow::Wait
        }
    }

    fn next_wake(&self, _now: u64, _deadlines: bool) -> Option<u64> {
        None
    }

    /// The acceptor and the connections notify when they change what ends the loop.
    fn fed_from_outside(&self) -> bool {
        true
    }
}
