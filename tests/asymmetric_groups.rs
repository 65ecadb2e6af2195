//! Asymmetric 4-bit groups (`q4f16_asym`, `w4a8_asym`) keep weights that already lie on
//! such a grid (as a GGUF file's Q4_1 blocks): a copy of the tiny Llama fixture whose
//! projections are `code * step + low` per group computes what its f32 weights compute,
//! prompt and decode steps, while the symmetric 4-bit scheme cannot hold them.

mod common;
use common::{engine, fixture, load_with_kv, on_an_asymmetric_4_bit_grid, on_the_4_bit_grid};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_models::KvDtype;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use safetensors::SafeTensors;
use std::path::Path;

/// Random `[rows, depth]` weights on the 8-bit grid of the embedding table and output
/// head: per group an f16-exact scale times integers in `-126..=126`, one of them 127.
fn on_the_8_bit_grid(rng: &mut StdRng, rows: usize, depth: usize) -> Vec<f32> {
    let mut values = Vec::with_capacity(rows * depth);
    for _ in 0..rows {
        for start in (0..depth).step_by(common::QUANT_GROUP) {
            let len = common::QUANT_GROUP.min(depth - start);
            let scale = f32::from(rng.gen_range(10u16..40)) / 32768.0;
            let peak = rng.gen_range(0..len);
            values.extend((0..len).map(|k| match k == peak {
                true => 127.0 * scale,
                false => f32::from(rng.gen_range(-126i8..=126)) * scale,
            }));
        }
    }
    values
}

/// Copies the tiny Llama fixture's config into `dir` with weights on the grids: the
/// projections of whole groups on an asymmetric 4-bit grid, the others (the MLP's down
/// projection, 176 deep) on the symmetric one, the embedding table and head on the
/// 8-bit one; norms as they are.
fn write_model(dir: &Path) {
    let source = fixture("tiny-llama");
    std::fs::copy(source.join("config.json"), dir.join("config.json")).unwrap();
    let bytes = std::fs::read(source.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut rng = StdRng::seed_from_u64(41);
    let mut names: Vec<String> = tensors.names().into_iter().map(String::from).collect();
    names.sort();
    let data: Vec<(String, Vec<usize>, Vec<f32>)> = names
        .into_iter()
        .map(|name| {
            let view = tensors.tensor(&name).unwrap();
            let shape = view.shape().to_vec();
            let values = match shape[..] {
                [rows, depth] => match name.as_str() {
                    "model.embed_tokens.weight" | "lm_head.weight" => {
                        on_the_8_bit_grid(&mut rng, rows, depth)
                    }
                    _ if depth % common::QUANT_GROUP == 0 => {
                        on_an_asymmetric_4_bit_grid(&mut rng, rows, depth)
                    }
                    _ => on_the_4_bit_grid(&mut rng, rows, depth),
                },
                _ => view
                    .data()
                    .chunks(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect(),
            };
            (name, shape, values)
        })
        .collect();
    let tensors = data.iter().map(|(n, s, v)| (n.as_str(), &s[..], &v[..]));
    common::write_f32_weights(dir, tensors);
}

/// A 20-token prompt of the fixture's vocabulary.
fn prompt() -> Vec<u32> {
    (0..20).map(|i| (i * 53 + 7) % 1024).collect()
}

/// The logit rows of the prompt and of 6 decode steps fed `tokens` (f32 KV cache), flat.
fn logits(model: LoadedModel, tokens: &[u32]) -> Vec<f32> {
    let mut engine = engine(model);
    let mut rows = engine.prefill_all(&prompt()).unwrap();
    for &id in tokens {
        rows.push(engine.decode(id).unwrap());
    }
    rows.into_iter().flatten().collect()
}

#[test]
fn asymmetric_schemes_keep_weights_on_an_asymmetric_grid() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path());
    let load = |scheme| load_with_kv(dir.path(), scheme, Some(KvDtype::F32));
    let tokens = [5, 900, 17, 311, 64, 2];
    let reference = logits(load(Quantization::Q0f32), &tokens);
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.1, "the logits are not trivial: {scale}");
    let diff = |scheme| {
        let got = logits(load(scheme), &tokens);
        let pairs = got.iter().zip(&reference);
        pairs.map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max) / scale
    };
    // Float activations: rounding only (the 4-bit decode GEMV's 16-bit activations
    // included). Int8 activations: their step.
    let (kept, int8, symmetric) = (
        diff(Quantization::Q4f16Asym),
        diff(Quantization::W4a8Asym),
        diff(Quantization::Q4f16_1),
    );
    println!("max |diff| / max |logit|: q4f16_asym {kept}, w4a8_asym {int8}, q4f16_1 {symmetric}");
    assert!(kept <= 1.5e-4, "q4f16_asym: {kept}");
    assert!(int8 <= 0.05, "w4a8_asym: {int8}");
    assert!(
        symmetric > 50.0 * kept,
        "q4f16_1 holds the grid too: {symmetric}"
    );
}
