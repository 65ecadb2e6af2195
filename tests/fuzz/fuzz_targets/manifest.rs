//! The artifact manifest: any text is a manifest or a typed error, and the manifest's
//! checks that read no file (target, listing) return, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::artifact::{Manifest, MODULE_FILE, PARAMS_FILE, VM_FILE};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dir = Path::new("fuzz-artifact");
    let Ok(manifest) = Manifest::parse(text, &dir.join("oxrelax-model.json")) else {
        return;
    };
    let _ = manifest.check_compatible(dir);
    let library = manifest.target.library.as_str();
    let _ = manifest.check_listing(dir, &[MODULE_FILE, VM_FILE, PARAMS_FILE, library]);
    if let Some(npu) = &manifest.npu {
        let files: Vec<&str> = npu.files.iter().map(String::as_str).collect();
        let _ = manifest.check_listing(dir, &files);
    }
});
