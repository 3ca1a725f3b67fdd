//! chaos: an honest FIFO until its `after`-th dispatch call, then the misbehaviour `mode`
//! names. The sandbox tests run it as a component to prove the host survives each one.
//!
//! | mode | from then on |
//! | --- | --- |
//! | 0 | stays honest |
//! | 1 | loops forever in `dispatch` |
//! | 2 | panics (a trap) |
//! | 3 | allocates until memory runs out |
//! | 4 | dispatches an id it was never given |
//! | 5 | dispatches the same id twice |
//! | 6 | never dispatches again, and asks for no wake-up |
//! | 7 | spins `spin` million iterations per call, then answers honestly |
//! | 8 | traps in `restore-state`, and saves garbage |
//! | 9 | answers nothing and asks to be woken in the past, forever |
//! | 10 | never dispatches again, and asks to be woken an hour from now, each time |
//! | 11 | never dispatches again, and asks to be woken 1 ns from now, each time |
//! | 12 | dispatches one request every 100 000 calls, asking to be woken 1 ns later between |
//!
//! Modes that misbehave elsewhere than in `dispatch` (`after` counts those calls instead):
//!
//! | mode | misbehaviour |
//! | --- | --- |
//! | 13 | panics in `merged` after `after` merge notifications |
//! | 14 | forgets what merges absorbed after `after` notifications, and dispatches those ids |
//! | 15 | saves the ids it last sent in its state and queues them again on restore |
//! | 16 | forgets the requests a busy device sent back (`requeue`) |

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use schedhost_sdk::{Dispatch, IdSet, MergeEvent, Policy, Request, RequestId, Setup, TunableSpec};

const TUNABLES: &[TunableSpec<Chaos>] = &[
    TunableSpec {
        name: "mode",
        default: 0,
        min: 0,
        max: 16,
        unit: "",
        help: "the misbehaviour (see the crate docs)",
        field: |p| &mut p.mode,
    },
    TunableSpec {
        name: "after",
        default: 0,
        min: 0,
        max: 1_000_000_000,
        unit: "calls",
        help: "honest dispatch calls before misbehaving",
        field: |p| &mut p.after,
    },
    TunableSpec {
        name: "panic_on_set",
        default: 0,
        min: 0,
        max: 1,
        unit: "",
        help: "setting it to 1 panics inside `set`",
        field: |p| &mut p.panic_on_set,
    },
    TunableSpec {
        name: "spin",
        default: 1,
        min: 0,
        max: 100_000,
        unit: "M iterations",
        help: "work per call in mode 7",
        field: |p| &mut p.spin,
    },
];

/// The chaos policy.
#[derive(Debug, Default)]
pub struct Chaos {
    queue: VecDeque<RequestId>,
    absorbed: IdSet,
    mode: i64,
    after: i64,
    panic_on_set: i64,
    spin: i64,
    calls: i64,
    merges: i64,
    /// The ids it last dispatched (mode 15 leaks them into its saved state).
    sent: VecDeque<RequestId>,
    /// Keeps the hog's allocations alive.
    hoard: Vec<Vec<u8>>,
}

impl Policy for Chaos {
    const NAME: &'static str = "chaos";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const COMPLETIONS: bool = false;
    // Its own filter, so the SDK never calls `dispatch` twice and `after` counts calls.
    const HANDLES_ABSORBED: bool = true;

    fn new(_setup: &Setup) -> Self {
        Self {
            spin: 1,
            ..Self::default()
        }
    }

    fn retuned(&mut self, name: &str) {
        if name == "panic_on_set" && self.panic_on_set == 1 {
            panic!("chaos: panicking in set on purpose");
        }
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        self.queue.extend(requests.iter().map(|r| r.id));
    }

    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        if self.mode != 16 {
            self.insert(now_ns, requests);
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        self.calls += 1;
        // Modes 13 to 15 misbehave outside dispatch: their `after` counts other calls.
        if self.calls <= self.after || self.mode >= 13 {
            self.honest(budget, out);
            if self.mode == 15 {
                self.sent.extend(out.ids.iter().copied());
                let excess = self.sent.len().saturating_sub(64);
                self.sent.drain(..excess);
            }
            return;
        }
        match self.mode {
            1 => loop {
                self.calls = std::hint::black_box(self.calls.wrapping_add(1));
            },
            2 => panic!("chaos: panicking on purpose"),
            3 => loop {
                let mut block = vec![0u8; 1 << 20];
                block[0] = 1;
                self.hoard.push(std::hint::black_box(block));
            },
            4 => out.ids.push(RequestId(0x0bad_0000_0bad)),
            5 => {
                if let Some(&id) = self.queue.front() {
                    out.ids.extend([id, id]);
                }
            }
            6 => {}
            7 => {
                let mut x = 0u64;
                for i in 0..self.spin.max(0) as u64 * 1_000_000 {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                self.honest(budget, out);
            }
            9 => out.wake_at_ns = Some(now_ns.saturating_sub(1)),
            10 => out.wake_at_ns = Some(now_ns.saturating_add(3_600_000_000_000)),
            11 => out.wake_at_ns = Some(now_ns.saturating_add(1)),
            12 if self.calls % 100_000 == 0 => self.honest(1, out),
            12 => out.wake_at_ns = Some(now_ns.saturating_add(1)),
            _ => self.honest(budget, out),
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        self.merges += 1;
        let late = self.merges > self.after;
        if self.mode == 13 && late {
            panic!("chaos: panicking in merged on purpose");
        }
        if let Some(gone) = event.absorbed
            && !(self.mode == 14 && late)
        {
            self.absorbed.insert(gone);
        }
    }

    fn save_state(&self) -> Vec<u8> {
        match self.mode {
            8 => vec![0xde, 0xad],
            15 => self.sent.iter().flat_map(|id| id.0.to_le_bytes()).collect(),
            _ => Vec::new(),
        }
    }

    fn restore_state(&mut self, state: &[u8]) -> Result<(), String> {
        if self.mode == 8 || state == [0xde, 0xad] {
            panic!("chaos: cannot make sense of {} bytes of state", state.len());
        }
        if self.mode == 15 {
            // Requests the old instance already sent: the device has them, or had them.
            for word in state.chunks_exact(8).rev() {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(word);
                self.queue.push_front(RequestId(u64::from_le_bytes(bytes)));
            }
        }
        Ok(())
    }
}

impl Chaos {
    fn honest(&mut self, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            if self.absorbed.is_empty() || !self.absorbed.remove(&id) {
                out.ids.push(id);
            }
        }
    }
}

schedhost_sdk::export!(Chaos);
