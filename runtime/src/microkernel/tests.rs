use super::*;
use crate::DType;
use half::f16;
use oxrelax_abi::MicrokernelKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KCS: [usize; 9] = [0, 1, 3, 17, 31, 32, 33, 64, 259];

/// What `c` holds outside the block a kernel may touch.
const GUARD: f32 = 7777.0;

/// Floats of guard before and after the block in `c`.
const GUARD_LEN: usize = 19;

#[test]
fn every_kernel_has_a_scalar_twin_that_needs_nothing() {
    for kernel in Microkernel::ALL {
        let twin = scalar_twin(kernel);
        assert_eq!(twin.isa, "scalar");
        assert!(twin.features.is_empty());
        if let MicrokernelKind::IntGemm { weights, .. } = kernel.spec().kind {
            assert!(matches!(
                (weights, twin.func),
                (DType::I8, MicrokernelFn::QGemmW8(_)) | (DType::U4, MicrokernelFn::QGemmW4(_))
            ));
        }
    }
}

#[test]
fn sets_pick_the_best_allowed_and_detected_isa() {
    let avx2 = crate::host::has_feature("avx2") && crate::host::has_feature("fma");
    let f16c = avx2 && crate::host::has_feature("f16c");
    // The kernels widening f16 (weights, scales, or keys and values).
    let f16_weights = [
        Microkernel::Sgemm6x16F16,
        Microkernel::Sgemv1x64F16,
        Microkernel::Sgemm12x32F16,
        Microkernel::Sgemm6x16Q4F16,
        Microkernel::Sgemv8x256Q4F16,
        Microkernel::Sgemm12x32Q4F16,
        Microkernel::AttentionF16Kv,
        Microkernel::Qgemm4x16W8,
        Microkernel::Qgemm4x16W4,
        Microkernel::Qgemv1x64W8,
        Microkernel::Qgemv1x64W4,
    ];
    // The int8-activation kernels (f16 group scales): all on AVX-512 VNNI, all but the
    // 6 x 32 blocks on AVX2 (with F16C).
    let vnni = ["avx512f", "avx512bw", "avx512vnni"];
    let int8_activations = [
        Microkernel::Qgemm6x32W8,
        Microkernel::Qgemm6x32W4,
        Microkernel::Qgemm4x16W8,
        Microkernel::Qgemm4x16W4,
        Microkernel::Qgemv1x64W8,
        Microkernel::Qgemv1x64W4,
    ];
    let vnni_only = [Microkernel::Qgemm6x32W8, Microkernel::Qgemm6x32W4];
    // The 4-bit GEMVs over f32 activations rounded to 16 bits (`vpdpwssd`).
    let vnni_gemvs = [Microkernel::Sgemv8x256Q4, Microkernel::Sgemv8x256Q4F16];
    let avx512 = [
        Microkernel::Sgemm12x32,
        Microkernel::Sgemm12x32F16,
        Microkernel::Sgemm12x32Q8,
        Microkernel::Sgemm12x32Q4,
        Microkernel::Sgemm12x32Q4F16,
        Microkernel::Sgemv8x256Q4,
        Microkernel::Sgemv8x256Q4F16,
        Microkernel::AttentionF32,
        Microkernel::AttentionF16Kv,
        Microkernel::AttentionQ8Kv,
    ];
    for kernel in Microkernel::ALL {
        let best = match (f16_weights.contains(&kernel), avx2, f16c) {
            _ if vnni_only.contains(&kernel) => "scalar",
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
        let neon = [
            Microkernel::Sgemm6x16,
            Microkernel::Sgemv1x64,
            Microkernel::Sgemm6x16F16,
            Microkernel::Sgemv1x64F16,
            Microkernel::Sgemm6x16Q8,
            Microkernel::Sgemv1x64Q8,
            Microkernel::Sgemm6x16Q4,
            Microkernel::Sgemv8x256Q4,
            Microkernel::Sgemm6x16Q4F16,
            Microkernel::Sgemv8x256Q4F16,
            Microkernel::AttentionF32,
            Microkernel::AttentionF16Kv,
            Microkernel::AttentionQ8Kv,
        ];
        let neon_i8mm = [Microkernel::Qgemm4x16W8, Microkernel::Qgemm4x16W4];
        let has = crate::host::has_feature;
        let detected = if neon.contains(&kernel) && has("neon") {
            "neon"
        } else if neon_i8mm.contains(&kernel) && has("neon") && has("i8mm") {
            "neon+i8mm"
        } else if int8_activations.contains(&kernel)
            && !vnni_only.contains(&kernel)
            && has("neon")
            && has("dotprod")
        {
            "neon+dotprod"
        } else if vnni_gemvs.contains(&kernel) && vnni.iter().all(|f| has(f)) && has("avx512vbmi") {
            "avx512vbmi"
        } else if (int8_activations.contains(&kernel) || vnni_gemvs.contains(&kernel))
            && vnni.iter().all(|f| crate::host::has_feature(f))
        {
            "avx512vnni"
        } else if avx512.contains(&kernel) && crate::host::has_feature("avx512f") {
            "avx512f"
        } else {
            best
        };
        assert_eq!(MicrokernelSet::detect().isa(kernel), detected);
        let only_avx512 = MicrokernelSet::for_features(&["avx512f"]).isa(kernel);
        let avx512f = avx512.contains(&kernel) && has("avx512f");
        assert_eq!(only_avx512 == "avx512f", avx512f);
        let with_vnni = MicrokernelSet::for_features(&vnni).isa(kernel);
        let vnni_side = matches!(detected, "avx512vnni" | "avx512vbmi");
        assert_eq!(with_vnni == "avx512vnni", vnni_side);
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
    for imp in implementations().filter(|imp| f32_gemm(imp.kernel)) {
        let name = imp.kernel.name();
        if !imp.features.iter().all(|f| crate::host::has_feature(f)) {
            println!("note: skipping {name} ({}): host lacks it", imp.isa);
            continue;
        }
        let twin = scalar_twin(imp.kernel);
        let block = imp.kernel.gemm_block().expect("a block GEMM");
        let (func, twin) = (imp.func, twin.func);
        for kc in KCS {
            for (rows, cols) in block_shapes(block, kc) {
                {
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

/// Every implementation reads no element of `a`, `b` or `scales` past what it is lent:
/// each operand ends where an inaccessible page begins (a read past it faults), and with
/// `lda > kc` the float after each row's `kc` is NaN (the result must stay finite).
#[test]
fn no_implementation_reads_past_what_it_is_lent() {
    let mut rng = StdRng::seed_from_u64(0x0DD0_000C);
    for imp in implementations().filter(|imp| f32_gemm(imp.kernel)) {
        if !imp.features.iter().all(|f| crate::host::has_feature(f)) {
            continue;
        }
        let (name, twin) = (imp.kernel.name(), scalar_twin(imp.kernel).func);
        let block = imp.kernel.gemm_block().expect("a block GEMM");
        for kc in [1, 3, 17, 33, 259] {
            for lda in [kc, kc + 1] {
                for (rows, cols) in [
                    (1, 1),
                    (block.rows, 17.min(block.cols)),
                    (block.rows, block.cols),
                ] {
                    let case = Case::with_lda(&mut rng, imp.kernel, kc, lda, rows, cols, 1);
                    let what = format!("{name} ({}) {case:?}", imp.isa);
                    let got = case.run_placed(imp.func, &what, Placement::BeforeGuardPage);
                    let want = case.run_placed(twin, &what, Placement::BeforeGuardPage);
                    for i in 0..rows {
                        for j in 0..cols {
                            let v = got[GUARD_LEN + i * case.ldc + j];
                            assert!(v.is_finite(), "{what}: c[{i}][{j}] = {v}");
                        }
                    }
                    case.check(&got, &want, &what);
                }
            }
        }
    }
}

/// The `rows x cols` parts of `block` to test at depth `kc`: every one for short
/// reductions; for long ones (slow in the twins) the edges, full and partial.
fn block_shapes(block: GemmBlock, kc: usize) -> Vec<(usize, usize)> {
    let every = (1..=block.rows).flat_map(|r| (1..=block.cols).map(move |c| (r, c)));
    if kc <= 3 {
        return every.collect();
    }
    let edge = |n: usize| [1, n / 2 + 1, n - 1, n].into_iter().filter(|&v| v >= 1);
    edge(block.rows)
        .flat_map(|r| edge(block.cols).map(move |c| (r, c)))
        .collect()
}

/// Whether `kernel` is a block GEMM of f32 activations (the int8-activation ones are
/// tested in `tests_qgemm`).
fn f32_gemm(kernel: Microkernel) -> bool {
    let int8_activations = matches!(
        scalar_twin(kernel).func,
        MicrokernelFn::QGemmW8(_) | MicrokernelFn::QGemmW4(_)
    );
    kernel.gemm_block().is_some() && !int8_activations
}

/// The scalar implementation of `kernel`.
pub(super) fn scalar_twin(kernel: Microkernel) -> &'static Implementation {
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
    /// exact in f16, so the f16-weight kernels get the same weights. A quantized kernel
    /// gets them packed in its layout ([`Case::q8_weights`]).
    b: Vec<f32>,
    /// `GUARD_LEN + EP * ldc + GUARD_LEN` floats; the block starts at `GUARD_LEN`.
    c: Vec<f32>,
    /// For a quantized kernel, the group scales `[panel][group][PANEL]` from index 1, up to
    /// the last group read of the last panel (exactly what is lent); every one exact in
    /// f16. The weights in `b` are then integers in `[-127, 127]` (int8). Empty for float
    /// weights.
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

/// Where [`Case::run_placed`] puts the operands `a`, `b` and `scales` it lends a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Placement {
    /// On the heap, from index 1 of a copy (so not 32-byte aligned).
    Heap,
    /// In a mapping whose next page is inaccessible, ending right before it (a read past
    /// the end faults).
    BeforeGuardPage,
}

/// An operand lent to a kernel: the element at index 1 of `values` onwards, placed as a
/// [`Placement`] says.
pub(super) enum Operand<T> {
    Heap(Vec<T>),
    Mapped {
        map: *mut libc::c_void,
        map_len: usize,
        first: *const T,
    },
}

impl<T: Copy> Operand<T> {
    pub(super) fn new(values: Vec<T>, placement: Placement) -> Operand<T> {
        if placement == Placement::Heap {
            return Operand::Heap(values);
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let bytes = std::mem::size_of_val(values.as_slice());
        let data_len = bytes.div_ceil(page).max(1) * page;
        let map_len = data_len + page;
        // SAFETY: a fresh private anonymous mapping (no aliasing); its last page is made
        // inaccessible, and `values` copied to end right before it (`bytes <= data_len`;
        // the page size is a multiple of `T`'s alignment).
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(map, libc::MAP_FAILED, "mmap");
            let guard = map.cast::<u8>().add(data_len);
            assert_eq!(libc::mprotect(guard.cast(), page, libc::PROT_NONE), 0);
            let start = guard.sub(bytes).cast::<T>();
            std::ptr::copy_nonoverlapping(values.as_ptr(), start, values.len());
            Operand::Mapped {
                map,
                map_len,
                first: start.add(1),
            }
        }
    }
}

impl<T> Operand<T> {
    /// The lent elements (index 1 of the values onwards).
    pub(super) fn ptr(&self) -> *const T {
        match self {
            Operand::Heap(values) => values[1..].as_ptr(),
            Operand::Mapped { first, .. } => *first,
        }
    }
}

impl<T> Drop for Operand<T> {
    fn drop(&mut self) {
        if let Operand::Mapped { map, map_len, .. } = *self {
            // SAFETY: the mapping `Operand::new` made, unmapped once.
            unsafe { libc::munmap(map, map_len) };
        }
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
        let lda = kc + rng.gen_range(0..=3);
        Case::with_lda(rng, kernel, kc, lda, rows, cols, accumulate)
    }

    fn with_lda(
        rng: &mut StdRng,
        kernel: Microkernel,
        kc: usize,
        lda: usize,
        rows: usize,
        cols: usize,
        accumulate: i64,
    ) -> Case {
        let block = kernel.gemm_block().expect("a block GEMM");
        let panel = block.panel;
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
        let mut b: Vec<f32> = (0..1 + (panels - 1) * lda * panel + kc * panel)
            .map(|n| f16::from_f32(value(n > 0 && live(n - 1))).to_f32())
            .collect();
        // The integer weights of a quantized kernel.
        let weights = match scalar_twin(kernel).func {
            MicrokernelFn::GemmQ8(_) => Some(-127..=127),
            MicrokernelFn::GemmQ4(_) | MicrokernelFn::GemmQ4F16(_) => Some(-8..=7),
            _ => None,
        };
        let mut scales = Vec::new();
        if let Some(range) = weights {
            for v in b.iter_mut().filter(|v| !v.is_nan()) {
                *v = rng.gen_range(range.clone()) as f32;
            }
            let groups = lda.div_ceil(QUANT_GROUP);
            let lent = (panels - 1) * groups + kc.div_ceil(QUANT_GROUP);
            scales = (0..1 + lent * panel)
                .map(|_| f16::from_f32(rng.gen_range(0.001f32..0.05)).to_f32())
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

    /// Row `i` of the case alone: a one-row case over the same weights and scales.
    fn row(&self, i: usize) -> Case {
        let row = self.a[1 + i * self.lda..][..self.lda].iter().copied();
        let mut c = vec![GUARD; self.c.len()];
        c[GUARD_LEN..][..self.ldc].copy_from_slice(&self.c[GUARD_LEN + i * self.ldc..][..self.ldc]);
        Case {
            rows: 1,
            a: std::iter::once(self.a[0]).chain(row).collect(),
            b: self.b.clone(),
            c,
            scales: self.scales.clone(),
            ..*self
        }
    }

    fn in_block(&self, n: usize) -> bool {
        let Some(at) = n.checked_sub(GUARD_LEN) else {
            return false;
        };
        at / self.ldc < self.rows && at % self.ldc < self.cols
    }

    /// Runs `func` (a block GEMM) on a copy of `c`, its operands on the heap; asserts the
    /// guards are untouched; returns the copy.
    fn run(&self, func: MicrokernelFn, what: &str) -> Vec<f32> {
        self.run_placed(func, what, Placement::Heap)
    }

    /// [`Case::run`] with the operands placed as `placement` says.
    fn run_placed(&self, func: MicrokernelFn, what: &str, placement: Placement) -> Vec<f32> {
        let mut c = self.c.clone();
        let lend = |values| Operand::new(values, placement);
        let a = lend(self.a.clone());
        let f16s = |values: &[f32]| values.iter().map(|&v| f16::from_f32(v)).collect();
        match func {
            MicrokernelFn::Gemm(f) => self.call(f, &a, &lend(self.b.clone()), &mut c),
            MicrokernelFn::GemmF16(f) => {
                self.call(f, &a, &Operand::new(f16s(&self.b), placement), &mut c)
            }
            MicrokernelFn::GemmQ8(f) => {
                let b = Operand::new(self.q8_weights(), placement);
                self.call_quant(f, &a, &b, &lend(self.scales.clone()), &mut c)
            }
            MicrokernelFn::GemmQ4(f) => {
                let b = Operand::new(self.q4_weights(), placement);
                self.call_quant(f, &a, &b, &lend(self.scales.clone()), &mut c)
            }
            MicrokernelFn::GemmQ4F16(f) => {
                let b = Operand::new(self.q4_weights(), placement);
                let scales = Operand::new(f16s(&self.scales), placement);
                self.call_quant(f, &a, &b, &scales, &mut c)
            }
            MicrokernelFn::Attention(_)
            | MicrokernelFn::AttentionF16Kv(_)
            | MicrokernelFn::AttentionQ8Kv(_)
            | MicrokernelFn::QGemmW8(_)
            | MicrokernelFn::QGemmW4(_) => {
                panic!("{what}: not a block GEMM of f32 activations")
            }
        }
        for (n, v) in c.iter().enumerate() {
            if !self.in_block(n) {
                assert_eq!(v.to_bits(), GUARD.to_bits(), "{what}: wrote c[{n}]");
            }
        }
        c
    }

    /// Calls `f` with `a` and weights `b` (this case's, as `W`) on `c`.
    fn call<W>(&self, f: GemmFn<W>, a: &Operand<f32>, b: &Operand<W>, c: &mut [f32]) {
        // SAFETY: `a` holds rows rows of kc floats at stride lda, `b` the panels of the
        // first cols columns, and `c` the block of rows x cols at stride ldc after
        // GUARD_LEN (rows <= EP, cols < ldc).
        unsafe {
            f(
                a.ptr(),
                b.ptr(),
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

    /// Calls quantized kernel `f` with `a`, weights `b` (this case's, packed as `W`) and
    /// `scales` on `c`.
    fn call_quant<W, S>(
        &self,
        f: GemmQuantFn<W, S>,
        a: &Operand<f32>,
        b: &Operand<W>,
        scales: &Operand<S>,
        c: &mut [f32],
    ) {
        // SAFETY: as in `call`, and `scales` holds every group read of every lent panel.
        unsafe {
            f(
                a.ptr(),
                b.ptr(),
                scales.ptr(),
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

    /// This case's integer weights as int8 (NaN weights, never read, become 0).
    fn q8_weights(&self) -> Vec<i8> {
        let byte = |v: f32| if v.is_nan() { 0 } else { v as i8 };
        self.b.iter().map(|&v| byte(v)).collect()
    }

    /// This case's integer weights packed as 4-bit pairs: a panel per `ceil(lda / 2) * PANEL`
    /// bytes, byte `(k / 2) * PANEL + j` holding depths `k` and `k + 1` (from index 1,
    /// up to the last pair lent of the last panel). A nibble of no lent weight is 0xF, so
    /// a kernel using it goes wrong.
    fn q4_weights(&self) -> Vec<U4Pair> {
        let panel = self.kernel.gemm_block().expect("a block GEMM").panel;
        let pairs = self.lda.div_ceil(2);
        let panels = self.cols.div_ceil(panel);
        let nibble = |q: usize, k: usize, j: usize| {
            let live = k < self.kc && q * panel + j < self.cols;
            let v = self.b.get(1 + q * self.lda * panel + k * panel + j);
            match v {
                Some(&v) if live => (v as i32 + 8) as u8,
                _ => 0xF,
            }
        };
        let mut bytes = vec![U4Pair(0xFF)];
        for q in 0..panels {
            let lent = if q + 1 == panels {
                self.kc.div_ceil(2)
            } else {
                pairs
            };
            for p in 0..lent {
                for j in 0..panel {
                    bytes.push(U4Pair(nibble(q, 2 * p, j) | nibble(q, 2 * p + 1, j) << 4));
                }
            }
        }
        bytes
    }

    /// The scale of weight `(k, j)` (1 for float weights).
    fn scale(&self, k: usize, j: usize, panel: usize) -> f64 {
        if self.scales.is_empty() {
            return 1.0;
        }
        let groups = self.lda.div_ceil(QUANT_GROUP);
        f64::from(self.scales[1 + ((j / panel) * groups + k / QUANT_GROUP) * panel + j % panel])
    }

    /// The weight of depth `k` and column `j`, scaled (f64).
    fn weight(&self, k: usize, j: usize) -> f64 {
        let panel = self.kernel.gemm_block().expect("a block GEMM").panel;
        let column = (j / panel) * self.lda * panel + j % panel;
        f64::from(self.b[1 + column + k * panel]) * self.scale(k, j, panel)
    }

    /// Element `(i, j)` of the product in f64, and the sum of the magnitudes of its terms
    /// (the scale rounding errors are relative to).
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let old = f64::from(self.c[GUARD_LEN + i * self.ldc + j]);
        let (mut sum, mut scale) = if self.accumulate != 0 {
            (old, old.abs())
        } else {
            (0.0, 0.0)
        };
        for k in 0..self.kc {
            let term = f64::from(self.a[1 + i * self.lda + k]) * self.weight(k, j);
            sum += term;
            scale += term.abs();
        }
        (sum, scale)
    }

    /// What rounding row `i`'s activations to 16 bits may move element `(i, j)`, for a
    /// kernel that may ([`Microkernel::rounds_activations`]; 0 otherwise): per group, its
    /// largest activation / (2 * 32639, half a code step) times the sum of the group's
    /// weight magnitudes.
    fn activation_rounding(&self, i: usize, j: usize) -> f64 {
        if !self.kernel.rounds_activations() {
            return 0.0;
        }
        let row = &self.a[1 + i * self.lda..1 + i * self.lda + self.kc];
        let mut bound = 0.0;
        for (g, group) in row.chunks(QUANT_GROUP).enumerate() {
            let largest = group.iter().fold(0.0f64, |m, &v| m.max(f64::from(v).abs()));
            let weights: f64 = (g * QUANT_GROUP..g * QUANT_GROUP + group.len())
                .map(|k| self.weight(k, j).abs())
                .sum();
            bound += largest / 65278.0 * weights;
        }
        bound
    }

    /// `got` and the twin's `want` both within ~1e-5 * kc (relative) of the reference,
    /// plus what rounding the activations may move it ([`Case::activation_rounding`]).
    fn check(&self, got: &[f32], want: &[f32], what: &str) {
        let tolerance = 1e-5 * self.kc.max(1) as f64;
        for i in 0..self.rows {
            for j in 0..self.cols {
                let n = GUARD_LEN + i * self.ldc + j;
                let (exact, scale) = self.reference(i, j);
                let rounding = self.activation_rounding(i, j);
                let bound = tolerance * scale + 1.01 * rounding + f64::MIN_POSITIVE;
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

/// The decode GEMVs over rounded activations round them a chunk at a time: a reduction
/// deeper than one chunk (and not a whole number of groups) matches the scalar twin.
#[cfg(target_arch = "x86_64")]
#[test]
fn rounding_gemvs_match_the_twin_past_one_chunk_of_activations() {
    let mut rng = StdRng::seed_from_u64(0xC4_0C4);
    let kc = super::x86_gemv_a16::CHUNK_GROUPS * QUANT_GROUP + 45;
    let rounding = implementations().filter(|imp| imp.kernel.rounds_activations());
    for imp in rounding.filter(|imp| imp.features.iter().all(|f| crate::host::has_feature(f))) {
        let twin = scalar_twin(imp.kernel).func;
        for (rows, cols) in [(1, 17), (1, 64), (1, 256), (3, 64), (8, 256)] {
            let case = Case::random(&mut rng, imp.kernel, kc, rows, cols, 1);
            let what = format!("{} ({}) {case:?}", imp.kernel.name(), imp.isa);
            let got = case.run(imp.func, &what);
            let want = case.run(twin, &what);
            case.check(&got, &want, &what);
            // The check's bound grows with the depth; a misplaced chunk is caught here.
            for i in 0..rows {
                let row = |c: &[f32]| c[GUARD_LEN + i * case.ldc..][..cols].to_vec();
                let (got, want) = (row(&got), row(&want));
                let largest = want.iter().fold(0.0f32, |m, w| m.max(w.abs()));
                let apart = got.iter().zip(&want).map(|(g, w)| (g - w).abs());
                let worst = apart.fold(0.0f32, f32::max);
                assert!(
                    worst <= 1e-4 * largest,
                    "{what}: row {i}: {worst} apart (largest {largest})"
                );
            }
        }
    }
}

/// A row of a 4-bit decode GEMV call gets the same bits among others as alone, in every
/// implementation: a batched decode step computes what each sequence decoded alone does.
#[test]
fn a_gemv_row_computes_the_same_alone_and_among_others() {
    let mut rng = StdRng::seed_from_u64(0xA1_0AE);
    let gemvs = [Microkernel::Sgemv8x256Q4, Microkernel::Sgemv8x256Q4F16];
    let usable = |imp: &&Implementation| imp.features.iter().all(|f| crate::host::has_feature(f));
    for imp in implementations()
        .filter(|imp| gemvs.contains(&imp.kernel))
        .filter(usable)
    {
        for (kc, rows, cols) in [(31, 2, 256), (64, 3, 17), (2061, 5, 256), (96, 8, 200)] {
            let case = Case::random(&mut rng, imp.kernel, kc, rows, cols, 1);
            let what = format!("{} ({}) {case:?}", imp.kernel.name(), imp.isa);
            let together = case.run(imp.func, &what);
            for i in 0..rows {
                let alone = case.row(i).run(imp.func, &what);
                let bits = |c: &[f32], row: usize| -> Vec<u32> {
                    let start = GUARD_LEN + row * case.ldc;
                    c[start..][..cols].iter().map(|x| x.to_bits()).collect()
                };
                assert_eq!(bits(&together, i), bits(&alone, 0), "{what}: row {i}");
            }
        }
    }
}

/// The x86 sides of the 4-bit decode GEMVs over rounded activations compute the same
/// integers in different instructions, so they agree bit for bit.
#[test]
fn the_rounding_gemv_sides_agree_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0xB17_F0B17);
    for kernel in [Microkernel::Sgemv8x256Q4, Microkernel::Sgemv8x256Q4F16] {
        let sides: Vec<_> = implementations()
            .filter(|imp| imp.kernel == kernel)
            // The sides of `x86_gemv_a16` (AVX-512F widens the weights to f32 instead).
            .filter(|imp| {
                matches!(
                    imp.isa,
                    "avx512vbmi" | "avx512vnni" | "avx2+fma" | "avx2+fma+f16c"
                )
            })
            .filter(|imp| imp.features.iter().all(|f| crate::host::has_feature(f)))
            .collect();
        if sides.len() < 2 {
            println!("note: {}: host has fewer than two x86 sides", kernel.name());
        }
        let block = kernel.gemm_block().expect("a block GEMM");
        for kc in KCS {
            for (rows, cols) in block_shapes(block, kc) {
                let case = Case::random(&mut rng, kernel, kc, rows, cols, 1);
                let bits = |imp: &Implementation| -> Vec<u32> {
                    let what = format!("{} ({}) {case:?}", kernel.name(), imp.isa);
                    case.run(imp.func, &what)
                        .iter()
                        .map(|x| x.to_bits())
                        .collect()
                };
                for pair in sides.windows(2) {
                    let what = format!("{}: {} vs {}", kernel.name(), pair[0].isa, pair[1].isa);
                    assert_eq!(bits(pair[0]), bits(pair[1]), "{what} {case:?}");
                }
            }
        }
    }
}
