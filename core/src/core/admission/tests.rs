//! Admission's tags shared by groups: the kept parts against a division made afresh, a
//! pool taken whole, and the submitters' round robin.

use super::*;

/// Numbers below the bound asked, from `seed` (xorshift: the same every run).
pub(super) fn generator(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |below| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    }
}

/// What a division made afresh for this asking says, without the kept parts.
fn afresh(admission: &Admission, group: u32) -> bool {
    let tags = &admission.tags[0];
    let active = (tags.by_group.iter().enumerate())
        .filter(|&(g, t)| t.active() && g as u32 != group)
        .map(|(g, _)| g as u32);
    if active.clone().next().is_none() {
        return true;
    }
    let mut division = Division::default();
    let weights = admission.weights.as_ref();
    let asking = (tags.by_group.iter().enumerate())
        .filter(|&(g, t)| t.active() || g as u32 == group)
        .map(|(g, _)| g as u32)
        .chain((group as usize >= tags.by_group.len()).then_some(group));
    division.divide(admission.nr_requests, asking, weights);
    let (nr_requests, held) = (admission.nr_requests, tags.held_total);
    may_take(&tags.by_group, held, group, nr_requests, division.parts())
}

#[test]
fn kept_parts_answer_as_a_division_made_afresh_while_groups_turn_active_and_idle_or_are_held_by_their_limits()
 {
    let table = RequestTable::default();
    let mut next = generator(0x9e37_79b9_7f4a_7c15);
    for trial in 0..200 {
        let groups = 2 + next(5) as u32;
        let nr_requests = 1 + next(40) as u32;
        let mut admission = Admission::new(1, nr_requests);
        admission.share_between_groups();
        if trial % 2 == 0 {
            let weights = (0..groups).map(|_| 1 + next(9) as u32).collect();
            admission.weigh_groups(Some(weights));
        }
        // What each group holds, and its requests waiting (as ids by ctx = group).
        let mut held: Vec<Vec<TagKind>> = vec![Vec::new(); groups as usize];
        let mut id = 0;
        for _ in 0..300 {
            let group = next(u64::from(groups)) as u32;
            let kind = TagKind {
                op: Op::Read,
                sync: true,
                group,
            };
            let g = group as usize;
            match next(5) {
                0 if admission.tags[0].held_total < nr_requests => {
                    let asked = admission.group_may_take(0, group);
                    assert_eq!(asked, afresh(&admission, group), "trial {trial}");
                    admission.take_tag(0, kind);
                    held[g].push(kind);
                }
                1 => {
                    if let Some(kind) = held[g].pop() {
                        let mut admitted = Vec::new();
                        admission.release(0, kind, &table, &mut admitted);
                    }
                }
                2 => {
                    id += 1;
                    admission.stage(group, 0, group, id);
                }
                3 => {
                    // Its limits start or stop holding bios back.
                    let was = (admission.tags[0].by_group.get(g)).is_some_and(|t| t.limited);
                    admission.limited(group, !was);
                }
                _ => {
                    if let Some(&first) = admission.software.get(g).and_then(|q| q.front()) {
                        admission.unstage(group, 0, group, first);
                    }
                }
            }
            for asker in 0..groups {
                assert_eq!(
                    admission.group_may_take(0, asker),
                    afresh(&admission, asker),
                    "trial {trial}, group {asker} asking"
                );
            }
        }
        admission.check_invariants();
    }
}

#[test]
fn a_pool_shared_by_equal_groups_is_taken_whole_while_every_group_waits() {
    // Six equal groups on 16 tags: 2.67 each, a part of 2 each and 4 tags that no group is
    // sure of; asked round robin, the groups take all 16.
    for (groups, nr_requests) in [(6u32, 16u32), (3, 64), (3, 65), (5, 7)] {
        let mut admission = Admission::new(1, nr_requests);
        admission.share_between_groups();
        for group in 0..groups {
            for i in 0..u64::from(nr_requests) {
                admission.stage(group, 0, group, u64::from(group) * 1_000 + i);
            }
        }
        let mut asked_in_vain = 0;
        let mut group = 0;
        while admission.tags[0].held_total < nr_requests && asked_in_vain < groups {
            let kind = TagKind {
                op: Op::Read,
                sync: true,
                group,
            };
            if admission.tag_free(0, kind) {
                admission.take_tag(0, kind);
                asked_in_vain = 0;
            } else {
                asked_in_vain += 1;
            }
            group = (group + 1) % groups;
        }
        assert_eq!(
            admission.tags[0].held_total, nr_requests,
            "{groups} groups on {nr_requests} tags"
        );
        let held: Vec<u32> = (0..groups)
            .map(|g| admission.tags[0].by_group[g as usize].held)
            .collect();
        let (least, most) = (held.iter().min().unwrap(), held.iter().max().unwrap());
        assert!(
            most - least <= 1,
            "{groups} groups on {nr_requests}: {held:?}"
        );
    }
}

#[test]
fn a_group_whose_limit_holds_its_bios_keeps_a_tag_of_its_part_free_for_the_next() {
    // Groups 1 and 2 on 8 tags; group 2 floods. While group 1's limit holds its bios, one
    // tag of its part stays free for the next of them; with nothing held, group 2 takes all 8.
    for (limited, taken) in [(true, 7u32), (false, 8)] {
        let mut admission = Admission::new(1, 8);
        admission.share_between_groups();
        admission.limited(1, limited);
        for i in 0..20 {
            admission.stage(2, 0, 2, i);
        }
        let kind = TagKind {
            op: Op::Read,
            sync: true,
            group: 2,
        };
        while admission.tag_free(0, kind) {
            admission.take_tag(0, kind);
        }
        assert_eq!(
            admission.tags[0].held_total, taken,
            "group 1's bios held by its limit: {limited}"
        );
    }
}

#[test]
fn a_submitter_whose_waiting_requests_were_all_merged_away_waits_once_when_it_stages_again() {
    let mut admission = Admission::new(1, 4);
    for id in 1..=2 {
        admission.stage(0, 0, 0, id);
    }
    admission.stage(1, 0, 0, 3);
    // Merges absorb both of submitter 0's waiting requests.
    admission.unstage(0, 0, 0, 1);
    admission.unstage(0, 0, 0, 2);
    admission.stage(0, 0, 0, 4);
    let waiting: Vec<u32> = admission.tags[0].waiting.iter().copied().collect();
    assert_eq!(waiting, [1, 0], "submitter 0 once, after submitter 1");
    admission.check_invariants();
}

/// Seed 113 cell 56's pool (weights 4 / 4 / 1 / 528 on 350 tags; the heavy group's depth,
/// 296, leaves 48 tags no part holds): the light groups ask round robin, the weight-4
/// groups complete and ask again, the weight-1 group never completes. With `sent`, the
/// weight-4 groups' requests go to the device as they are admitted (the policy serves them
/// as they come); without, the policy holds every request. Returns what groups 1 to 3 hold.
fn light_groups_beside_a_shallow_heavy_one(sent: bool) -> Vec<u32> {
    let mut admission = Admission::new(1, 350);
    admission.share_between_groups();
    admission.weigh_groups(Some(vec![1, 4, 4, 1, 528]));
    let kind = |group| TagKind {
        op: Op::Read,
        sync: true,
        group,
    };
    for _ in 0..296 {
        assert!(admission.tag_free(0, kind(4)));
        admission.take_tag(0, kind(4));
    }
    for group in 1..=3 {
        for i in 0..1_000 {
            admission.stage(group, 0, group, u64::from(group) * 10_000 + i);
        }
    }
    let ask_round_robin = |admission: &mut Admission, turn: &mut u32| {
        for _ in 0..3 {
            let group = 1 + *turn % 3;
            *turn += 1;
            if admission.tag_free(0, kind(group)) {
                admission.take_tag(0, kind(group));
                if sent && group != 3 {
                    admission.on_device(0, group, true);
                }
                return true;
            }
        }
        false
    };
    let mut turn = 0;
    while ask_round_robin(&mut admission, &mut turn) {}
    let table = RequestTable::default();
    for cycle in 0..2_000 {
        let completing = 1 + cycle % 2;
        if sent {
            admission.on_device(0, completing, false);
        }
        admission.release(0, kind(completing), &table, &mut Vec::new());
        while ask_round_robin(&mut admission, &mut turn) {}
    }
    admission.check_invariants();
    (1..=3)
        .map(|g| admission.tags[0].by_group[g].held)
        .collect()
}

#[test]
fn tags_past_the_parts_go_to_the_waiting_group_that_holds_fewest_for_its_weight() {
    // The policy holds every request: the 54 tags past the heavy group's go 4 : 4 : 1, not
    // to whoever kept each longest (first come, the weight-1 group ended with 50 of them).
    let held = light_groups_beside_a_shallow_heavy_one(false);
    assert_eq!(held.iter().sum::<u32>(), 54, "{held:?}");
    for heavier in &held[..2] {
        assert!(
            heavier + 4 >= 4 * held[2] && 4 * held[2] + 4 >= *heavier,
            "weights 4 / 4 / 1 hold {held:?}"
        );
    }
}

#[test]
fn a_group_whose_requests_the_policy_sends_as_they_come_is_not_refused_a_tag_past_its_part() {
    // Weights 1 and 4 beside a weight-100 group whose depth leaves 40 tags of its part
    // unheld. Group 1 holds 3, over its part of 2; group 2 holds 8, fewer for its weight,
    // and both wait for more.
    let kind = |group| TagKind {
        op: Op::Read,
        sync: true,
        group,
    };
    for (group_1_on_device, may) in [(3, true), (1, false)] {
        let mut admission = Admission::new(1, 105);
        admission.share_between_groups();
        admission.weigh_groups(Some(vec![1, 1, 4, 100]));
        for (group, held) in [(3, 60), (1, 3), (2, 8)] {
            for _ in 0..held {
                admission.take_tag(0, kind(group));
            }
        }
        for _ in 0..group_1_on_device {
            admission.on_device(0, 1, true);
        }
        for group in 1..=2 {
            admission.stage(group, 0, group, u64::from(group));
        }
        // Its requests on the device as they come, group 1 takes one more: the policy has
        // none of its to choose among. With 2 of them held in the policy (its part), it
        // leaves the tag to group 2.
        assert_eq!(
            admission.tag_free(0, kind(1)),
            may,
            "{group_1_on_device} on the device"
        );
        assert!(admission.tag_free(0, kind(2)));
        admission.check_invariants();
    }
}
