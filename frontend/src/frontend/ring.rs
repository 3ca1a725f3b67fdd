//! The io_uring side of a run on real devices, set up the same way by every front-end that
//! has one (jobs on files and block devices, the NBD server): the backend as the plan drives
//! it, the eventfd that wakes its thread, and the control socket that wakes it through that.

use std::path::Path;
use std::sync::Arc;

use crate::backend::ring::{Notifier, RingBackend, RingSetup, Target};
use crate::control::Control;
use crate::frontend::RunError;
use crate::frontend::plan::RunPlan;
use crate::policy::WasmRuntime;

/// The ring over `targets` with one buffer slot per entry of `slot_lens`, driven as `plan`
/// says (driver tags, SQPOLL, registered buffers, injected faults under its seed).
///
/// # Errors
/// The kernel refused the ring or its buffers.
pub fn backend(
    plan: &RunPlan,
    targets: &[Target],
    slot_lens: &[usize],
) -> Result<RingBackend, RunError> {
    let setup = RingSetup {
        sqpoll_idle_ms: plan.ring.sqpoll_idle_ms,
        fixed_buffers: plan.ring.fixed_buffers,
        faults: plan.faults,
    };
    Ok(RingBackend::new(
        targets,
        plan.queue.queue_depth,
        slot_lens,
        plan.seed,
        setup,
    )?)
}

/// An eventfd that wakes the ring's thread from other threads, watched by `backend`.
///
/// # Errors
/// The eventfd could not be made or watched.
pub fn notifier(backend: &mut RingBackend) -> Result<Arc<Notifier>, RunError> {
    let notifier = Notifier::new().map_err(|source| RunError::Ring {
        action: "creating an eventfd",
        source,
    })?;
    backend.watch(Arc::clone(&notifier))?;
    Ok(notifier)
}

/// The control socket at `path` for `lanes` devices, compiling what it swaps in with
/// `runtime`, waking the ring through `notifier` when a request comes.
///
/// # Errors
/// The socket could not be made.
pub fn control(
    (path, runtime): (&Path, &WasmRuntime),
    lanes: usize,
    notifier: &Arc<Notifier>,
) -> Result<Control, RunError> {
    let notifier = Arc::clone(notifier);
    let wake = Arc::new(move || notifier.notify());
    Control::start(path, runtime.clone(), lanes, wake)
        .map_err(|e| RunError::Setup(format!("{e:#}")))
}
