//! The attention microkernels (f32 and f16 keys and values, int8 ones with row scales)
//! against their scalar twins and an f64 reference, on random rows of odd lengths and
//! strides and calls of one to more than a batch of query rows, with guards around `out`;
//! over f16 keys and values each computes exactly what its f32 version computes on their
//! widening. Many calls start past the first key row (a sliding window: the attention
//! schedule moves the run's base to the window's first row), which must equal the
//! attention over every row with the earlier ones masked.

use super::*;
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What `out` holds before and after the row a kernel may write.
const GUARD: f32 = 7777.0;

/// Floats of guard on each side of `out`.
const GUARD_LEN: usize = 9;

/// Key counts to test: none, fewer and more than a vector of lanes and a key block, and a
/// long cache (many blocks).
const KEYS: [usize; 12] = [0, 1, 2, 7, 8, 9, 31, 32, 33, 65, 100, 1000];

/// Head dims to test: shorter and longer than a vector and than the registers `out` is
/// accumulated in, with and without a tail.
const DIMS: [usize; 8] = [1, 7, 8, 16, 23, 40, 64, 67];

/// Query rows per call to pick from: one, a few (each batch size the AVX-512 kernel takes
/// at once and odd counts it splits), and more than its batch of 8.
const ROWS: [usize; 7] = [1, 2, 3, 4, 7, 8, 11];

/// A rounding of f32 values to a key/value element type (kept as f32).
type Rounding = fn(f32) -> f32;

/// The attention kernels, each with the rounding of its key/value element type (int8
/// codes: `[-2, 2)` spread over most of the code range).
const KERNELS: [(Microkernel, Rounding); 3] = [
    (Microkernel::AttentionF32, |x| x),
    (Microkernel::AttentionF16Kv, |x| f16::from_f32(x).to_f32()),
    (Microkernel::AttentionQ8Kv, |x| (x * 63.0).round()),
];

/// The row scales of an int8 case: one per row of k and of v, `stride` floats apart
/// (NaN between), some of them zero (an all-zero row quantizes to scale 0).
struct Scales {
    k: Vec<f32>,
    v: Vec<f32>,
    stride: usize,
}

impl Scales {
    fn random(rng: &mut StdRng, keys: usize) -> Scales {
        let stride = rng.gen_range(1..=4);
        let mut column = || -> Vec<f32> {
            let len = keys.saturating_sub(1) * stride + usize::from(keys > 0);
            (0..len)
                .map(|n| match (n % stride, rng.gen_range(0..10)) {
                    (0, 0) => 0.0,
                    (0, _) => rng.gen_range(0.001f32..0.05),
                    _ => f32::NAN,
                })
                .collect()
        };
        Scales {
            k: column(),
            v: column(),
            stride,
        }
    }

    /// The scale of key (`which` 0) or value (1) row `j`.
    fn of(&self, which: usize, j: usize) -> f64 {
        f64::from([&self.k, &self.v][which][j * self.stride])
    }
}

/// One call: `rows` query rows, `keys` key and value rows at `stride`, an `out` with
/// guards. The
/// key and value elements are f32 values their kernel's element type holds exactly.
struct Case {
    rows: usize,
    keys: usize,
    /// The first key row the call reads (the start of a sliding window; rows before it
    /// are masked out in the reference).
    first: usize,
    dim: usize,
    stride: usize,
    scale: f32,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// The row scales, for int8 keys and values.
    scales: Option<Scales>,
}

impl Case {
    /// Random rows, keys and values rounded by `round` (to `kernel`'s element type), with
    /// row scales for the int8 kernel.
    fn for_kernel(rng: &mut StdRng, (keys, dim): (usize, usize), kernel: Microkernel) -> Case {
        let round = KERNELS
            .iter()
            .find(|(k, _)| *k == kernel)
            .expect("a kernel")
            .1;
        let mut case = Case::random(rng, keys, dim, round);
        if kernel == Microkernel::AttentionQ8Kv {
            case.scales = Some(Scales::random(rng, keys));
        }
        case
    }

    /// Random rows, keys and values rounded by `round` (to the kernel's element type).
    fn random(rng: &mut StdRng, keys: usize, dim: usize, round: Rounding) -> Case {
        let stride = dim + rng.gen_range(0..=3) * 4;
        // Lanes between rows are NaN: the result must not depend on them.
        let row_major = |rng: &mut StdRng| -> Vec<f32> {
            let len = keys.saturating_sub(1) * stride + if keys > 0 { dim } else { 0 };
            (0..len)
                .map(|n| {
                    if n % stride < dim {
                        round(rng.gen_range(-2.0f32..2.0))
                    } else {
                        f32::NAN
                    }
                })
                .collect()
        };
        let rows = ROWS[rng.gen_range(0..ROWS.len())];
        let first = if rng.gen_bool(0.5) {
            0
        } else {
            rng.gen_range(0..=keys)
        };
        Case {
            rows,
            keys,
            first,
            dim,
            stride,
            scale: 1.0 / (dim.max(1) as f32).sqrt(),
            q: (0..rows * dim)
                .map(|_| rng.gen_range(-2.0f32..2.0))
                .collect(),
            k: row_major(rng),
            v: row_major(rng),
            scales: None,
        }
    }

    /// Runs attention kernel `func` (keys and values converted to its element type);
    /// asserts the guards are untouched; returns the row.
    fn run(&self, func: MicrokernelFn, what: &str) -> Vec<f32> {
        match func {
            MicrokernelFn::Attention(f) => self.call(f, (&self.k, &self.v), what),
            MicrokernelFn::AttentionF16Kv(f) => {
                let f16s = |x: &[f32]| x.iter().map(|&e| f16::from_f32(e)).collect::<Vec<_>>();
                self.call(f, (&f16s(&self.k), &f16s(&self.v)), what)
            }
            MicrokernelFn::AttentionQ8Kv(f) => self.call_q8(f, what),
            _ => panic!("{what}: not an attention kernel"),
        }
    }

    /// Calls int8 kernel `func` on this case's codes and scales; returns the row.
    fn call_q8(&self, func: AttentionQ8KvFn, what: &str) -> Vec<f32> {
        let scales = self.scales.as_ref().expect("an int8 case has scales");
        // NaN lanes between rows become code 0 (any code: never read).
        let codes = |x: &[f32]| x.iter().map(|&e| e as i8).collect::<Vec<_>>();
        let (k, v) = (codes(&self.k), codes(&self.v));
        let (k, v) = (self.run_start(&k), self.run_start(&v));
        let skipped = self.first * scales.stride;
        self.guarded(what, |out| {
            // SAFETY: as `call`, and the scales past the skipped rows' hold
            // (keys - first - 1) * stride + 1 floats.
            unsafe {
                func(
                    self.q.as_ptr(),
                    k,
                    v,
                    scales.k.as_ptr().wrapping_add(skipped),
                    scales.v.as_ptr().wrapping_add(skipped),
                    out,
                    self.rows as i64,
                    (self.keys - self.first) as i64,
                    self.stride as i64,
                    self.dim as i64,
                    self.scale,
                    scales.stride as i64,
                )
            }
        })
    }

    /// Calls `func` on `q`, keys and values `k` and `v` (as many elements as this case's)
    /// and a guarded `out`; returns the row.
    fn call<KV>(&self, func: AttentionFn<KV>, (k, v): (&[KV], &[KV]), what: &str) -> Vec<f32> {
        assert_eq!((k.len(), v.len()), (self.k.len(), self.v.len()));
        let (k, v) = (self.run_start(k), self.run_start(v));
        self.guarded(what, |out| {
            // SAFETY: `q` holds rows * dim floats, `k` and `v` past the skipped rows
            // (keys - first - 1) * stride + dim elements, and `out` rows * dim floats.
            unsafe {
                func(
                    self.q.as_ptr(),
                    k,
                    v,
                    out,
                    self.rows as i64,
                    (self.keys - self.first) as i64,
                    self.stride as i64,
                    self.dim as i64,
                    self.scale,
                )
            }
        })
    }

    /// Where the call's rows of `x` (keys or values, row-major at `stride`) start: past
    /// the rows before `first` (wrapping: no rows are read when `first` is `keys`).
    fn run_start<T>(&self, x: &[T]) -> *const T {
        x.as_ptr().wrapping_add(self.first * self.stride)
    }

    /// Runs `call` on `rows * dim` NaNs between guards; asserts the guards are
    /// untouched; returns the output rows.
    fn guarded(&self, what: &str, call: impl FnOnce(*mut f32)) -> Vec<f32> {
        let len = self.rows * self.dim;
        let mut out = vec![GUARD; GUARD_LEN + len + GUARD_LEN];
        out[GUARD_LEN..GUARD_LEN + len].fill(f32::NAN);
        // SAFETY: `GUARD_LEN + len` is inside `out`.
        call(unsafe { out.as_mut_ptr().add(GUARD_LEN) });
        let (before, rest) = out.split_at(GUARD_LEN);
        let (row, after) = rest.split_at(len);
        for guard in before.iter().chain(after) {
            assert_eq!(guard.to_bits(), GUARD.to_bits(), "{what}: wrote a guard");
        }
        row.to_vec()
    }

    /// The output rows in f64 (key and value rows times their scales in an int8 case).
    fn reference(&self) -> Vec<f64> {
        (0..self.rows).flat_map(|r| self.reference_row(r)).collect()
    }

    /// Output row `r` in f64.
    fn reference_row(&self, r: usize) -> Vec<f64> {
        let q = &self.q[r * self.dim..(r + 1) * self.dim];
        let scale = |which: usize, j: usize| self.scales.as_ref().map_or(1.0, |s| s.of(which, j));
        let row = |x: &[f32], j: usize| -> Vec<f64> {
            x[j * self.stride..j * self.stride + self.dim]
                .iter()
                .map(|&e| f64::from(e))
                .collect()
        };
        let visible = self.first..self.keys;
        let scores: Vec<f64> = visible
            .clone()
            .map(|j| {
                let dot: f64 = q
                    .iter()
                    .zip(row(&self.k, j))
                    .map(|(&a, b)| f64::from(a) * b)
                    .sum();
                f64::from(self.scale) * dot * scale(0, j)
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        (0..self.dim)
            .map(|d| {
                let sum: f64 = visible
                    .clone()
                    .zip(&weights)
                    .map(|(j, w)| w * row(&self.v, j)[d] * scale(1, j))
                    .sum();
                if visible.is_empty() {
                    0.0
                } else {
                    sum / total
                }
            })
            .collect()
    }

    /// Runs `func` and `twin`; asserts both are within 1e-5 (relative) of the f64
    /// reference.
    fn check(&self, func: MicrokernelFn, twin: MicrokernelFn, what: &str) {
        let (got, want) = (self.run(func, what), self.run(twin, what));
        for (d, exact) in self.reference().into_iter().enumerate() {
            for (who, value) in [("kernel", got[d]), ("twin", want[d])] {
                let err = (f64::from(value) - exact).abs();
                assert!(
                    err <= 1e-5 * (1.0 + exact.abs()),
                    "{what}: {who} out[{d}] = {value}, reference {exact}"
                );
            }
        }
    }
}

#[test]
fn every_attention_implementation_matches_the_twin_and_an_f64_reference() {
    let mut rng = StdRng::seed_from_u64(0xA77E);
    for (kernel, _) in KERNELS {
        let twin = implementations()
            .find(|imp| imp.kernel == kernel && imp.isa == "scalar")
            .expect("a scalar twin")
            .func;
        for imp in implementations().filter(|imp| imp.kernel == kernel) {
            if !imp.features.iter().all(|f| crate::host::has_feature(f)) {
                println!(
                    "note: skipping {} ({}): host lacks it",
                    kernel.name(),
                    imp.isa
                );
                continue;
            }
            for (keys, dim) in KEYS.into_iter().flat_map(|k| DIMS.map(|d| (k, d))) {
                let case = Case::for_kernel(&mut rng, (keys, dim), kernel);
                let rows = case.rows;
                let what = format!(
                    "{} ({}) rows={rows} keys={}..{keys} dim={dim}",
                    kernel.name(),
                    imp.isa,
                    case.first
                );
                case.check(imp.func, twin, &what);
            }
        }
    }
}

/// Over f16 keys and values, the scalar twin and (on an AVX2+FMA+F16C host) the AVX2
/// kernel, (on an AVX-512F host) the AVX-512 one or (on aarch64) the NEON one give bit for
/// bit what their f32 versions give on the widened rows.
#[test]
fn over_f16_keys_and_values_each_kernel_computes_what_its_f32_version_does() {
    let mut rng = StdRng::seed_from_u64(0xF16_CAC4E);
    let round = KERNELS[1].1;
    for set in [
        MicrokernelSet::scalar(),
        MicrokernelSet::for_features(&["avx2", "fma", "f16c"]),
        MicrokernelSet::for_features(&["avx512f"]),
        MicrokernelSet::for_features(&["neon"]),
    ] {
        let (f32_isa, f16_isa) = (
            set.isa(Microkernel::AttentionF32),
            set.isa(Microkernel::AttentionF16Kv),
        );
        // The F16C kernel is the AVX2+FMA one with F16C loads.
        if f16_isa != f32_isa && f16_isa != format!("{f32_isa}+f16c") {
            println!("note: skipping {f16_isa} against {f32_isa}: host lacks F16C");
            continue;
        }
        for (keys, dim) in KEYS.into_iter().flat_map(|k| DIMS.map(|d| (k, d))) {
            let case = Case::random(&mut rng, keys, dim, round);
            let what = format!("{f16_isa} rows={} keys={keys} dim={dim}", case.rows);
            let wide = case.run(set.get(Microkernel::AttentionF32), &what);
            let half = case.run(set.get(Microkernel::AttentionF16Kv), &what);
            let bits = |row: &[f32]| row.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&half), bits(&wide), "{what}");
        }
    }
}

#[test]
fn attention_kernels_are_in_the_table_with_their_signatures() {
    for (name, kernel) in [
        ("attention_f32", Microkernel::AttentionF32),
        ("attention_f16kv", Microkernel::AttentionF16Kv),
        ("attention_q8kv", Microkernel::AttentionQ8Kv),
    ] {
        assert_eq!(Microkernel::from_name(name), Some(kernel));
        assert_eq!(kernel.gemm_block(), None);
        let set = MicrokernelSet::detect();
        let func = set.get(kernel);
        assert!(func.gemm().is_none());
        let (f16kv, q8kv) = (
            kernel == Microkernel::AttentionF16Kv,
            kernel == Microkernel::AttentionQ8Kv,
        );
        assert_eq!(func.attention().is_some(), !f16kv && !q8kv, "{name}");
        assert_eq!(func.attention_f16kv().is_some(), f16kv, "{name}");
        assert_eq!(func.attention_q8kv().is_some(), q8kv, "{name}");
        assert_eq!(set.table()[kernel as usize], func.address());
    }
}
