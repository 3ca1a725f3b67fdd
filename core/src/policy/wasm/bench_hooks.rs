//! Direct calls for the phase benchmark ([`crate::policy::phases`]), each one interface call,
//! kept out of the policy runtime's own code.

use super::*;

impl WasmPolicy {
    pub(in crate::policy) fn init_for_bench(&mut self) -> anyhow::Result<()> {
        let setup = Setup {
            hw_queues: 1,
            queue_depth: 1024,
            nr_requests: 1024,
            rotational: false,
        };
        PolicyBackend::init(self, &setup, &[])?.map_err(anyhow::Error::msg)
    }

    pub(in crate::policy) fn bench_parts(&mut self) -> (&mut Store<Caps>, u64, Option<u64>) {
        (&mut self.store, self.ticks, self.fuel)
    }

    pub(in crate::policy) fn bench_limit_depth(&mut self) -> anyhow::Result<()> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .limit_depth(&mut self.store, schedhost_sdk::Op::Read, true)?;
        Ok(())
    }

    /// `turn` (or, with a completion in `c`, `turn-after-completion`) with `parts`, a
    /// dispatch budget of 1 on queue 0.
    pub(in crate::policy) fn bench_turn(
        &mut self,
        parts: u64,
        c: Option<&[u64; packed::WORDS]>,
        r: &[u64; packed::WORDS],
    ) -> anyhow::Result<(u64, u64)> {
        arm(&mut self.store, self.ticks, self.fuel);
        Ok(match c {
            None => {
                let control = packed::turn_control(parts, 0, 1);
                self.calls.turn_flat(&mut self.store, 0, control, r)?
            }
            Some(c) => {
                let control = packed::turn_control(parts | packed::TURN_COMPLETION, 0, 1);
                self.calls
                    .turn_after_completion(&mut self.store, 0, control, c, r)?
            }
        })
    }

    pub(in crate::policy) fn bench_completed(&mut self, done: &Completion) -> anyhow::Result<()> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .completed(&mut self.store, 0, std::slice::from_ref(done))?;
        Ok(())
    }

    pub(in crate::policy) fn bench_dispatch(&mut self) -> anyhow::Result<usize> {
        arm(&mut self.store, self.ticks, self.fuel);
        Ok(self
            .calls
            .dispatch(&mut self.store, 0, 0, 1)
            .map(|answer| answer.ids.len())?)
    }

    /// The budget is one id per request.
    pub(in crate::policy) fn bench_insert_and_dispatch(
        &mut self,
        requests: &[Request],
    ) -> anyhow::Result<usize> {
        arm(&mut self.store, self.ticks, self.fuel);
        let budget = requests.len() as u32;
        Ok(self
            .calls
            .insert_and_dispatch(&mut self.store, 0, requests, 0, budget)
            .map(|answer| answer.ids.len())?)
    }
}
