//! GGUF headers: any bytes are a checked file or a typed error, and every tensor of a
//! file gives its bytes and dequantizes (or is a typed error for an unsupported type).

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::gguf::GgufFile;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(Path::new("fuzz.gguf"), data.to_vec()) else {
        return;
    };
    for info in file.tensors() {
        let _ = file.tensor_bytes(&info.name);
        let _ = file.dequantize(&info.name);
    }
});
