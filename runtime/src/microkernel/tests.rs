use super::*;
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KCS: [usize; 6] = [0, 1, 3, 17, 256, 1000];

/// What `c` holds outside the block a kernel may touch.
const GUARD: f32 = 7777.0;

/// Floats of guard before and after the block in `c`.
const GUARD_LEN: usize = 19;

#[test]
fn specs_are_in_table_order_and_names_round_trip() {
    for (i, kernel) in Microkernel::ALL.into_iter().enumerate() {
        assert_eq!(kernel as usize, i);
        assert_eq!(SPECS[i].kernel, kernel);
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
}

#[test]
fn every_kernel_has_a_scalar_twin_that_needs_nothing() {
    for kernel in Microkernel::ALL {
        let twin = scalar_twin(kernel);
        assert_eq!(twin.isa, "scalar");
        assert!(twin.features.is_empty());
    }
}

#[test]
fn sets_pick_the_best_allowed_and_detected_isa() {
    let avx2 = host_has("avx2") && host_has("fma");
    let f16c = avx2 && host_has("f16c");
    let f16_weights = [
        Microkernel::Sgemm6x16F16,
        Microkernel::Sgemv1x64F16,
        Microkernel::Sgemm12x32F16,
    ];
    let avx512 = [
        Microkernel::Sgemm12x32,
        Microkernel::Sgemm12x32F16,
        Microkernel::Sgemm12x32Q8,
    ];
    for kernel in Microkernel::ALL {
        let best = match (f16_weights.contains(&kernel), avx2, f16c) {
            (true, _, true) => "avx2+fma+f16c",
            (false, true, _) => "avx2+fma",
            _ => "scalar",
        };
        assert_eq!(MicrokernelSet::scalar().isa(kernel), "scalar");
        assert_eq!(MicrokernelSet::for_features(&[]).isa(kernel), "scalar");
        assert_eq!(
            MicrokernelSet::for_features(&["avx2"]).isa(kernel),
            "scalar"
        );
        let all = MicrokernelSet::for_features(&["avx2", "fma", "f16c"]);
        assert_eq!(all.isa(kernel), best);
        let detected = if avx512.contains(&kernel) && host_has("avx512f") {
            "avx512f"
        } else {
            best
        };
        assert_eq!(MicrokernelSet::detect().isa(kernel), detected);
        let only_avx512 = MicrokernelSet::for_features(&["avx512f"]).isa(kernel);
        assert_eq!(only_avx512 == "avx512f", detected == "avx512f");
        if f16_weights.contains(&kernel) {
            let no_f16c = MicrokernelSet::for_features(&["avx2", "fma"]);
            assert_eq!(no_f16c.isa(kernel), "scalar");
        }
    }
    if !f16c {
        println!("note: host lacks AVX2+FMA+F16C; not every set was checked");
    }
}

#[test]
fn every_implementation_matches_the_scalar_twin_and_an_f64_reference() {
    let mut rng = StdRng::seed_from_u64(0x5EED_6E33);
    for imp in implementations().filter(|imp| imp.kernel.gemm_block().is_some()) {
        let name = imp.kernel.name();
        if !imp.features.iter().all(|f| host_has(f)) {
            println!("note: skipping {name} ({}): host lacks it", imp.isa);
            continue;
        }
        let twin = scalar_twin(imp.kernel);
        let block = imp.kernel.gemm_block().expect("a block GEMM");
        let (func, twin) = (imp.func, twin.func);
        for kc in KCS {
            for rows in 1..=block.rows {
                for cols in 1..=block.cols {
                    for accumulate in [0, 1] {
                        let case = Case::random(&mut rng, imp.kernel, kc, rows, cols, accumulate);
                        let what = format!("{name} ({}) {case:?}", imp.isa);
                        let got = case.run(func, &what);
                        let want = case.run(twin, &what);
                        case.check(&got, &want, &what);
                    }
                }
            }
        }
    }
}

fn scalar_twin(kernel: Microkernel) -> &'static Implementation {
    implementations()
        .find(|imp| imp.kernel == kernel && imp.isa == "scalar")
        .unwrap_or_else(|| panic!("{} has no scalar twin", kernel.name()))
}

/// One call of a kernel: `rows` activation rows at stride `lda` and a packed panel (NaN
/// where the result must not depend on), and a `c` buffer with guards around the
/// `rows x cols` block at stride `ldc`.
struct Case {
    kernel: Microkernel,
    kc: usize,
    rows: usize,
    cols: usize,
    lda: usize,
    ldc: usize,
    accumulate: i64,
    /// `1 + rows * lda` floats (no row past `rows`); row 0 starts at index 1 (not 32-byte
    /// aligned).
    a: Vec<f32>,
    /// The panels holding one of the first `cols` columns, `lda * PANEL` floats apart, of
    /// which the first `kc * PANEL` of each are live (NaN between them, nothing after the
    /// last: exactly what is lent); the first panel starts at index 1. Every value is
    /// exact in f16, so the f16-weight kernels get the same weights.
    b: Vec<f32>,
    /// `GUARD_LEN + EP * ldc + GUARD_LEN` floats; the block starts at `GUARD_LEN`.
    c: Vec<f32>,
    /// For an int8-weight kernel, the group scales `[panel][group][PANEL]` (the weights in
    /// `b` are then integers in `[-127, 127]`); empty otherwise.
    scales: Vec<f32>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kc={} rows={} cols={} lda={} ldc={} accumulate={}",
            self.kc, self.rows, self.cols, self.lda, self.ldc, self.accumulate
        )
    }
}

impl Case {
    fn random(
        rng: &mut StdRng,
        kernel: Microkernel,
        kc: usize,
        rows: usize,
        cols: usize,
        accumulate: i64,
    ) -> Case {
        let block = kernel.gemm_block().expect("a block GEMM");
        let panel = block.panel;
        let lda = kc + rng.gen_range(0..=3);
        let mut value = |live: bool| {
            if live {
                rng.gen_range(-1.0f32..1.0)
            } else {
                f32::NAN
            }
        };
        let a = (0..1 + rows * lda)
            .map(|n| value(n > 0 && (n - 1) % lda < kc))
            .collect();
        let panels = cols.div_ceil(panel);
        let live = |n: usize| {
            let (q, within) = (n / (lda * panel), n % (lda * panel));
            within / panel < kc && q * panel + within % panel < cols
        };
        let quantized = matches!(scalar_twin(kernel).func, MicrokernelFn::GemmQ8(_));
        let mut b: Vec<f32> = (0..1 + (panels - 1) * lda * panel + kc * panel)
            .map(|n| f16::from_f32(value(n > 0 && live(n - 1))).to_f32())
            .collect();
        let mut scales = Vec::new();
        if quantized {
            for v in b.iter_mut().filter(|v| !v.is_nan()) {
                *v = rng.gen_range(-127i32..=127) as f32;
            }
            let groups = lda.div_ceil(Q8_GROUP);
            scales = (0..panels * groups * panel)
                .map(|_| rng.gen_range(0.001f32..0.05))
                .collect();
        }
        let ldc = cols + rng.gen_range(1..=5);
        let mut c = vec![GUARD; GUARD_LEN + block.rows * ldc + GUARD_LEN];
        for i in 0..rows {
            for j in 0..cols {
                // Without accumulate, the old value must be ignored, NaN included.
                c[GUARD_LEN + i * ldc + j] = if accumulate != 0 {
                    rng.gen_range(-1.0f32..1.0)
                } else {
                    f32::NAN
                };
            }
        }
        Case {
            kernel,
            kc,
            rows,
            cols,
            lda,
            ldc,
            accumulate,
            a,
            b,
            c,
            scales,
        }
    }

    fn in_block(&self, n: usize) -> bool {
        let Some(at) = n.checked_sub(GUARD_LEN) else {
            return false;
        };
        at / self.ldc < self.rows && at % self.ldc < self.cols
    }

    /// Runs `func` (a block GEMM over f32 or f16 weights) on a copy of `c`; asserts the
    /// guards are untouched; returns the copy.
    fn run(&self, func: MicrokernelFn, what: &str) -> Vec<f32> {
        let mut c = self.c.clone();
        match func {
            MicrokernelFn::Gemm(f) => self.call(f, &self.b, &mut c),
            MicrokernelFn::GemmF16(f) => {
                let b16: Vec<f16> = self.b.iter().map(|&v| f16::from_f32(v)).collect();
                self.call(f, &b16, &mut c)
            }
            MicrokernelFn::GemmQ8(f) => self.call_q8(f, &mut c),
            MicrokernelFn::Attention(_) => panic!("{what}: not a block GEMM"),
        }
        for (n, v) in c.iter().enumerate() {
            if !self.in_block(n) {
                assert_eq!(v.to_bits(), GUARD.to_bits(), "{what}: wrote c[{n}]");
            }
        }
        c
    }

    /// Calls `f` with weights `b` (this case's, as `W`) on `c`.
    fn call<W>(&self, f: GemmFn<W>, b: &[W], c: &mut [f32]) {
        // SAFETY: `a` holds rows rows of kc floats at stride lda after index 1, `b` the
        // panels of the first cols columns after index 1, and `c` the block of rows x cols
        // at stride ldc after GUARD_LEN (rows <= EP, cols < ldc).
        unsafe {
            f(
                self.a[1..].as_ptr(),
                b[1..].as_ptr(),
                c[GUARD_LEN..].as_mut_ptr(),
                self.kc as i64,
                self.lda as i64,
                self.ldc as i64,
                self.rows as i64,
                self.cols as i64,
                self.accumulate,
            )
        }
    }

    /// Calls int8 kernel `f` with this case's integer weights and scales on `c` (NaN
    /// weights, never read, become 0).
    fn call_q8(&self, f: GemmQ8Fn, c: &mut [f32]) {
        let b8: Vec<i8> = self
            .b
            .iter()
            .map(|&v| if v.is_nan() { 0 } else { v as i8 })
            .collect();
        // SAFETY: as in `call`, and `scales` holds every group of every lent panel.
        unsafe {
            f(
                self.a[1..].as_ptr(),
                b8[1..].as_ptr(),
                self.scales.as_ptr(),
                c[GUARD_LEN..].as_mut_ptr(),
                self.kc as i64,
                self.lda as i64,
                self.ldc as i64,
                self.rows as i64,
                self.cols as i64,
                self.accumulate,
            )
        }
    }

    /// The scale of weight `(k, j)` (1 for float weights).
    fn scale(&self, k: usize, j: usize, panel: usize) -> f64 {
        if self.scales.is_empty() {
            return 1.0;
        }
        let groups = self.lda.div_ceil(Q8_GROUP);
        f64::from(self.scales[((j / panel) * groups + k / Q8_GROUP) * panel + j % panel])
    }

    /// Element `(i, j)` of the product in f64, and the sum of the magnitudes of its terms
    /// (the scale rounding errors are relative to).
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let panel = self.kernel.gemm_block().expect("a block GEMM").panel;
        let column = (j / panel) * self.lda * panel + j % panel;
        let old = f64::from(self.c[GUARD_LEN + i * self.ldc + j]);
        let (mut sum, mut scale) = if self.accumulate != 0 {
            (old, old.abs())
        } else {
            (0.0, 0.0)
        };
        for k in 0..self.kc {
            let weight = f64::from(self.b[1 + column + k * panel]) * self.scale(k, j, panel);
            let term = f64::from(self.a[1 + i * self.lda + k]) * weight;
            sum += term;
            scale += term.abs();
        }
        (sum, scale)
    }

    /// `got` and the twin's `want` both within ~1e-5 * kc (relative) of the reference.
    fn check(&self, got: &[f32], want: &[f32], what: &str) {
        let tolerance = 1e-5 * self.kc.max(1) as f64;
        for i in 0..self.rows {
            for j in 0..self.cols {
                let n = GUARD_LEN + i * self.ldc + j;
                let (exact, scale) = self.reference(i, j);
                let bound = tolerance * scale + f64::MIN_POSITIVE;
                for (who, v) in [("kernel", got[n]), ("scalar twin", want[n])] {
                    let err = (f64::from(v) - exact).abs();
                    assert!(
                        err <= bound,
                        "{what}: {who} c[{i}][{j}] = {v}, reference {exact}"
                    );
                }
                let apart = f64::from(got[n]) - f64::from(want[n]);
                assert!(
                    apart.abs() <= 2.0 * bound,
                    "{what}: c[{i}][{j}] kernel {} vs twin {}",
                    got[n],
                    want[n]
                );
            }
        }
    }
}
