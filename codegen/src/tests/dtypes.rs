//! Storage dtypes: f16/bf16 conversions, integer semantics, packed u4.

use super::*;
use half::{bf16, f16};
use oxrelax_dsl::tir::{BinOp, PrimExpr};
use oxrelax_dsl::DType;

#[test]
fn half_precision_conversions_are_exact() {
    for (dtype, decode, encode) in [
        (
            DType::F16,
            (|b| f16::from_bits(b).to_f32()) as fn(u16) -> f32,
            (|x| f16::from_f32(x).to_bits()) as fn(f32) -> u16,
        ),
        (
            DType::BF16,
            |b| bf16::from_bits(b).to_f32(),
            |x| bf16::from_f32(x).to_bits(),
        ),
    ] {
        // Load every 16-bit pattern, widen to f32.
        let func = elementwise([dtype, dtype, DType::F32], |x, _| x);
        let mut bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut out = vec![0f32; bits.len()];
        let mut unused = bits.clone();
        run(
            &func,
            &mut [
                bytes_of(&mut bits),
                bytes_of(&mut unused),
                bytes_of(&mut out),
            ],
            65536,
        );
        for (b, got) in bits.iter().zip(&out) {
            let want = decode(*b);
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{dtype} {b:#x}"
            );
        }
        // Narrow f32 values (incl. ties, subnormals, overflow) to 16 bits.
        let func = elementwise([DType::F32, DType::F32, dtype], |x, _| x);
        let mut values: Vec<f32> = (0..200_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .chain([
                65504.0,
                65520.0,
                1e-8,
                5.96e-8,
                2.98e-8,
                1.0 + 1.0 / 2048.0,
                f32::INFINITY,
            ])
            .collect();
        let mut unused = values.clone();
        let mut out = vec![0u16; values.len()];
        let len = values.len() as i64;
        run(
            &func,
            &mut [
                bytes_of(&mut values),
                bytes_of(&mut unused),
                bytes_of(&mut out),
            ],
            len,
        );
        for (x, got) in values.iter().zip(&out) {
            let want = encode(*x);
            let both_nan = decode(want).is_nan() && decode(*got).is_nan();
            assert!(
                want == *got || both_nan,
                "{dtype} {x:e}: want {want:#x} got {got:#x}"
            );
        }
    }
}

#[test]
fn integer_floor_division_and_casts() {
    let i64s = [DType::I64; 3];
    let xs: Vec<i64> = vec![7, -7, 7, -7, 0, 5];
    let ys: Vec<i64> = vec![2, 2, -2, -2, 3, 0];
    for (op, expected) in [
        (BinOp::FloorDiv, [3i64, -4, -4, 3, 0, 5]),
        (BinOp::FloorMod, [1, 1, -1, -1, 0, 0]),
    ] {
        let func = elementwise(i64s, |x, y| x.binary(op, y));
        let (mut x, mut y, mut out) = (xs.clone(), ys.clone(), vec![0i64; 6]);
        run(
            &func,
            &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
            6,
        );
        assert_eq!(out, expected, "{op:?}");
    }
    // f32 -> i8 wraps after truncation toward zero; i32 ids widen to f32.
    let func = elementwise([DType::F32, DType::F32, DType::I8], |x, _| {
        x.cast(DType::I8)
    });
    let (mut x, mut y, mut out) = (vec![1.9f32, -1.9, 300.0], vec![0f32; 3], vec![0i8; 3]);
    run(
        &func,
        &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
        3,
    );
    assert_eq!(out, [1, -1, 44]);
}

#[test]
fn packed_u4_round_trip() {
    // out(u4)[i] = x(u8)[i] + 1, then read back through a u4 -> u8 kernel.
    let pack = elementwise([DType::U8, DType::U8, DType::U4], |x, _| {
        x + PrimExpr::Int(1, DType::U8)
    });
    let (mut x, mut y, mut packed) = ((0u8..15).collect::<Vec<_>>(), vec![0u8; 15], vec![0u8; 8]);
    run(
        &pack,
        &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut packed)],
        15,
    );
    assert_eq!(packed[0], 0x21);
    assert_eq!(packed[7], 0x0F);
    let unpack = elementwise([DType::U4, DType::U4, DType::U8], |x, _| x);
    let mut out = vec![0u8; 15];
    let mut unused = packed.clone();
    run(
        &unpack,
        &mut [
            bytes_of(&mut packed),
            bytes_of(&mut unused),
            bytes_of(&mut out),
        ],
        15,
    );
    assert_eq!(out, (1u8..16).collect::<Vec<_>>());
}
