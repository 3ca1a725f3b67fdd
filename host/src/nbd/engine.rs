//! The ring thread of the NBD server: bios from the connections into the cores, dispatch
//! through io_uring, and each finished bio back to the connection that sent it.

use std::sync::atomic::Ordering;

use super::hub::{Event, Hub, Owner};
use crate::control::Control;
use crate::events::file::Writer;
use crate::metrics::{Endpoint, exposition};
use crate::outcome::SwapRecord;
use crate::uring::{Devices, Lease, RealError, StallWatch};

/// Runs until the server is stopping, no connection is left and no I/O is in flight.
///
/// # Errors
/// A [`RealError`] that ends the server: a policy fault under `--on-fault abort`, a stall
/// no fallback could clear, or io_uring failing.
pub fn run(
    hub: &Hub,
    devices: &mut Devices,
    slots: usize,
    control: Option<&Control>,
    swaps: &mut Vec<SwapRecord>,
    mut events: Option<&mut Writer>,
    metrics: Option<&Endpoint>,
) -> Result<(), RealError> {
    let mut owners: Vec<Option<Owner>> = (0..slots).map(|_| None).collect();
    let mut inbox = Vec::new();
    let mut stall = StallWatch::default();
    loop {
        hub.take_inbox(&mut inbox);
        let now = hub.now();
        for s in inbox.drain(..) {
            let lease = Lease::new(s.slot);
            owners[lease.index()] = Some(s.owner);
            devices.submit(now, lease, s.bio, 0)?;
        }
        if let Some(control) = control {
            devices.serve(control, now, swaps)?;
        }
        if let Some(metrics) = metrics {
            for scrape in metrics.take() {
                let _ = scrape.send(exposition::render(&devices.views(), swaps.len()));
            }
        }
        devices.reap(|| hub.now())?;
        devices.run(hub.now())?;
        for finished in devices.done.drain(..) {
            let lease = finished.lease;
            let Some(owner) = owners.get_mut(lease.index()).and_then(Option::take) else {
                continue;
            };
            if owner.frees {
                hub.pools.put(lease.slot(), &owner.quota);
            }
            // A connection whose replier is gone has nobody left to tell.
            let _ = owner.to.send(Event::Done {
                seq: owner.seq,
                status: finished.done.status,
            });
        }
        if let Some(writer) = events.as_deref_mut() {
            record(writer, devices)?;
        }
        let quiet = devices.inflight() == 0 && devices.queued() == 0;
        if hub.stopping.load(Ordering::Acquire)
            && hub.live.load(Ordering::Acquire) == 0
            && quiet
            && hub.inbox_is_empty()
        {
            return Ok(());
        }
        // The acceptor and the repliers notify when they change what ends the loop.
        devices.idle(|| hub.now(), &mut stall)?;
    }
}

/// Writes the events the core recorded since the last call.
fn record(writer: &mut Writer, devices: &mut Devices) -> Result<(), RealError> {
    let events = devices.take_events();
    writer.write(&events).map_err(|source| RealError::Ring {
        action: "writing --trace-events",
        source,
    })
}
