//! Where completion work runs: the kernel's `rq_affinity`. The core only labels each finished
//! bio with its site; a threaded driver (io_uring) acts on the label, the simulator needs not.

/// The `rq_affinity` queue attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RqAffinity {
    /// 0: completion work runs where the device completed the request (the ring's thread).
    Device,
    /// 1: it is handed to the submitter's group (the threads sharing its hardware queue).
    #[default]
    Group,
    /// 2: it runs on exactly the submitting thread.
    Submitter,
}

impl RqAffinity {
    /// The mode for the sysfs value 0, 1 or 2.
    pub fn from_level(level: u8) -> Option<Self> {
        match level {
            0 => Some(Self::Device),
            1 => Some(Self::Group),
            2 => Some(Self::Submitter),
            _ => None,
        }
    }
}

/// Where one finished bio's completion work should run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionSite {
    /// On the thread of this hardware queue.
    Device(u32),
    /// On any thread of the group of this hardware queue.
    Group(u32),
    /// On this submitter's thread.
    Submitter(u32),
}

/// The site for a bio of submitter `ctx` (home queue `home`) completed on `hw_queue`.
pub fn site(mode: RqAffinity, hw_queue: u32, home: u32, ctx: u32) -> CompletionSite {
    match mode {
        RqAffinity::Device => CompletionSite::Device(hw_queue),
        RqAffinity::Group => CompletionSite::Group(home),
        RqAffinity::Submitter => CompletionSite::Submitter(ctx),
    }
}
