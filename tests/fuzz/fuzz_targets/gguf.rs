//! GGUF files: any bytes are a checked file or a typed error; every tensor of a file gives
//! its bytes and dequantizes (or is a typed error for an unsupported type); and a file read
//! as a model gives its config, its tensors under Hugging Face names and its tokenizer
//! files, or typed errors.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::gguf::{GgufFile, GgufModel};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(Path::new("fuzz.gguf"), data.to_vec()) else {
        return;
    };
    for info in file.tensors() {
        let _ = file.tensor_bytes(&info.name);
        let _ = file.dequantize(&info.name);
    }
    let Ok(model) = GgufModel::new(file) else {
        return;
    };
    for name in model.tensors().keys() {
        let _ = model.load(name);
    }
    let _ = model.tokenizer_json();
    let _ = model.tokenizer_config_json();
    let _ = model.generation_config_json();
});
