use super::*;

#[test]
fn remaining_skips_transferred_bytes_across_segments() {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    let segs: Segments = smallvec::smallvec![(a.as_mut_ptr(), 8), (b.as_mut_ptr(), 8)];
    let rest = remaining(&segs, 10);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1, 6);
    assert_eq!(rest[0].0 as usize, b.as_ptr() as usize + 2);
    assert_eq!(remaining(&segs, 0).len(), 2);
    assert!(remaining(&segs, 16).is_empty());
}

#[test]
fn a_refused_submission_leaves_nothing_in_flight_and_drain_returns() {
    let file = std::fs::File::open("/dev/null").unwrap();
    let mut ring = Ring::new(8, &[file.as_raw_fd()], None).unwrap();
    ring.refuse_submissions = true;
    let io = Io {
        file: 0,
        kind: IoKind::Flush,
        offset: 0,
        segments: Segments::new(),
        tag: (0, 7),
        ioprio: 0,
    };
    // SAFETY: a flush has no buffers.
    assert!(unsafe { ring.start(io.clone()) }.is_err());
    assert_eq!(ring.inflight(), 0);
    ring.refuse_submissions = false;
    assert!(ring.drain(), "nothing is left to wait for");
    // The slot is free again and a later I/O completes normally.
    // SAFETY: as above.
    unsafe { ring.start(io) }.unwrap();
    let mut tags = Vec::new();
    while tags.is_empty() {
        ring.wait(Some(Duration::from_secs(5))).unwrap();
        ring.reap(&mut |tag, _| tags.push(tag)).unwrap();
    }
    assert_eq!(tags, [(0, 7)]);
}
