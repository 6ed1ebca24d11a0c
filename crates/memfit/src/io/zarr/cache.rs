//! [`ChunkCache`]: decoded Zarr chunks shared by a job's threads within a
//! byte budget, so that units reading parts of the same chunk decode it once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Result;

/// A chunk: its input (the input's address while the job holds it) and its
/// indices in the chunk grid.
pub(super) type Key = (usize, Vec<u64>);

/// A chunk's decoded bytes, filled by the first reader that wants them.
type Slot = Arc<Mutex<Option<Arc<Vec<u8>>>>>;

/// Decoded chunks of a job's Zarr inputs, shared by its threads, holding at
/// most `capacity` bytes (the job's plan counts them).
///
/// A unit reading part of a chunk another unit read before finds it here
/// while it stays cached (the least recently used chunk no reader holds is
/// dropped first), and a chunk wanted by several threads at once is decoded
/// by one while the others wait. With a capacity of 0, a chunk larger than
/// the capacity, or every cached chunk in use, a read decodes its chunks
/// for itself (one decoded chunk at a time per reader, as without a cache).
/// Values never depend on the cache: it only saves decoding.
#[derive(Debug, Default)]
pub struct ChunkCache {
    capacity: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes of the cached chunks (decoded or being decoded).
    held: u64,
    /// Reads so far: the recency of each entry.
    tick: u64,
    entries: HashMap<Key, Entry>,
}

#[derive(Debug)]
struct Entry {
    bytes: u64,
    used: u64,
    slot: Slot,
}

impl ChunkCache {
    /// A cache of at most `capacity` bytes of decoded chunks (0: none).
    pub fn new(capacity: u64) -> Self {
        ChunkCache { capacity, state: Mutex::default() }
    }

    /// The most bytes it holds.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The decoded chunk `key` of `bytes` bytes: cached, or by `decode` (and
    /// then kept while the capacity allows).
    ///
    /// # Errors
    /// `decode`'s error (the chunk is not kept; the next reader decodes it).
    pub(super) fn get(&self, key: Key, bytes: u64, decode: impl FnOnce() -> Result<Vec<u8>>) -> Result<Arc<Vec<u8>>> {
        if bytes > self.capacity {
            return decode().map(Arc::new);
        }
        let slot = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.tick += 1;
            let tick = state.tick;
            if let Some(entry) = state.entries.get_mut(&key) {
                entry.used = tick;
                Some(entry.slot.clone())
            } else if state.make_room(bytes, self.capacity) {
                let slot = Slot::default();
                state.held += bytes;
                state.entries.insert(key, Entry { bytes, used: tick, slot: slot.clone() });
                Some(slot)
            } else {
                None
            }
        };
        let Some(slot) = slot else { return decode().map(Arc::new) };
        let mut chunk = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(decoded) = &*chunk {
            return Ok(decoded.clone());
        }
        let decoded = Arc::new(decode()?);
        *chunk = Some(decoded.clone());
        Ok(decoded)
    }
}

impl State {
    /// Drops the least recently used chunks that no reader holds or waits
    /// for until `bytes` more fit within `capacity`; false when they cannot.
    fn make_room(&mut self, bytes: u64, capacity: u64) -> bool {
        while self.held + bytes > capacity {
            let free = |e: &Entry| {
                Arc::strong_count(&e.slot) == 1
                    && e.slot.try_lock().is_ok_and(|c| c.as_ref().is_none_or(|d| Arc::strong_count(d) == 1))
            };
            let Some(key) =
                self.entries.iter().filter(|(_, e)| free(e)).min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
            else {
                return false;
            };
            let gone = self.entries.remove(&key).expect("a cached chunk");
            self.held -= gone.bytes;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key(i: u64) -> Key {
        (1, vec![i])
    }

    #[test]
    fn chunks_are_decoded_once_while_they_fit() {
        let cache = ChunkCache::new(300);
        let decodes = AtomicUsize::new(0);
        let get = |i: u64| {
            cache
                .get(key(i), 100, || {
                    decodes.fetch_add(1, Ordering::Relaxed);
                    Ok(vec![i as u8; 100])
                })
                .unwrap()
        };
        for i in [0, 1, 2, 0, 1, 2] {
            assert_eq!(get(i)[0], i as u8);
        }
        assert_eq!(decodes.load(Ordering::Relaxed), 3);
        // A fourth chunk drops the least recently used (0).
        get(3);
        get(1);
        get(0);
        assert_eq!(decodes.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn held_chunks_stay_and_large_or_uncached_ones_decode_each_time() {
        let cache = ChunkCache::new(200);
        let held = cache.get(key(0), 100, || Ok(vec![0; 100])).unwrap();
        let also = cache.get(key(1), 100, || Ok(vec![1; 100])).unwrap();
        // Both in use: a third cannot evict them, and is decoded for itself.
        let third = cache.get(key(2), 100, || Ok(vec![2; 100])).unwrap();
        assert_eq!((held[0], also[0], third[0]), (0, 1, 2));
        assert_eq!(cache.state.lock().unwrap().held, 200);
        drop((held, also, third));
        assert!(cache.get(key(3), 300, || Ok(vec![3; 300])).is_ok());
        assert_eq!(cache.state.lock().unwrap().entries.len(), 2);
        let none = ChunkCache::default();
        let n = AtomicUsize::new(0);
        for _ in 0..2 {
            none.get(key(0), 1, || Ok(vec![n.fetch_add(1, Ordering::Relaxed) as u8])).unwrap();
        }
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_failed_decode_is_retried_by_the_next_reader() {
        let cache = ChunkCache::new(100);
        let bad = cache.get(key(0), 10, || Err(crate::error::Error::Remote { reason: "x".into() }));
        assert!(bad.is_err());
        assert_eq!(cache.get(key(0), 10, || Ok(vec![7; 10])).unwrap()[0], 7);
    }
}
