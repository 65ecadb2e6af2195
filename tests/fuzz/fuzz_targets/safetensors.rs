//! The safetensors header and tensor table: any bytes are a checked table or a typed
//! error, and every tensor of a table loads (as itself and as f32) or is a typed error.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::weights::SafetensorsFile;
use oxrelax_runtime::DType;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = SafetensorsFile::from_bytes(Path::new("fuzz.safetensors"), data.to_vec()) else {
        return;
    };
    for (name, info) in file.tensors() {
        for dtype in [info.dtype, DType::F32, DType::U4] {
            let _ = file.load(name, dtype);
        }
    }
});
