//! The guest-memory readers against hostile bytes.

use schedhost_sdk::RequestId;
use wasmtime::{Memory, MemoryType, Store};

use super::*;

/// A guest memory of one page with `bytes` at 0.
fn guest(bytes: &[u8]) -> (Store<Caps>, Guest) {
    let engine = wasmtime::Engine::default();
    let mut store = Store::new(&engine, Caps::for_tests());
    let memory = Memory::new(&mut store, MemoryType::new(1, Some(1))).unwrap();
    memory.data_mut(&mut store)[..bytes.len()].copy_from_slice(bytes);
    (store, Guest(memory))
}

fn le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn pointers_and_lengths_outside_memory_are_errors_not_panics() {
    // A dispatch answer whose ids lie past the end of memory.
    let (store, g) = guest(&le(&[65_530, 4, 0, 0, 0, 0]));
    assert!(g.answer_at(&store, 0).is_err());
    // A length that wraps the address space.
    let (store, g) = guest(&le(&[16, u32::MAX]));
    assert!(g.string_at(&store, 0, u32::MAX).is_err());
    // A return area at the very end of memory.
    let (store, g) = guest(&[]);
    assert!(g.answer_at(&store, 65_532).is_err());
    assert!(g.answer_at(&store, u32::MAX).is_err());
}

#[test]
fn malformed_strings_options_and_results_are_refused() {
    // A string that is not UTF-8, and one over its limit.
    let mut bytes = le(&[8, 2]);
    bytes.extend_from_slice(&[0xff, 0xfe]);
    let (store, g) = guest(&bytes);
    assert!(g.string_at(&store, 0, 64).is_err());
    let (store, g) = guest(&le(&[8, 100]));
    assert!(g.string_at(&store, 0, 64).is_err());
    // An option discriminant of 7.
    let (store, g) = guest(&le(&[0, 0, 7, 0, 0, 0]));
    assert!(g.answer_at(&store, 0).is_err());
    // A result discriminant of 2.
    let (store, g) = guest(&[2]);
    assert!(g.unit_or_string(&store, 0).is_err());
}

#[test]
fn a_long_refusal_is_cut_not_a_fault() {
    let mut bytes = vec![1, 0, 0, 0];
    bytes.extend(le(&[12, 3000]));
    bytes.extend(std::iter::repeat_n(b'x', 3000));
    let (store, g) = guest(&bytes);
    let message = g.unit_or_string(&store, 0).unwrap().unwrap_err();
    assert!(
        message.len() <= super::super::answers::MAX_MESSAGE + 8,
        "{}",
        message.len()
    );
    assert!(message.starts_with("xxx"));
}

#[test]
fn an_answer_claiming_more_ids_than_memory_holds_is_refused() {
    let (store, g) = guest(&le(&[24, 4_000_000, 0, 0, 0, 0]));
    // 4 M ids would run past the page: refused. A bounded read of a plausible one works.
    assert!(g.answer_at(&store, 0).is_err());
    let (store, g) = guest(&le(&[24, 1, 0, 0, 0, 0, 42, 0]));
    let answer = g.answer_at(&store, 0).unwrap();
    assert_eq!((answer.ids, answer.wake_at_ns), (vec![RequestId(42)], None));
}

#[test]
fn a_turns_two_words_are_read_only_from_an_aligned_area_inside_memory() {
    let (store, g) = guest(&le(&[7, 0, 9, 1]));
    assert_eq!(g.two_words(&store, 0).unwrap(), (7, 9 | 1 << 32));
    assert!(g.two_words(&store, 4).is_err(), "misaligned");
    assert!(
        g.two_words(&store, 65_528).is_err(),
        "the second word past the end"
    );
    assert!(g.two_words(&store, u32::MAX - 7).is_err());
}
