//! `config.json` parsing, then building and exporting the model it describes: a typed
//! error or a model, never a panic or an exhausted memory.
//!
//! [`SIZE_LIMITS`](oxrelax_models::config::SIZE_LIMITS) keeps a model buildable, but one
//! of 1024 layers (the limit) takes far too long to build for a fuzz iteration: this target
//! (only) builds models of at most `MAX_LAYERS` layers, and only parses deeper ones. Other
//! sizes go up to the limits (building allocates no weights).

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_dsl::DType;
use oxrelax_models::{ExportOptions, ModelConfig};

/// The most decoder layers this target builds (the fixtures' tiny models have 2).
const MAX_LAYERS: i64 = 2;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = ModelConfig::from_json(text) else {
        return;
    };
    if config.num_hidden_layers > MAX_LAYERS {
        return;
    }
    let Ok(model) = oxrelax_models::causal_lm(&config, DType::F32) else {
        return;
    };
    let _ = model.weight_shapes();
    let options = ExportOptions {
        max_context: 64,
        prefill_chunk: 16,
        ..Default::default()
    };
    let _ = model.export(&options);
});
