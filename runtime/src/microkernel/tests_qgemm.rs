//! The int8-activation GEMMs ([`QGemmFn`]) against their scalar twins and an f64 reference
//! computed straight from the contract's formula, on random operands packed here from that
//! formula's layouts; every operand lent ends right before an inaccessible page and `c`
//! carries guard values around the block.

use super::tests::{scalar_twin, Operand, Placement};
use super::*;
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The reductions tested (whole groups of 32).
const KCS: [usize; 5] = [32, 64, 96, 288, 2048];

/// The column counts tested (those up to a block's width).
const COLS: [usize; 9] = [1, 15, 16, 17, 31, 32, 33, 63, 64];

/// What `c` holds outside the block a kernel may write.
const GUARD: f32 = 7777.0;

/// Floats of guard before and after the block in `c`.
const GUARD_LEN: usize = 19;

/// The int8-activation implementations this host runs.
fn host_implementations() -> impl Iterator<Item = &'static Implementation> {
    implementations().filter(|imp| {
        let int8_activations = matches!(
            imp.func,
            MicrokernelFn::QGemmW8(_) | MicrokernelFn::QGemmW4(_)
        );
        let runs = imp.features.iter().all(|f| crate::host::has_feature(f));
        if int8_activations && !runs {
            let name = imp.kernel.name();
            println!("note: skipping {name} ({}): host lacks it", imp.isa);
        }
        int8_activations && runs
    })
}

#[test]
fn every_int8_activation_gemm_matches_its_twin_and_an_f64_reference() {
    let mut rng = StdRng::seed_from_u64(0x1A8A_0008);
    for imp in host_implementations() {
        let twin = scalar_twin(imp.kernel).func;
        let block = imp.kernel.gemm_block().expect("a block GEMM");
        let widths = COLS.into_iter().filter(|&n| n <= block.cols);
        let shapes: Vec<(usize, usize)> = (1..=block.rows)
            .flat_map(|r| widths.clone().map(move |n| (r, n)))
            .collect();
        for kc in KCS {
            for &(rows, cols) in &shapes {
                let case = QCase::random(&mut rng, imp.kernel, kc, rows, cols);
                let what = format!("{} ({}) {case:?}", imp.kernel.name(), imp.isa);
                let want = case.run(twin, &what, Placement::Heap);
                case.check(&want, &what, "scalar twin");
                for placement in [Placement::Heap, Placement::BeforeGuardPage] {
                    let got = case.run(imp.func, &what, placement);
                    case.check(&got, &what, "kernel");
                    case.agree(&got, &want, &what);
                }
            }
        }
    }
}

/// `rows` or `cols` at most 0 computes nothing; past the block's they are clamped to it.
#[test]
fn int8_activation_gemms_clamp_rows_and_columns() {
    let mut rng = StdRng::seed_from_u64(0x0C1A_3900);
    for imp in host_implementations() {
        let block = imp.kernel.gemm_block().expect("a block GEMM");
        let case = QCase::random(&mut rng, imp.kernel, 64, block.rows, block.cols);
        let what = format!("{} ({})", imp.kernel.name(), imp.isa);
        let want = case.run(imp.func, &what, Placement::BeforeGuardPage);
        case.check(&want, &what, "kernel");
        let beyond = (block.rows as i64 + 3, block.cols as i64 + 5);
        let got = case.run_as(imp.func, &what, Placement::BeforeGuardPage, beyond);
        assert_eq!(bits(&got), bits(&want), "{what}: clamped to the block");
        for nothing in [(0, 5), (1, 0), (-1, 3), (2, -7)] {
            let got = case.run_as(imp.func, &what, Placement::BeforeGuardPage, nothing);
            assert_eq!(bits(&got), bits(&case.c), "{what}: {nothing:?} wrote");
        }
    }
}

/// The bit patterns of `values` (NaN compares equal to itself).
fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// One call: `rows` activation rows of `kc` bytes at stride `lda`, the weights of the
/// panels holding the first `cols` columns (packed as the kernel's layout when run), their
/// scales, and a `c` with guards around the `rows x cols` block.
struct QCase {
    kc: usize,
    rows: usize,
    cols: usize,
    lda: usize,
    ldc: usize,
    /// `1 + (rows - 1) * lda + kc` bytes in `1..=255` from index 1 (nothing after the last
    /// row's `kc`); 0 between rows (a code of -128, which no row holds).
    a: Vec<u8>,
    /// `1 + rows * (kc / 32)` scales of each row's groups (`[row][group]` from index 1),
    /// spread over three orders of magnitude (an outlier group's next to small ones).
    a_scales: Vec<f32>,
    /// The weights `w[k][j]` of every column of the lent panels.
    w: Vec<Vec<i32>>,
    /// `1 + panels * (kc / 32) * 16` group scales (f16), `[panel][group][16]` from index 1.
    scales: Vec<f16>,
    /// `GUARD_LEN + EP * ldc + GUARD_LEN` floats; the block starts at `GUARD_LEN`, NaN (it
    /// is overwritten), the rest [`GUARD`].
    c: Vec<f32>,
}

impl std::fmt::Debug for QCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kc={} rows={} cols={} lda={} ldc={}",
            self.kc, self.rows, self.cols, self.lda, self.ldc
        )
    }
}

/// A random small scale of either sign.
fn random_scale(rng: &mut StdRng, magnitude: f32) -> f32 {
    let v = rng.gen_range(magnitude / 50.0..magnitude);
    if rng.gen_bool(0.5) {
        v
    } else {
        -v
    }
}

impl QCase {
    fn random(rng: &mut StdRng, kernel: Microkernel, kc: usize, rows: usize, cols: usize) -> QCase {
        let block = kernel.gemm_block().expect("a block GEMM");
        let lda = kc + [0, 0, 1, 5, 64][rng.gen_range(0..5)];
        let a = (0..1 + (rows - 1) * lda + kc)
            .map(|n| match n {
                0 => 0,
                n if (n - 1) % lda < kc => rng.gen_range(1..=255),
                _ => 0,
            })
            .collect();
        let a_scales = (0..1 + rows * (kc / QUANT_GROUP))
            .map(|_| {
                let magnitude = [0.001, 0.01, 0.1][rng.gen_range(0..3)];
                random_scale(rng, magnitude)
            })
            .collect();
        let range = if Self::w8(kernel) { -127..=127 } else { -8..=7 };
        let width = cols.div_ceil(PANEL) * PANEL;
        let w: Vec<Vec<i32>> = (0..kc)
            .map(|_| (0..width).map(|_| rng.gen_range(range.clone())).collect())
            .collect();
        let scales = (0..1 + width * (kc / QUANT_GROUP))
            .map(|_| f16::from_f32(random_scale(rng, 0.05)))
            .collect();
        let ldc = cols + rng.gen_range(1..=5);
        let mut c = vec![GUARD; GUARD_LEN + block.rows * ldc + GUARD_LEN];
        for i in 0..rows {
            c[GUARD_LEN + i * ldc..][..cols].fill(f32::NAN);
        }
        QCase {
            kc,
            rows,
            cols,
            lda,
            ldc,
            a,
            a_scales,
            w,
            scales,
            c,
        }
    }

    /// Whether `kernel` takes int8 weights (else 4-bit).
    fn w8(kernel: Microkernel) -> bool {
        matches!(scalar_twin(kernel).func, MicrokernelFn::QGemmW8(_))
    }

    /// `s(k, j)`: `scales[(j / 16)*(kc / 32)*16 + (k / 32)*16 + j % 16]`, widened (exactly).
    fn s(&self, k: usize, j: usize) -> f64 {
        let at = (j / 16) * (self.kc / 32) * 16 + (k / 32) * 16 + j % 16;
        f64::from(self.scales[1 + at])
    }

    /// The weights as int8 panels: `b[(j / 16)*kc*16 + (k / 4)*64 + (j % 16)*4 + k % 4]`
    /// (from index 1).
    fn w8_panels(&self) -> Vec<i8> {
        let mut b = vec![0i8; 1 + self.w[0].len() * self.kc];
        for (k, w_k) in self.w.iter().enumerate() {
            for (j, &w) in w_k.iter().enumerate() {
                b[1 + (j / 16) * self.kc * 16 + (k / 4) * 64 + (j % 16) * 4 + k % 4] = w as i8;
            }
        }
        b
    }

    /// The weights as 4-bit panels: `w + 8` in the low nibble of
    /// `b[(j / 16)*kc*8 + (k / 8)*64 + (j % 16)*4 + k % 4]` if `k % 8 < 4`, else in its high
    /// nibble (from index 1).
    fn w4_panels(&self) -> Vec<u8> {
        let mut b = vec![0u8; 1 + self.w[0].len() * self.kc / 2];
        for (k, w_k) in self.w.iter().enumerate() {
            for (j, &w) in w_k.iter().enumerate() {
                let nibble = (w + 8) as u8;
                let byte = &mut b[1 + (j / 16) * self.kc * 8 + (k / 8) * 64 + (j % 16) * 4 + k % 4];
                *byte |= if k % 8 < 4 { nibble } else { nibble << 4 };
            }
        }
        b
    }

    /// Runs `func` on a copy of `c` for this case's block; asserts the guards are intact.
    fn run(&self, func: MicrokernelFn, what: &str, placement: Placement) -> Vec<f32> {
        let block = (self.rows as i64, self.cols as i64);
        self.run_as(func, what, placement, block)
    }

    /// [`QCase::run`] telling the kernel the block is `rows x cols` (operands still this
    /// case's).
    fn run_as(
        &self,
        func: MicrokernelFn,
        what: &str,
        placement: Placement,
        (rows, cols): (i64, i64),
    ) -> Vec<f32> {
        let mut c = self.c.clone();
        let lend = |values: &Vec<f32>| Operand::new(values.clone(), placement);
        let (a, a_scales) = (
            Operand::new(self.a.clone(), placement),
            lend(&self.a_scales),
        );
        let scales = Operand::new(self.scales.clone(), placement);
        let out = c[GUARD_LEN..].as_mut_ptr();
        let dims = [self.kc as i64, self.lda as i64, self.ldc as i64, rows, cols];
        // SAFETY: `a` holds `rows` rows of `kc` bytes at stride `lda`, `a_scales` their
        // groups' floats, `b` the panels of the first `cols` columns and `scales` all their
        // groups, and `c` the block of `rows x cols` at stride `ldc` after
        // GUARD_LEN (`rows <= EP`, `cols < ldc`; clamped to them when larger).
        unsafe {
            match func {
                MicrokernelFn::QGemmW8(f) => {
                    let b = Operand::new(self.w8_panels(), placement);
                    call(f, (&a, &a_scales, &b, &scales), out, dims);
                }
                MicrokernelFn::QGemmW4(f) => {
                    let b = Operand::new(self.w4_panels(), placement);
                    call(f, (&a, &a_scales, &b, &scales), out, dims);
                }
                _ => panic!("{what}: not an int8-activation GEMM"),
            }
        }
        for (n, v) in c.iter().enumerate() {
            if !self.in_block(n) {
                assert_eq!(v.to_bits(), GUARD.to_bits(), "{what}: wrote c[{n}]");
            }
        }
        c
    }

    fn in_block(&self, n: usize) -> bool {
        let Some(at) = n.checked_sub(GUARD_LEN) else {
            return false;
        };
        at / self.ldc < self.rows && at % self.ldc < self.cols
    }

    /// Element `(i, j)` in f64 straight from the contract,
    /// `sum_k a_scales[i*(kc/32) + k/32] * s(k, j) * (a[i*lda + k] - 128) * w(k, j)`, and the
    /// magnitude rounding errors are relative to: the sum of `|a_scale * s * w| * (|a - 128|
    /// + 128)` (the bytes' products and the `128 * w` a kernel summing them removes).
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for k in 0..self.kc {
            let a_scale =
                f64::from(self.a_scales[1 + i * (self.kc / QUANT_GROUP) + k / QUANT_GROUP]);
            let code = f64::from(self.a[1 + i * self.lda + k]) - 128.0;
            let weight = a_scale * self.s(k, j) * f64::from(self.w[k][j]);
            sum += weight * code;
            magnitude += weight.abs() * (code.abs() + 128.0);
        }
        (sum, magnitude)
    }

    /// The bound on the error of element `(i, j)` against the reference.
    fn bound(magnitude: f64) -> f64 {
        1e-5 * magnitude + 1e-6
    }

    /// `got`'s block within [`QCase::bound`] of the reference.
    fn check(&self, got: &[f32], what: &str, who: &str) {
        for i in 0..self.rows {
            for j in 0..self.cols {
                let v = got[GUARD_LEN + i * self.ldc + j];
                let (exact, magnitude) = self.reference(i, j);
                let err = (f64::from(v) - exact).abs();
                assert!(
                    err <= Self::bound(magnitude),
                    "{what}: {who} c[{i}][{j}] = {v}, reference {exact} (magnitude {magnitude})"
                );
            }
        }
    }

    /// The kernel's and the twin's blocks within twice the bound of each other.
    fn agree(&self, got: &[f32], want: &[f32], what: &str) {
        for i in 0..self.rows {
            for j in 0..self.cols {
                let n = GUARD_LEN + i * self.ldc + j;
                let (_, magnitude) = self.reference(i, j);
                let apart = (f64::from(got[n]) - f64::from(want[n])).abs();
                assert!(
                    apart <= 2.0 * Self::bound(magnitude),
                    "{what}: c[{i}][{j}] kernel {} vs twin {}",
                    got[n],
                    want[n]
                );
            }
        }
    }
}

/// The operands lent to a kernel: `(a, a_scales, b, scales)`.
type Lent<'a, W> = (
    &'a Operand<u8>,
    &'a Operand<f32>,
    &'a Operand<W>,
    &'a Operand<f16>,
);

/// Calls `f` with the lent operands `(a, a_scales, b, scales)`, output `c` and
/// `[kc, lda, ldc, rows, cols]`.
///
/// # Safety
/// As [`QGemmFn`] for those operands.
unsafe fn call<W>(
    f: QGemmFn<W>,
    (a, a_scales, b, scales): Lent<'_, W>,
    c: *mut f32,
    [kc, lda, ldc, rows, cols]: [i64; 5],
) {
    // SAFETY: the caller's contract.
    unsafe {
        f(
            a.ptr(),
            a_scales.ptr(),
            b.ptr(),
            scales.ptr(),
            c,
            kc,
            lda,
            ldc,
            rows,
            cols,
        )
    }
}

/// An aarch64 CPU with `i8mm` runs the `smmla` prefill kernels, one with `dotprod` the
/// `sdot` ones (qemu-user's CPU has both); without them, the scalar twins.
#[cfg(target_arch = "aarch64")]
#[test]
fn int8_capable_cpus_run_the_neon_int8_kernels() {
    let set = super::MicrokernelSet::detect();
    let best = |features: &[(&'static str, &'static str)]| {
        features
            .iter()
            .find(|(feature, _)| crate::host::has_feature(feature))
            .map_or("scalar", |(_, isa)| *isa)
    };
    let prefill = best(&[("i8mm", "neon+i8mm"), ("dotprod", "neon+dotprod")]);
    let decode = best(&[("dotprod", "neon+dotprod")]);
    assert_eq!(set.isa(Microkernel::Qgemm4x16W8), prefill);
    assert_eq!(set.isa(Microkernel::Qgemm4x16W4), prefill);
    assert_eq!(set.isa(Microkernel::Qgemv1x64W4), decode);
    let dot_only = super::MicrokernelSet::for_features(&["neon", "dotprod"]);
    assert_eq!(dot_only.isa(Microkernel::Qgemm4x16W8), decode);
    let neon = super::MicrokernelSet::for_features(&["neon"]);
    assert_eq!(neon.isa(Microkernel::Qgemm4x16W8), "scalar");
}
