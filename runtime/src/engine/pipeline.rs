//! The chunked prefill pipeline (mllm's CPU/NPU overlap): with a second VM, a prompt's
//! chunks are prefilled two at a time, chunk k on VM k mod 2. When a model's static parts
//! run on the NPU, chunk k's CPU work (attention) overlaps chunk k+1's NPU graphs. Each
//! chunk sees the KV cache through a [`ChunkWindow`]: it appends to a layer once the
//! previous chunk has, and views only positions up to its own end, so the logits are those
//! of a sequential prefill. A failing chunk aborts the others and the cache is rolled back.

use super::error::EngineError;
use super::step::Engine;
use crate::kv_cache::{ChunkSchedule, ChunkWindow};
use crate::pool::ThreadPool;
use crate::tensor::Tensor;
use crate::trace::{self, Timeline};
use crate::value::{Object, Value};
use crate::vm::{VirtualMachine, VmError};
use std::sync::{Arc, Mutex, PoisonError};

/// The functions the second VM can run.
const PIPELINED: [&str; 2] = ["prefill", "prefill_all"];

/// One chunk's call: its index, its ids and its window on the cache.
struct ChunkCall {
    index: usize,
    ids: Tensor,
    window: Value,
}

/// What a worker returns: its chunks' outputs, or the first failure.
type WorkerResult = Result<Vec<(usize, Value)>, (usize, Box<VmError>)>;

impl Engine {
    /// Prefills the chunks of a prompt two at a time from now on (a second VM for
    /// `prefill` and `prefill_all`, with its own arenas). With `pool`, both VMs launch
    /// their kernels on it meanwhile: e.g. one thread fewer when the NPU's graphs run on
    /// a host core of their own.
    pub fn enable_pipeline(&mut self, pool: Option<Arc<ThreadPool>>) -> Result<(), EngineError> {
        if let Some(pool) = pool {
            let sequential = self.vm.thread_pool().clone();
            self.sequential_pool.get_or_insert(sequential);
            self.vm.set_thread_pool(pool);
        }
        let exported: Vec<&str> = PIPELINED
            .into_iter()
            .filter(|f| self.vm.executable().functions.contains_key(*f))
            .collect();
        let second = self
            .vm
            .fork(&exported)
            .map_err(|e| EngineError::vm("prefill", e))?;
        self.second_vm = Some(second);
        Ok(())
    }

    /// Prefills one chunk at a time from now on (frees the second VM; kernels launch on
    /// the pool they used before the pipeline).
    pub fn disable_pipeline(&mut self) {
        self.second_vm = None;
        if let Some(pool) = self.sequential_pool.take() {
            self.vm.set_thread_pool(pool);
        }
    }

    /// Records prefill's busy time per device on `timeline` (lanes `cpu 0`, `cpu 1`,
    /// `npu`), or stops recording.
    pub fn set_timeline(&mut self, timeline: Option<Arc<Timeline>>) {
        self.timeline = timeline;
    }

    /// Runs `function` on each chunk of ids in order, appending them all to the cache;
    /// returns each chunk's logits.
    pub(super) fn run_chunks(
        &mut self,
        function: &'static str,
        chunks: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        if self.second_vm.is_some() && chunks.len() > 1 {
            return self.run_pipelined(function, chunks);
        }
        let timeline = self.timeline.clone();
        let _lane = timeline.as_ref().map(|t| trace::enter_lane(t, "cpu 0"));
        chunks.iter().map(|c| self.step(function, c)).collect()
    }

    fn run_pipelined(
        &mut self,
        function: &'static str,
        chunks: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        let schedule = ChunkSchedule::new();
        let mut calls: [Vec<ChunkCall>; 2] = [Vec::new(), Vec::new()];
        let mut start = self.tokens.len();
        for (index, chunk) in chunks.iter().enumerate() {
            let end = start + chunk.len();
            let window = ChunkWindow::new(self.cache.clone(), start, end, schedule.clone());
            calls[index % 2].push(ChunkCall {
                index,
                ids: self.ids_tensor(chunk)?,
                window: Value::Object(Object::new(window)),
            });
            start = end;
        }
        let outputs = self.run_workers(function, calls, &schedule);
        let outputs = match outputs {
            Ok(outputs) => outputs,
            Err(err) => {
                self.cut_cache_to(self.tokens.len())?;
                return Err(err);
            }
        };
        let mut logits = Vec::with_capacity(chunks.len());
        for (chunk, out) in chunks.iter().zip(&outputs) {
            logits.push(self.logits(function, out, chunk.len())?);
            self.tokens.extend_from_slice(chunk);
        }
        Ok(logits)
    }

    /// Runs each worker's calls on its VM on a thread of its own; the outputs in chunk
    /// order, or the error of the chunk that failed first.
    fn run_workers(
        &mut self,
        function: &'static str,
        calls: [Vec<ChunkCall>; 2],
        schedule: &ChunkSchedule,
    ) -> Result<Vec<Value>, EngineError> {
        let second = self.second_vm.as_mut().ok_or(EngineError::Config(
            "pipelined prefill without a second VM".into(),
        ))?;
        let vms: [&mut VirtualMachine; 2] = [&mut self.vm, second];
        let (weights, timeline) = (&self.weights, &self.timeline);
        let first_failure = Mutex::new(None);
        let results: Vec<Option<WorkerResult>> = std::thread::scope(|scope| {
            let workers: Vec<_> = vms
                .into_iter()
                .zip(calls)
                .enumerate()
                .map(|(worker, (vm, calls))| {
                    let first_failure = &first_failure;
                    scope.spawn(move || {
                        let lane = format!("cpu {worker}");
                        let _lane = timeline.as_ref().map(|t| trace::enter_lane(t, &lane));
                        let mut outputs = Vec::new();
                        for call in calls {
                            let args = [Value::Tensor(call.ids), call.window]
                                .into_iter()
                                .chain(weights.iter().cloned())
                                .collect();
                            match vm.call_owned(function, args) {
                                Ok(out) => outputs.push((call.index, out)),
                                Err(err) => {
                                    let mut first = first_failure
                                        .lock()
                                        .unwrap_or_else(PoisonError::into_inner);
                                    first.get_or_insert(call.index);
                                    schedule.abort();
                                    return Err((call.index, Box::new(err)));
                                }
                            }
                        }
                        Ok(outputs)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().ok()).collect()
        });
        let first = first_failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut outputs = Vec::new();
        let mut failure = None;
        for result in results {
            match result {
                None => {
                    let message = "pipelined prefill: a worker thread panicked";
                    return Err(EngineError::Config(message.into()));
                }
                Some(Ok(done)) => outputs.extend(done),
                Some(Err((index, err))) if Some(index) == first => failure = Some(err),
                Some(Err((_, err))) => {
                    failure.get_or_insert(err);
                }
            }
        }
        if let Some(err) = failure {
            return Err(EngineError::vm(function, *err));
        }
        outputs.sort_by_key(|(index, _)| *index);
        Ok(outputs.into_iter().map(|(_, out)| out).collect())
    }
}
