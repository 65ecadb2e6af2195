use super::*;

#[test]
fn specs_are_in_table_order_and_names_round_trip() {
    for (i, kernel) in Microkernel::ALL.into_iter().enumerate() {
        assert_eq!(kernel as usize, i);
        assert_eq!(MICROKERNELS[i].kernel, kernel);
        assert_eq!(Microkernel::from_name(kernel.name()), Some(kernel));
    }
    assert_eq!(
        Microkernel::from_name("sgemm_6x16"),
        Some(Microkernel::Sgemm6x16)
    );
    assert_eq!(Microkernel::from_name("sgemm_2x2"), None);
    let shape = |k: Microkernel| {
        let block = k.gemm_block().expect("a block GEMM");
        (k.name(), block.rows, block.cols, block.panel)
    };
    assert_eq!(shape(Microkernel::Sgemm6x16), ("sgemm_6x16", 6, 16, 16));
    assert_eq!(shape(Microkernel::Sgemv1x64), ("sgemv_1x64", 1, 64, 16));
    let f16 = (Microkernel::Sgemm6x16F16, Microkernel::Sgemv1x64F16);
    assert_eq!(shape(f16.0), ("sgemm_6x16_f16", 6, 16, 16));
    assert_eq!(shape(f16.1), ("sgemv_1x64_f16", 1, 64, 16));
    assert_eq!(shape(Microkernel::Sgemm12x32), ("sgemm_12x32", 12, 32, 16));
    let wide_f16 = Microkernel::Sgemm12x32F16;
    assert_eq!(shape(wide_f16), ("sgemm_12x32_f16", 12, 32, 16));
    let int8_activations = [
        (Microkernel::Qgemm6x32W8, ("qgemm_6x32_w8", 6, 32, 16)),
        (Microkernel::Qgemm6x32W4, ("qgemm_6x32_w4", 6, 32, 16)),
        (Microkernel::Qgemm4x16W8, ("qgemm_4x16_w8", 4, 16, 16)),
        (Microkernel::Qgemm4x16W4, ("qgemm_4x16_w4", 4, 16, 16)),
        (Microkernel::Qgemv1x64W8, ("qgemv_1x64_w8", 1, 64, 16)),
        (Microkernel::Qgemv1x64W4, ("qgemv_1x64_w4", 1, 64, 16)),
    ];
    for (kernel, want) in int8_activations {
        assert_eq!(shape(kernel), want);
    }
    assert_eq!(Microkernel::ALL[16], Microkernel::Qgemm6x32W8);
    assert_eq!(Microkernel::ALL[22], Microkernel::AttentionF16Kv);
    assert_eq!(Microkernel::ALL[23], Microkernel::AttentionQ8Kv);
    assert_eq!(Microkernel::COUNT, 24);
}

#[test]
fn lookups_find_the_rows_of_a_kind() {
    let q4f16 = MicrokernelSpec::gemm_over("sgemv_1x64", Q4F16).unwrap();
    assert_eq!(q4f16.kernel, Microkernel::Sgemv8x256Q4F16);
    assert!(q4f16.rounds_activations && q4f16.decode);
    assert_eq!(q4f16.kind.block(), Some((8, 256)));
    let prefill = MicrokernelSpec::gemm_over("sgemm_12x32", Q4F16).unwrap();
    assert_eq!(prefill.kernel, Microkernel::Sgemm12x32Q4F16);
    let q8 = MicrokernelSpec::gemm_over("sgemv_1x64", Q8).unwrap();
    assert_eq!(q8.kernel, Microkernel::Sgemv1x64Q8);
    let f16 = MicrokernelSpec::gemm_over("sgemm_12x32", F16).unwrap();
    assert_eq!(f16.kernel, Microkernel::Sgemm12x32F16);
    let int = MicrokernelSpec::int_gemm(6, 32, DType::U4).unwrap();
    assert_eq!(int.kernel, Microkernel::Qgemm6x32W4);
    let q8kv = MicrokernelSpec::attention_over(Q8).unwrap();
    assert_eq!(q8kv.kernel, Microkernel::AttentionQ8Kv);
    assert!(MicrokernelSpec::lookup("sgemm_2x2").is_none());
}
