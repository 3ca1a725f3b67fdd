//! `schedhost bench --phases`: what one policy call costs, split by what it carries. Each
//! phase calls a real policy component (the bundled noop by default) many times in a loop
//! and reports ns per call; a phase's cost minus a smaller one's is what that part adds.
//! Benchmarks, not tests: the figures go to BENCHMARKS.md.

use std::time::Instant;

use schedhost_sdk::{
    Completion, MergeEvent, MergeKind, Op, PrioClass, Request, RequestId, Sector, packed,
};

use super::wasm::{LoadedPolicy, WasmPolicy, arm};
use super::{PolicyBackend, Turn, turn_by_parts};

/// One measured phase.
#[derive(Debug, Clone)]
pub struct Phase {
    /// What is measured.
    pub name: &'static str,
    /// Median ns per call over the rounds.
    pub ns: f64,
}

/// Measures each phase (or those whose name contains `only`) on a fresh instance of
/// `loaded`, `calls` calls per round, the median of `rounds` rounds.
///
/// # Errors
/// The component cannot be instantiated or a call fails.
pub fn measure(
    loaded: &LoadedPolicy,
    calls: u64,
    rounds: u32,
    only: Option<&str>,
) -> anyhow::Result<Vec<Phase>> {
    let mut policy = loaded.instantiate()?;
    policy.init_for_bench()?;
    let mut phases = Vec::new();
    let mut next_id = 0u64;
    let mut run = |name: &'static str,
                   body: &mut dyn FnMut(&mut WasmPolicy) -> anyhow::Result<()>|
     -> anyhow::Result<()> {
        if only.is_some_and(|only| !name.contains(only)) {
            return Ok(());
        }
        let ns = median_ns(calls, rounds, || body(&mut policy))?;
        phases.push(Phase { name, ns });
        Ok(())
    };
    run("arming the epoch deadline (and fuel, if on)", &mut |p| {
        let (store, ticks, fuel) = p.bench_parts();
        arm(store, ticks, fuel);
        Ok(())
    })?;
    run("two scalars in, one out (limit-depth)", &mut |p| {
        p.bench_limit_depth()
    })?;
    run(
        "7 scalars in, one out, no work (turn, no parts)",
        &mut |p| p.bench_turn(0, None, &[0; 5]).map(drop),
    )?;
    let done = Completion {
        id: RequestId(1),
        ctx: 0,
        op: Op::Read,
        sectors: 8,
        latency_ns: 1,
        service_ns: 1,
        status: 0,
    };
    let completion = packed::completion_words(&done);
    run("a list argument, 5 words (completed)", &mut |p| {
        p.bench_completed(&done)
    })?;
    run("a list result and post-return (dispatch, none)", &mut |p| {
        p.bench_dispatch().map(drop)
    })?;
    let request = |id: u64| Request {
        id: RequestId(id),
        ctx: 0,
        op: Op::Read,
        sector: Sector(id * 8),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: id,
    };
    run(
        "one request in, one id out as lists (insert-and-dispatch)",
        &mut |p| {
            next_id += 1;
            p.bench_insert_and_dispatch(&[request(next_id)]).map(drop)
        },
    )?;
    let batch: Vec<Request> = (1..=BATCH as u64).map(request).collect();
    run(
        "32 requests in, 32 ids out as lists (insert-and-dispatch), per call",
        &mut |p| p.bench_insert_and_dispatch(&batch).map(drop),
    )?;
    run("one request in, one id out as scalars (turn)", &mut |p| {
        next_id += 1;
        let parts = packed::TURN_REQUEST | packed::TURN_DISPATCH;
        let r = packed::request_words(&request(next_id));
        p.bench_turn(parts, None, &r).map(drop)
    })?;
    run(
        "a completion, one request in, one id out (turn-after-completion)",
        &mut |p| {
            next_id += 1;
            let parts = packed::TURN_REQUEST | packed::TURN_DISPATCH;
            let r = packed::request_words(&request(next_id));
            p.bench_turn(parts, Some(&completion), &r).map(drop)
        },
    )?;
    let merge = |id: u64| MergeEvent {
        target: RequestId(id),
        sector: Sector(id * 8),
        sectors: 16,
        kind: MergeKind::Back,
        absorbed: None,
    };
    let mut merge_turn = |p: &mut WasmPolicy, whole: bool| -> anyhow::Result<()> {
        next_id += 1;
        let (requests, merges) = ([request(next_id)], [merge(next_id - 1)]);
        let turn = Turn {
            completions: &[],
            merges: &merges,
            requests: &requests,
            dispatch: Some((0, 1)),
        };
        let answer = if whole {
            p.turn(0, &turn)
        } else {
            turn_by_parts(p, 0, &turn)
        }
        .map_err(|fault| anyhow::anyhow!("{fault}"))?;
        if let Some(answer) = answer {
            p.give_back(answer);
        }
        Ok(())
    };
    run(
        "a merge event, one request in, one id out (merged, insert-and-dispatch)",
        &mut |p| merge_turn(p, false),
    )?;
    run(
        "a merge event, one request in, one id out (turn-words)",
        &mut |p| merge_turn(p, true),
    )?;
    Ok(phases)
}

/// Requests in the batch phase: a full queue at the benchmark's iodepth 32.
const BATCH: usize = 32;

/// The median over `rounds` of the ns per call of `calls` calls of `body`.
fn median_ns(
    calls: u64,
    rounds: u32,
    mut body: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    let mut samples = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        for _ in 0..calls {
            body()?;
        }
        samples.push(start.elapsed().as_nanos() as f64 / calls.max(1) as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}
