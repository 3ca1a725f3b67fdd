//! The kept parts against a division made afresh.

use super::*;

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
    division.divide(admission.nr_requests, active, group, weights);
    let (nr_requests, held) = (admission.nr_requests, tags.held_total);
    may_take(&tags.by_group, held, group, nr_requests, division.parts())
}

#[test]
fn kept_parts_answer_as_a_division_made_afresh_while_groups_turn_active_and_idle() {
    let table = RequestTable::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
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
            match next(4) {
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
fn past_sixty_four_active_groups_no_rows_are_kept_and_asks_answer_as_afresh() {
    let table = RequestTable::default();
    for groups in [64u32, 80] {
        let mut admission = Admission::new(1, 256);
        admission.share_between_groups();
        let weights = (0..groups).map(|g| 1 + g % 7).collect();
        admission.weigh_groups(Some(weights));
        // Every group takes a tag, then waits for another.
        for group in 0..groups {
            let kind = TagKind {
                op: Op::Read,
                sync: true,
                group,
            };
            admission.take_tag(0, kind);
            admission.stage(group, 0, group, u64::from(group));
        }
        for asker in 0..groups {
            assert_eq!(
                admission.group_may_take(0, asker),
                afresh(&admission, asker),
                "{groups} groups, group {asker} asking"
            );
        }
        let kept = admission.tags[0].parts.kept();
        if groups > 64 {
            assert_eq!(kept, 0, "{groups} groups: no rows kept");
        } else {
            assert_eq!(kept, 64 * 64, "{groups} groups: a row each");
        }
        let kind = TagKind {
            op: Op::Read,
            sync: true,
            group: 0,
        };
        admission.release(0, kind, &table, &mut Vec::new());
        admission.check_invariants();
    }
}
