use super::*;

#[test]
fn the_busy_weight_sum_is_each_busy_queues_weight_summed() {
    let mut bfq = Bfq {
        group_weights: [(1, 300), (2, 100)].into_iter().collect(),
        ..Bfq::default()
    };
    // Queues in no group, in groups 1 and 2 and in group 3 (no weight told), busy or
    // idle, of two classes, some weight-raised.
    for ctx in 0..40u32 {
        let queue = Queue {
            class: (ctx % 2) as usize,
            weight: u64::from(10 + ctx % 7 * 10),
            group: ctx % 4,
            busy: ctx % 3 != 0,
            raised_until: if ctx % 5 == 0 { 1_000 } else { 0 },
            ..Queue::default()
        };
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    for now in [0, 2_000] {
        for class in 0..2 {
            let each: u128 = bfq
                .queues
                .values()
                .filter(|q| q.busy && q.class == class)
                .map(|q| u128::from(bfq.weight(q, now).max(1)))
                .sum();
            assert_eq!(bfq.busy_weight(class, now), each, "class {class} at {now}");
        }
    }
}
