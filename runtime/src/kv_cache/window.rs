//! [`ChunkWindow`]: one prefill chunk's access to a KV cache that consecutive chunks
//! extend at the same time (the chunked CPU/NPU pipeline). The chunk covering positions
//! `start..end` appends to a layer only once that layer holds exactly `start` positions
//! (the previous chunk appended to it: a wait on a condition variable, not a spin). Its
//! view of a layer (also waiting for `start` positions) ends at `start` before it
//! appended to that layer and at `end` after, whatever later chunks appended since. So
//! every chunk sees what a sequential prefill would show it.

use super::{KvCache, KvCacheError, SharedKvCache};
use crate::tensor::Tensor;
use crate::trace;
use crate::value::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, MutexGuard, PoisonError};

/// What the chunks of one pipelined prefill share besides the cache: the signal that a
/// layer grew, and whether a chunk failed (then every waiting chunk gives up).
#[derive(Debug, Default)]
pub struct ChunkSchedule {
    appended: Condvar,
    aborted: AtomicBool,
}

impl ChunkSchedule {
    /// A schedule for one prefill.
    pub fn new() -> Arc<ChunkSchedule> {
        Arc::new(ChunkSchedule::default())
    }

    /// Wakes every chunk waiting for its turn with [`KvCacheError::Aborted`].
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.appended.notify_all();
    }

    fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

/// Positions `start..end` of a shared KV cache, as one chunk of a pipelined prefill sees
/// them; see the module documentation.
#[derive(Debug)]
pub struct ChunkWindow {
    cache: Value,
    start: usize,
    end: usize,
    schedule: Arc<ChunkSchedule>,
}

impl ChunkWindow {
    /// The window of positions `start..end` on `cache` (a KV cache object).
    pub fn new(cache: Value, start: usize, end: usize, schedule: Arc<ChunkSchedule>) -> Self {
        ChunkWindow {
            cache,
            start,
            end,
            schedule,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, KvCache>, KvCacheError> {
        let shared = self
            .cache
            .as_object::<SharedKvCache>()
            .ok_or(KvCacheError::NotACache)?;
        Ok(shared.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits until `layer` holds `start` positions, then appends this chunk's `tensors`
    /// (`end - start` positions).
    pub fn append(&self, layer: usize, tensors: &[&Tensor]) -> Result<(), KvCacheError> {
        let rows = tensors.first().and_then(|t| t.shape().first().copied());
        if rows != Some((self.end - self.start) as i64) {
            return Err(KvCacheError::WindowRows {
                start: self.start,
                end: self.end,
                got: rows.unwrap_or(0),
            });
        }
        let mut cache = self.lock_when_started(layer)?;
        let len = cache.layer_len(layer)?;
        if len != self.start {
            return Err(KvCacheError::OutOfTurn {
                layer,
                len,
                start: self.start,
            });
        }
        cache.append(layer, tensors)?;
        drop(cache);
        self.schedule.appended.notify_all();
        Ok(())
    }

    /// The cache, locked once `layer` holds `start` positions (or the prefill aborted).
    fn lock_when_started(&self, layer: usize) -> Result<MutexGuard<'_, KvCache>, KvCacheError> {
        let cache = self.lock()?;
        let early = |c: &mut KvCache| c.layer_len(layer).is_ok_and(|len| len < self.start);
        let cache = trace::waiting(|| {
            let waiting = |c: &mut KvCache| !self.schedule.aborted() && early(c);
            let guard = self.schedule.appended.wait_while(cache, waiting);
            guard.unwrap_or_else(PoisonError::into_inner)
        });
        match self.schedule.aborted() {
            true => Err(KvCacheError::Aborted),
            false => Ok(cache),
        }
    }

    /// The positions of `layer` this chunk sees: the first `start` before it appended to
    /// the layer, the first `end` after (see [`KvCache::view`]).
    pub fn view(&self, layer: usize) -> Result<Vec<Tensor>, KvCacheError> {
        let mut cache = self.lock_when_started(layer)?;
        // Chunks append in order, so the layer holds exactly `start` positions until
        // this chunk appends, and at least `end` after.
        let appended = cache.layer_len(layer)? >= self.end;
        let seen = if appended { self.end } else { self.start };
        cache.view_prefix(layer, seen)
    }

    /// The end of the positions this chunk covers.
    pub fn end(&self) -> usize {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Object;
    use std::sync::Mutex;
    use std::time::Duration;

    fn rows(n: usize, value: f32) -> Tensor {
        Tensor::from_slice(&vec![value; n * 2], &[n as i64, 1, 2]).unwrap()
    }

    fn window(
        cache: &Value,
        start: usize,
        end: usize,
        schedule: &Arc<ChunkSchedule>,
    ) -> ChunkWindow {
        ChunkWindow::new(cache.clone(), start, end, schedule.clone())
    }

    #[test]
    fn a_later_chunk_waits_for_the_earlier_one_and_sees_only_its_own_end() {
        let cache = Value::Object(Object::new(Mutex::new(
            KvCache::new(1, 1, 2, 8, crate::dtype::DType::F32).unwrap(),
        )));
        let schedule = ChunkSchedule::new();
        let (first, second) = (
            window(&cache, 0, 3, &schedule),
            window(&cache, 3, 5, &schedule),
        );
        std::thread::scope(|s| {
            let later = s.spawn(|| {
                assert_eq!(
                    second.view(0).unwrap()[0].shape()[0],
                    3,
                    "before its append: start"
                );
                second.append(0, &[&rows(2, 2.0), &rows(2, 2.0)]).unwrap();
                second.view(0).unwrap()[0].shape()[0]
            });
            std::thread::sleep(Duration::from_millis(20));
            first.append(0, &[&rows(3, 1.0), &rows(3, 1.0)]).unwrap();
            assert_eq!(later.join().unwrap(), 5);
        });
        assert_eq!(
            first.view(0).unwrap()[0].shape()[0],
            3,
            "not the later chunk's rows"
        );
    }

    #[test]
    fn an_abort_wakes_a_waiting_chunk_with_an_error() {
        let cache = Value::Object(Object::new(Mutex::new(
            KvCache::new(1, 1, 2, 8, crate::dtype::DType::F32).unwrap(),
        )));
        let schedule = ChunkSchedule::new();
        let waiting = window(&cache, 4, 6, &schedule);
        std::thread::scope(|s| {
            let blocked = s.spawn(|| waiting.append(0, &[&rows(2, 1.0), &rows(2, 1.0)]));
            std::thread::sleep(Duration::from_millis(20));
            schedule.abort();
            assert!(matches!(
                blocked.join().unwrap(),
                Err(KvCacheError::Aborted)
            ));
        });
        let wrong = window(&cache, 0, 2, &ChunkSchedule::new());
        let err = wrong
            .append(0, &[&rows(3, 1.0), &rows(3, 1.0)])
            .unwrap_err();
        assert!(
            matches!(err, KvCacheError::WindowRows { got: 3, .. }),
            "{err}"
        );
    }
}
