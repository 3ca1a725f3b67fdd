//! A small pool for the simulated cells.

/// `f` of every item, on `threads` threads (default: every core), in the items' order. For
/// simulated runs: each is deterministic, so the pool's size and order change nothing.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: Option<u32>,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads
        .map_or_else(
            || std::thread::available_parallelism().map_or(1, usize::from),
            |n| n as usize,
        )
        .min(items.len().max(1));
    let slots: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(k) else {
                        break;
                    };
                    let result = f(item);
                    *slots[k]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(result);
                }
            });
        }
    });
    slots
        .into_iter()
        .zip(items)
        .map(|(slot, item)| {
            slot.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_else(|| f(item))
        })
        .collect()
}
