//! Ahead-of-time objects: the same kernel compiled for each supported triple is an object
//! of that triple's format and machine, exporting the kernel under its symbol.

mod common;

use common::*;
use oxrelax_codegen::{compile_object, isa, kernel_symbol};
use oxrelax_dsl::legalize::legalize_call;
use oxrelax_dsl::{op, DType, Expr};
use oxrelax_schedules::{default_schedule, ScheduleConfig};

/// ELF `e_machine` values and the Mach-O CPU type of arm64.
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;
const MACHO_ARM64: u32 = 0x0100_000c;

fn object_for(triple: &str, features: &[&str]) -> (String, Vec<u8>) {
    let x = var("x", vec![n(), c(17)], DType::F32);
    let Expr::Call(call) = op::silu(&x).unwrap() else {
        unreachable!("op constructors build calls")
    };
    let legalized = legalize_call(&call).unwrap();
    let func = default_schedule(&legalized.func, &ScheduleConfig::default());
    let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
    let isa = isa::target_isa(triple, &features).unwrap();
    let name = legalized.name_hint;
    let object = compile_object(std::iter::once((&name, &func)), isa, &[]).unwrap();
    (kernel_symbol(&name), object)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn each_triple_gets_an_object_of_its_format_and_machine_exporting_the_kernel() {
    for (triple, features, machine) in [
        ("x86_64-unknown-linux-gnu", &["avx2", "fma"][..], EM_X86_64),
        ("aarch64-unknown-linux-gnu", &[][..], EM_AARCH64),
        ("aarch64-linux-android", &[][..], EM_AARCH64),
    ] {
        let (symbol, object) = object_for(triple, features);
        assert_eq!(&object[..4], b"\x7fELF", "{triple}");
        assert_eq!(
            u16::from_le_bytes([object[18], object[19]]),
            machine,
            "{triple}"
        );
        assert!(contains(&object, &symbol), "{triple}: no {symbol}");
    }
    let (symbol, object) = object_for("aarch64-apple-darwin", &[]);
    assert_eq!(&object[..4], &0xfeed_facf_u32.to_le_bytes());
    assert_eq!(
        u32::from_le_bytes(object[4..8].try_into().unwrap()),
        MACHO_ARM64
    );
    assert!(contains(&object, &symbol), "no {symbol}");
}

#[test]
fn an_unknown_triple_or_feature_is_an_error_naming_it() {
    let err = isa::target_isa("sparc-unknown-nowhere", &[]).err().unwrap();
    assert!(err.to_string().contains("sparc-unknown-nowhere"), "{err}");
    let err = isa::target_isa("x86_64-unknown-linux-gnu", &["+nosuch".into()])
        .err()
        .unwrap();
    assert!(err.to_string().contains("nosuch"), "{err}");
}
