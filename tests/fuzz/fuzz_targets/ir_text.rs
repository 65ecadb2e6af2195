//! The IR text parser: any text is a module or a typed error; a module prints to text that
//! parses back to the same module, and the well-formedness checker never panics on it.
//!
//! A module holding a NaN constant (`nan` is a float literal) is unequal to itself, so
//! for those the round trip is checked on the printed text: reprinting gives it back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_dsl::text::{parse_module, print_module};
use oxrelax_dsl::wellformed::check_module;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(module) = parse_module(text) else {
        return;
    };
    let printed = print_module(&module);
    let reparsed = parse_module(&printed)
        .unwrap_or_else(|e| panic!("printed module does not parse: {e}\n{printed}"));
    assert_eq!(
        print_module(&reparsed),
        printed,
        "reprinting changed the text"
    );
    if module == module {
        assert_eq!(
            module, reparsed,
            "round trip changed the module:\n{printed}"
        );
    }
    let _ = check_module(&module);
});
