//! `ssd`: a flash device of channels × dies. A request is split into pages striped over the
//! dies; each page occupies its die for the array time and its channel for the transfer.
//! Defaults follow MQSim's MLC configuration (Tavakkol et al., FAST'18, `ssdconfig.xml`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use schedhost_sdk::Op;

use super::{DeviceModel, DeviceRequest, EIO, Geometry, in_range};

/// Parameters of the flash model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SsdParams {
    /// Channels (MQSim default 8).
    pub channels: u32,
    /// Dies per channel (MQSim: 4 chips × 1 die; default 4).
    pub dies_per_channel: u32,
    /// Page size in bytes (MQSim default 8 KiB; 4 KiB here to match the host's block size).
    pub page_bytes: u32,
    /// Page read time, array to register (MQSim MLC: 75 µs).
    pub read_ns: u64,
    /// Page program time (75 µs, as DESIGN.md's MQSim-derived figure).
    pub program_ns: u64,
    /// Channel rate in bytes per second (MQSim ONFI: 333 MT/s × 8 bit).
    pub channel_bytes_per_s: u64,
    /// Controller overhead per request (firmware and PCIe round trip; 10 µs).
    pub overhead_ns: u64,
    /// Time each request already on the device adds to a new one's service (default 0): a
    /// device whose requests share one resource besides the dies (a virtual disk's host
    /// thread, one controller core), so that latency grows with the queue, `n` requests
    /// ahead adding `n × contention_ns`. `calibrate` fits it to a real device's latency
    /// at several depths; MQSim's flash has none.
    pub contention_ns: u64,
    /// Mean of an exponentially distributed time added to each request's completion
    /// (default 0): a device whose latency varies from request to request (a virtual
    /// disk's host scheduling, a flash device's own background work), so its tail is not
    /// its mean. The draws come from the model's own generator, seeded by the requests'
    /// order, so a run stays a function of its inputs. `calibrate` writes
    /// `jitter_permille` instead.
    pub jitter_ns: u64,
    /// Added to the jitter's mean, in thousandths of the request's own time on the device
    /// (its waits for dies and channels and its contention included; default 0): a device
    /// whose latency varies in proportion to itself. This machine's virtual disk keeps 4 KiB
    /// random reads' p99 about twice their mean from depth 1 to 32, where a constant jitter
    /// leaves a deep queue's p99 near its mean (1.4 of it at depth 32). `calibrate` fits it,
    /// in place of `jitter_ns`, to the p99 it probes at every depth.
    pub jitter_permille: u64,
    /// Requests sent at one instant complete together, when the slowest of them is done
    /// (default off): a virtual disk whose host takes the requests of one notification as
    /// a batch and signals their completions at once. This machine's runs its reads in
    /// lockstep: four jobs at QD1 got 99.8 % of their completions in groups of 4, at QD8
    /// under noop 99.1 % in groups of 32, each group the reads sent in one step of the
    /// host. `calibrate` sets it where its reads four deep came back at least half at once.
    pub complete_together: bool,
    /// Time each write on the device adds to a new request's service, beyond
    /// `contention_ns` (default 0): a device whose writes slow what runs beside them. This
    /// machine's virtual disk takes a 4 KiB random write alone in what it takes a read, yet
    /// four jobs of mixed reads and writes at QD1 complete about a sixth fewer than of reads
    /// alone. `calibrate` fits it to a mixed probe where it may write.
    pub write_contention_ns: u64,
    /// Capacity (default 512 GiB).
    pub capacity_sectors: u64,
    /// Hardware queues (NVMe submission queues; default 2, one per core of the test machine).
    pub hw_queues: u32,
    /// Queue depth per hardware queue (default 128).
    pub queue_depth: u32,
    /// Largest request (default 256 sectors = 128 KiB, a common NVMe MDTS).
    pub max_sectors: u32,
    /// The queue's `rotational` attribute it reports (default 0). Policies that idle read
    /// it; a spec fitted to a real device takes that device's (a virtio disk says 1 over
    /// flash).
    pub rotational: bool,
}

impl Default for SsdParams {
    fn default() -> Self {
        Self {
            channels: 8,
            dies_per_channel: 4,
            page_bytes: 4096,
            read_ns: 75_000,
            program_ns: 75_000,
            channel_bytes_per_s: 333_000_000,
            overhead_ns: 10_000,
            contention_ns: 0,
            jitter_ns: 0,
            jitter_permille: 0,
            complete_together: false,
            write_contention_ns: 0,
            capacity_sectors: 1 << 30,
            hw_queues: 2,
            queue_depth: 128,
            max_sectors: 256,
            rotational: false,
        }
    }
}

/// The flash device.
#[derive(Debug)]
pub struct Ssd {
    params: SsdParams,
    die_free: Vec<u64>,
    channel_free: Vec<u64>,
    /// Completions by time, then submission order.
    due: BinaryHeap<Reverse<Due>>,
    seq: u64,
    /// The requests sent at the last instant, held until the slowest is done, under
    /// `complete_together`.
    group: Group,
}

/// A request on the device: when it completes, in what order it was sent, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: u64,
    seq: u64,
    id: u64,
    status: i32,
    write: bool,
}

/// Requests sent at one instant (`at`), and when the slowest of them is done.
#[derive(Debug, Default)]
struct Group {
    at: u64,
    end: u64,
    /// When it completes: `end` and the group's jitter, drawn as its first request's would
    /// be; set as each request joins, so that the engine's polls and the contention count
    /// read it rather than draw it again (None without a group).
    due: Option<u64>,
    /// Each, its completion time to be the group's.
    members: Vec<Due>,
}

/// Requests on the device, and the writes among them.
#[derive(Debug, Clone, Copy, Default)]
struct Ahead {
    all: u64,
    writes: u64,
}

impl Ssd {
    /// A flash device with `params`.
    pub fn new(params: SsdParams) -> Self {
        let dies = (params.channels * params.dies_per_channel).max(1) as usize;
        Self {
            params,
            die_free: vec![0; dies],
            channel_free: vec![0; params.channels.max(1) as usize],
            due: BinaryHeap::new(),
            seq: 0,
            group: Group::default(),
        }
    }

    /// The next request sent, to complete at `at`: it takes the next place in the order sent.
    fn next_due(&mut self, at: u64, id: u64, status: i32, write: bool) -> Due {
        self.seq += 1;
        let seq = self.seq;
        Due {
            at,
            seq,
            id,
            status,
            write,
        }
    }

    /// A request sent at `now_ns` and done at `done` joins the group sent at that instant,
    /// closing the last one if it was sent before.
    fn join_group(&mut self, now_ns: u64, done: u64, id: u64, write: bool) {
        if !self.group.members.is_empty() && self.group.at != now_ns {
            self.close_group();
        }
        if self.group.members.is_empty() {
            (self.group.at, self.group.end) = (now_ns, done);
        }
        self.group.end = self.group.end.max(done);
        let due = self.next_due(done, id, 0, write);
        self.group.members.push(due);
        let first = self.group.members[0].seq;
        let own = self.group.end - self.group.at;
        self.group.due = Some(self.group.end.saturating_add(self.jitter(own, first - 1)));
    }

    /// The jitter of a request (or a group) `own_ns` on the device, from draw `n`.
    fn jitter(&self, own_ns: u64, n: u64) -> u64 {
        let own = own_ns.saturating_mul(self.params.jitter_permille) / 1000;
        match own.saturating_add(self.params.jitter_ns) {
            0 => 0,
            mean => exponential_ns(mean, n),
        }
    }

    /// The group's requests go to the completions, all at its slowest one's time and one
    /// jitter drawn for the group: the host signals them at once.
    fn close_group(&mut self) {
        let Some(at) = self.group.due.take() else {
            return;
        };
        for due in self.group.members.drain(..) {
            self.due.push(Reverse(Due { at, ..due }));
        }
    }

    /// Requests on the device at `now_ns` (not yet done), counted only where they cost a
    /// new one time.
    fn ahead(&self, now_ns: u64) -> Ahead {
        let p = &self.params;
        if p.contention_ns == 0 && p.write_contention_ns == 0 {
            return Ahead::default();
        }
        let grouped: &[Due] = if self.group.due.is_some_and(|at| at > now_ns) {
            &self.group.members
        } else {
            &[]
        };
        let on_device = self
            .due
            .iter()
            .map(|Reverse(d)| d)
            .filter(|d| d.at > now_ns);
        on_device
            .chain(grouped)
            .fold(Ahead::default(), |a, d| Ahead {
                all: a.all + 1,
                writes: a.writes + u64::from(d.write),
            })
    }

    /// When the last page of `request` is done, occupying dies and channels from `now_ns`.
    fn service(&mut self, now_ns: u64, request: &DeviceRequest) -> u64 {
        let p = &self.params;
        let ahead = self.ahead(now_ns);
        let start = now_ns
            .saturating_add(p.overhead_ns)
            .saturating_add(ahead.all.saturating_mul(p.contention_ns))
            .saturating_add(ahead.writes.saturating_mul(p.write_contention_ns));
        match request.op {
            Op::Flush => return self.die_free.iter().copied().max().unwrap_or(0).max(start),
            Op::Discard => return start,
            Op::Read | Op::Write => {}
        }
        let sectors_per_page = u64::from(p.page_bytes / 512).max(1);
        let first = request.sector / sectors_per_page;
        let last = (request.end() - 1) / sectors_per_page;
        let transfer_ns = u64::from(p.page_bytes) * 1_000_000_000 / p.channel_bytes_per_s.max(1);
        let mut done = start;
        for page in first..=last {
            let die = (page % self.die_free.len() as u64) as usize;
            let channel = die % self.channel_free.len();
            let finished = if request.op == Op::Read {
                let sensed = self.die_free[die].max(start) + p.read_ns;
                let sent = self.channel_free[channel].max(sensed) + transfer_ns;
                self.die_free[die] = sensed;
                self.channel_free[channel] = sent;
                sent
            } else {
                let sent = self.channel_free[channel].max(start) + transfer_ns;
                let programmed = self.die_free[die].max(sent) + p.program_ns;
                self.channel_free[channel] = sent;
                self.die_free[die] = programmed;
                programmed
            };
            done = done.max(finished);
        }
        done
    }
}

/// An exponentially distributed time of mean `mean_ns`, from draw number `n` (SplitMix64
/// of it, so every draw is a function of `n` alone).
fn exponential_ns(mean_ns: u64, n: u64) -> u64 {
    let mut z = n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // A uniform draw in (0, 1]: never 0, whose logarithm is unbounded.
    let u = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
    // At most 53 × ln 2 ≈ 36.7 means: bounded whatever the draw.
    (-(mean_ns as f64) * u.ln()).round() as u64
}

impl DeviceModel for Ssd {
    fn geometry(&self) -> Geometry {
        Geometry {
            capacity_sectors: self.params.capacity_sectors,
            hw_queues: self.params.hw_queues,
            queue_depth: self.params.queue_depth,
            max_sectors: self.params.max_sectors,
            rotational: self.params.rotational,
        }
    }

    fn submit(&mut self, now_ns: u64, request: DeviceRequest) {
        let (id, write) = (request.id, request.op == Op::Write);
        if !in_range(&request, self.params.capacity_sectors) {
            let due = self.next_due(now_ns, id, EIO, write);
            self.due.push(Reverse(due));
            return;
        }
        let done = self.service(now_ns, &request);
        if self.params.complete_together {
            self.join_group(now_ns, done, id, write);
            return;
        }
        let at = done.saturating_add(self.jitter(done - now_ns, self.seq));
        let due = self.next_due(at, id, 0, write);
        self.due.push(Reverse(due));
    }

    fn next_event(&self) -> Option<u64> {
        let due = self.due.peek().map(|Reverse(d)| d.at);
        match (due, self.group.due) {
            (Some(d), Some(g)) => Some(d.min(g)),
            (d, g) => d.or(g),
        }
    }

    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)> {
        if self.group.due.is_some_and(|at| at <= now_ns) {
            self.close_group();
        }
        match self.due.peek() {
            Some(Reverse(d)) if d.at <= now_ns => self.due.pop().map(|Reverse(d)| (d.id, d.status)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page on each of three dies, read at `at_ns`; when each is done, in id order.
    fn three_reads(contention_ns: u64, at_ns: [u64; 3]) -> Vec<u64> {
        let mut ssd = Ssd::new(SsdParams {
            channels: 8,
            dies_per_channel: 1,
            read_ns: 20_000,
            overhead_ns: 0,
            channel_bytes_per_s: 4096 * 1_000_000_000,
            contention_ns,
            ..SsdParams::default()
        });
        let mut done = vec![0; 3];
        for (i, at) in at_ns.into_iter().enumerate() {
            while let Some(t) = ssd.next_event().filter(|&t| t <= at) {
                while let Some((id, _)) = ssd.poll(t) {
                    done[id as usize] = t;
                }
            }
            let request = DeviceRequest {
                id: i as u64,
                op: Op::Read,
                sector: i as u64 * 8,
                sectors: 8,
            };
            ssd.submit(at, request);
        }
        while let Some(t) = ssd.next_event() {
            while let Some((id, _)) = ssd.poll(t) {
                done[id as usize] = t;
            }
        }
        done
    }

    #[test]
    fn each_request_on_the_device_adds_contention_to_a_new_ones_service() {
        // Three dies read in parallel: without contention all three take 20 µs (+1 ns of
        // transfer); with 5 µs, the second pays for one ahead and the third for two.
        assert_eq!(three_reads(0, [0, 0, 0]), [20_001, 20_001, 20_001]);
        assert_eq!(three_reads(5_000, [0, 0, 0]), [20_001, 25_001, 30_001]);
    }

    #[test]
    fn jitter_adds_a_time_of_the_mean_asked_with_a_tail_and_the_same_draws_every_run() {
        let draws: Vec<u64> = (0..20_000).map(|n| exponential_ns(10_000, n)).collect();
        let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
        assert!((9_500.0..=10_500.0).contains(&mean), "{mean}");
        let mut sorted = draws.clone();
        sorted.sort_unstable();
        // An exponential's 99th percentile is ln(100) ≈ 4.6 means.
        let p99 = sorted[sorted.len() * 99 / 100] as f64;
        assert!((42_000.0..=50_000.0).contains(&p99), "{p99}");
        assert_eq!(
            draws,
            (0..20_000)
                .map(|n| exponential_ns(10_000, n))
                .collect::<Vec<_>>()
        );
    }

    /// Dies of 20 µs reads and programs, one per channel, no overhead, a channel that sends
    /// a page in 1 ns.
    fn plain(channels: u32) -> SsdParams {
        SsdParams {
            channels,
            dies_per_channel: 1,
            read_ns: 20_000,
            program_ns: 20_000,
            overhead_ns: 0,
            channel_bytes_per_s: 4096 * 1_000_000_000,
            ..SsdParams::default()
        }
    }

    /// Reads 0, 1 and 2 of pages 0, 1 and 2 (dies 0, 1 and 2 where there are three).
    const THREE_READS: [(u64, Op, u64); 3] = [(0, Op::Read, 0), (1, Op::Read, 1), (2, Op::Read, 2)];

    /// Sends each (id, op, page) at `at_ns`.
    fn send(ssd: &mut Ssd, at_ns: u64, requests: &[(u64, Op, u64)]) {
        for &(id, op, page) in requests {
            let sector = page * 8;
            let sectors = 8;
            ssd.submit(
                at_ns,
                DeviceRequest {
                    id,
                    op,
                    sector,
                    sectors,
                },
            );
        }
    }

    /// Every completion left, as (id, time), in the order they come.
    fn drain(ssd: &mut Ssd) -> Vec<(u64, u64)> {
        let mut done = Vec::new();
        while let Some(t) = ssd.next_event() {
            while let Some((id, _)) = ssd.poll(t) {
                done.push((id, t));
            }
        }
        done
    }

    #[test]
    fn a_jitter_in_thousandths_grows_with_the_requests_own_time_on_the_device() {
        // Three reads of one die sent together: 20, 40 and 60 µs on the device (each waits
        // for the one before), so their jitters' means are 10, 20 and 30 µs at 500 ‰.
        let mut ssd = Ssd::new(SsdParams {
            jitter_permille: 500,
            ..plain(1)
        });
        send(&mut ssd, 0, &THREE_READS);
        let mut done = drain(&mut ssd);
        done.sort_unstable();
        // The channel sends each page 1 ns after its die reads it.
        for (id, at) in done {
            let own = (id + 1) * 20_000 + 1;
            assert_eq!(at, own + exponential_ns(own / 2, id), "read {id}");
        }
    }

    #[test]
    fn reads_sent_at_one_instant_complete_together_when_the_slowest_is_done() {
        // Two reads on die 0 and one on die 1 sent at 0 (20, 40 and 20 µs on their own),
        // then one on die 2 sent at 10 µs, once the first three are on the device.
        let mut ssd = Ssd::new(SsdParams {
            complete_together: true,
            ..plain(8)
        });
        send(
            &mut ssd,
            0,
            &[(0, Op::Read, 0), (1, Op::Read, 8), (2, Op::Read, 1)],
        );
        assert_eq!(ssd.next_event(), Some(40_001));
        send(&mut ssd, 10_000, &[(3, Op::Read, 2)]);
        // The first three at the slowest's time, in the order sent; the fourth on its own.
        assert_eq!(
            drain(&mut ssd),
            [(3, 30_001), (0, 40_001), (1, 40_001), (2, 40_001)]
        );
    }

    #[test]
    fn a_groups_completion_is_announced_at_the_time_it_happens_its_jitter_included() {
        let mut ssd = Ssd::new(SsdParams {
            jitter_permille: 500,
            complete_together: true,
            ..plain(8)
        });
        send(&mut ssd, 0, &THREE_READS);
        let at = ssd.next_event().expect("the group is due");
        // One draw for the group, as its first read's: past the slowest's 20 µs.
        assert_eq!(at, 20_001 + exponential_ns(10_000, 0));
        assert!(ssd.poll(at - 1).is_none());
        assert_eq!(drain(&mut ssd), [(0, at), (1, at), (2, at)]);
    }

    #[test]
    fn each_write_on_the_device_adds_its_contention_to_a_new_requests_service() {
        // A write on die 0, then two reads on dies 1 and 2, all sent at 0: each read pays
        // 7 µs for the write ahead of it, and nothing for the read.
        let mut ssd = Ssd::new(SsdParams {
            write_contention_ns: 7_000,
            ..plain(8)
        });
        send(
            &mut ssd,
            0,
            &[(0, Op::Write, 0), (1, Op::Read, 1), (2, Op::Read, 2)],
        );
        assert_eq!(drain(&mut ssd), [(0, 20_001), (1, 27_001), (2, 27_001)]);
    }

    #[test]
    fn a_request_pays_no_contention_for_those_done_before_it_came() {
        assert_eq!(
            three_reads(5_000, [0, 30_000, 60_000]),
            [20_001, 50_001, 80_001]
        );
    }
}
