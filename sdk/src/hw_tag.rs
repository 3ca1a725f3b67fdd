//! Whether the device queues commands of its own (`hw_tag`), as cfq and bfq estimate it from
//! the requests on it (`cfq_update_hw_tag`, `bfq_update_hw_tag`): over enough samples taken
//! while the scheduler had requests to give it, a device that held several at once queues.
//! Unknown counts as queueing, as the kernel's initial `hw_tag` of -1 does; once known to
//! queue, it stays so.

/// How a scheduler judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwTagRule {
    /// The device queues if it held at least this many requests at once.
    pub deep: u32,
    /// Samples taken before judging.
    pub samples: u32,
    /// The most seen starts again at each judgment (bfq); cfq keeps its estimate.
    pub reset: bool,
}

/// cfq: queueing at `CFQ_HW_QUEUE_MIN` (5) requests, over 50 samples.
pub const CFQ: HwTagRule = HwTagRule {
    deep: 5,
    samples: 50,
    reset: false,
};

/// bfq: queueing past `BFQ_HW_QUEUE_THRESHOLD` (3) requests, over `BFQ_HW_QUEUE_SAMPLES`
/// (32).
pub const BFQ: HwTagRule = HwTagRule {
    deep: 4,
    samples: 32,
    reset: true,
};

/// The estimate.
#[derive(Debug, Clone, Copy, Default)]
pub struct HwTag {
    /// The last judgment; none yet counts as queueing.
    judged: Option<bool>,
    most_in_driver: u32,
    samples: u32,
}

impl HwTag {
    /// Whether the device queues commands, as far as is known.
    pub fn queueing(&self) -> bool {
        self.judged.unwrap_or(true)
    }

    /// The most requests seen on the device at once since the last judgment that started
    /// the count again (bfq's `max_rq_in_driver`).
    pub fn most_in_driver(&self) -> u32 {
        self.most_in_driver
    }

    /// A completion's sample under `rule`, taken before it leaves the count: `in_driver`
    /// requests on the device, and whether the scheduler could have kept it busy (`counts`:
    /// the policy's gate, as enough queued and no quick queue in service short of
    /// requests).
    pub fn sample(&mut self, rule: HwTagRule, in_driver: u32, counts: bool) {
        self.most_in_driver = self.most_in_driver.max(in_driver);
        if self.judged == Some(true) || !counts {
            return;
        }
        self.samples += 1;
        if self.samples <= rule.samples {
            return;
        }
        self.judged = Some(self.most_in_driver >= rule.deep);
        self.samples = 0;
        if rule.reset {
            self.most_in_driver = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_never_holds_more_than_one_is_judged_not_to_queue_after_its_samples() {
        let mut tag = HwTag::default();
        for _ in 0..CFQ.samples {
            tag.sample(CFQ, 1, true);
        }
        assert!(tag.queueing(), "unknown counts as queueing");
        tag.sample(CFQ, 1, true);
        assert!(!tag.queueing());
        for _ in 0..=CFQ.samples {
            tag.sample(CFQ, 8, false);
        }
        assert!(!tag.queueing(), "samples that do not count change nothing");
        for _ in 0..=CFQ.samples {
            tag.sample(CFQ, 8, true);
        }
        assert!(tag.queueing());
    }

    #[test]
    fn bfq_judges_past_three_requests_and_cfq_at_five() {
        for (rule, depth, queues) in [
            (BFQ, 3, false),
            (BFQ, 4, true),
            (CFQ, 4, false),
            (CFQ, 5, true),
        ] {
            let mut tag = HwTag::default();
            for _ in 0..=rule.samples {
                tag.sample(rule, depth, true);
            }
            assert_eq!(tag.queueing(), queues, "{rule:?} at {depth}");
        }
    }
}
