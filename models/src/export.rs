//! The functions a model exports: `create_kv_cache`, `embed`, `prefill`, `prefill_all`,
//! `decode`, `batch_decode` and `softmax_with_temperature`.

use crate::causal_lm::{CausalLM, Positions};
use crate::decoder::kv_cache::{self, KvDtype};
use crate::decoder::{emit, CacheAccess, Dims};
use crate::error::ModelError;
use oxrelax_dsl::nn::{NnError, Spec};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, IRModule, StructInfo, SymExpr, SymVar, Var};

/// How a model is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// The longest context to support; the context window is `max_position_embeddings`
    /// capped at this. It sizes the KV cache and bounds `m`.
    pub max_context: i64,
    /// Tokens per `prefill` call at most (the bound of `n`).
    pub prefill_chunk: i64,
    /// How the KV cache stores K and V: f32, f16 (rounded to it as appended, widened back
    /// to f32 as attention reads them) or q8 (int8 codes with a scale per position and KV
    /// head, quantized as appended, dequantized as attention reads them).
    pub kv_dtype: KvDtype,
    /// Sequences per `batch_decode` call at most (the bound of `b`); 0 exports no
    /// `batch_decode`.
    pub max_batch: i64,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            max_context: 4096,
            prefill_chunk: 128,
            kv_dtype: KvDtype::F32,
            max_batch: 16,
        }
    }
}

impl ExportOptions {
    /// Checks the options: positive sizes.
    fn check(&self) -> Result<(), ModelError> {
        let positive = [
            ("max_context", self.max_context),
            ("prefill_chunk", self.prefill_chunk),
        ];
        if let Some((option, value)) = positive.into_iter().find(|(_, v)| *v <= 0) {
            return Err(ModelError::Options {
                option,
                reason: format!("must be positive, got {value}"),
            });
        }
        if self.max_batch < 0 {
            return Err(ModelError::Options {
                option: "max_batch",
                reason: format!(
                    "must be 0 (no batch_decode) or more, got {}",
                    self.max_batch
                ),
            });
        }
        Ok(())
    }
}

/// An exported model: its functions and the sizes they were built for.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The exported functions. Every function but `create_kv_cache` and
    /// `softmax_with_temperature` takes its inputs followed by every weight in the order of
    /// [`CausalLM::weight_shapes`].
    pub module: IRModule,
    /// Positions the KV cache holds.
    pub context_window: i64,
    /// Tokens per `prefill` call at most.
    pub prefill_chunk: i64,
    /// How the KV cache stores K and V.
    pub kv_dtype: KvDtype,
    /// Sequences per `batch_decode` call at most (0: not exported).
    pub max_batch: i64,
}

fn ids_input(tokens: SymExpr) -> Var {
    Var::new(
        "ids",
        StructInfo::tensor(vec![SymExpr::int(1), tokens], DType::I32),
    )
}

fn cache_input() -> Var {
    Var::new("cache", StructInfo::Object)
}

impl CausalLM {
    /// Exports the model: `create_kv_cache()`; `embed(ids: [1, n] i32) -> [1, n, hidden]`;
    /// `prefill(ids: [1, n] i32, cache) -> [1, 1, vocab]` (the last position's logits) and
    /// `prefill_all(ids, cache) -> [1, n, vocab]` (every position's) with
    /// `n <= prefill_chunk`; `decode(ids: [1, 1] i32, cache) -> [1, 1, vocab]`;
    /// `batch_decode(ids: [1, b] i32, positions: [b] i32, batch) -> [1, b, vocab]` (token
    /// `i` the next of the batch's sequence `i`, at `positions[i]`, `b <= max_batch`; when
    /// `max_batch > 0`); `softmax_with_temperature(logits: [1, 1, vocab], temperature: [] f32)`.
    pub fn export(&self, options: &ExportOptions) -> Result<Exported, ModelError> {
        options.check()?;
        let context_window = self.config().context_window(options.max_context);
        let n = SymVar::bounded("n", options.prefill_chunk);
        let past = SymVar::bounded("m", context_window);
        let step = |tokens: SymExpr, positions: Positions| {
            let dims = Dims {
                tokens,
                cache: CacheAccess::Sequence { past: past.clone() },
                kv_dtype: options.kv_dtype,
            };
            move |model: &CausalLM, bb: &mut BlockBuilder, inputs: &[Expr]| {
                model.forward(bb, &inputs[0], &inputs[1], &dims, positions)
            }
        };
        let mut spec = Spec::new()
            .function(
                "embed",
                vec![ids_input(n.expr())],
                |model: &CausalLM, bb, inputs| model.embed(bb, &inputs[0]),
            )
            .function(
                "prefill",
                vec![ids_input(n.expr()), cache_input()],
                step(n.expr(), Positions::Last),
            )
            .function(
                "prefill_all",
                vec![ids_input(n.expr()), cache_input()],
                step(n.expr(), Positions::All),
            )
            .function(
                "decode",
                vec![ids_input(SymExpr::int(1)), cache_input()],
                step(SymExpr::int(1), Positions::Last),
            );
        if options.max_batch > 0 {
            let b = SymVar::bounded("b", options.max_batch);
            let positions = Var::new("positions", StructInfo::tensor(vec![b.expr()], DType::I32));
            let batch = Var::new("batch", StructInfo::Object);
            let kv_dtype = options.kv_dtype;
            spec = spec.function(
                "batch_decode",
                vec![ids_input(b.expr()), positions, batch],
                move |model: &CausalLM, bb: &mut BlockBuilder, inputs: &[Expr]| {
                    let dims = Dims {
                        tokens: b.expr(),
                        cache: CacheAccess::Batch {
                            positions: inputs[1].clone(),
                        },
                        kv_dtype,
                    };
                    model.forward(bb, &inputs[0], &inputs[2], &dims, Positions::All)
                },
            );
        }
        let mut bb = BlockBuilder::new();
        spec.export_into(self, &mut bb)?;
        self.add_create_kv_cache(&mut bb, context_window, options.kv_dtype)?;
        self.add_softmax_with_temperature(&mut bb)?;
        Ok(Exported {
            module: bb.finish().map_err(NnError::from)?,
            context_window,
            prefill_chunk: options.prefill_chunk,
            kv_dtype: options.kv_dtype,
            max_batch: options.max_batch,
        })
    }

    /// `create_kv_cache()`: a cache of every layer holding `capacity` positions stored as
    /// `dtype` says.
    fn add_create_kv_cache(
        &self,
        bb: &mut BlockBuilder,
        capacity: i64,
        dtype: KvDtype,
    ) -> Result<(), NnError> {
        let c = self.config();
        let create = kv_cache::create(
            c.num_hidden_layers,
            c.num_key_value_heads,
            c.head_dim,
            capacity,
            dtype,
        );
        bb.function("create_kv_cache", Vec::new(), true, |bb| {
            Ok::<_, NnError>(bb.emit_named(create, "cache")?.into())
        })?;
        Ok(())
    }

    /// `softmax_with_temperature(logits: [1, 1, vocab], temperature: [] f32)`:
    /// `softmax(logits / temperature)` over the vocabulary.
    fn add_softmax_with_temperature(&self, bb: &mut BlockBuilder) -> Result<(), NnError> {
        let vocab = self.config().vocab_size;
        let shape = vec![SymExpr::int(1), SymExpr::int(1), SymExpr::int(vocab)];
        let logits = Var::new("logits", StructInfo::tensor(shape, DType::F32));
        let temperature = Var::new("temperature", StructInfo::tensor(vec![], DType::F32));
        let params = vec![logits.clone(), temperature.clone()];
        bb.function("softmax_with_temperature", params, true, |bb| {
            let probs = bb.dataflow(|bb| {
                let name = "softmax_with_temperature";
                let scaled = emit(bb, name, op::divide(&logits.into(), &temperature.into()))?;
                let probs = op::softmax(&scaled, -1).map_err(NnError::op(name))?;
                Ok::<_, NnError>(bb.emit_output(probs)?)
            })?;
            Ok::<_, NnError>(probs.into())
        })?;
        Ok(())
    }
}
