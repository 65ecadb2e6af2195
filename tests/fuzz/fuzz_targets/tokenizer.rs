//! `tokenizer.json` loading: any bytes are a tokenizer or a typed error; a tokenizer
//! encodes a short text and decodes its ids back without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::chat::TokenizerConfig;
use oxrelax_runtime::Tokenizer;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("tokenizer.json");
    let Ok(tokenizer) = Tokenizer::from_bytes(path, data, TokenizerConfig::default()) else {
        return;
    };
    for special in [false, true] {
        if let Ok(ids) = tokenizer.encode("Hello, wörld! <s> 12 ab", special) {
            let _ = tokenizer.decode(&ids, !special);
        }
    }
});
