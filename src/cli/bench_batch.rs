//! `oxrelax bench --batch 1,2,4,8`: aggregate speed of many sequences decoded together
//! (`batch_decode`), as llama.cpp's `llama-batched-bench` measures it: per batch size `B`,
//! `B` sequences each prefill the prompt, then decode `gen` tokens in `B`-sequence steps;
//! decode speed is `B * gen / decode time`.

use oxrelax_runtime::engine::{BatchEngine, SequenceId};
use serde::Serialize;
use std::time::Instant;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The figures of one batch size (medians over the measured runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchFigures {
    /// Sequences decoded together.
    pub batch: usize,
    /// Prompt tokens prefilled per second over all sequences (each prefills alone).
    pub prefill_tok_s: f64,
    /// Tokens decoded per second over all sequences.
    pub decode_tok_s: f64,
    /// Milliseconds of one batched decode step.
    pub step_ms: f64,
}

/// Parses `1,2,4,8`: positive sizes.
pub fn parse_batches(text: &str) -> CliResult<Vec<usize>> {
    text.split(',')
        .map(|part| match part.trim().parse::<usize>() {
            Ok(b) if b > 0 => Ok(b),
            _ => Err(format!("--batch takes positive sizes like 1,2,4,8; got `{part}`").into()),
        })
        .collect()
}

/// One run of `batch` sequences: `(prefill seconds, decode seconds)`.
fn one_run(
    engine: &mut BatchEngine,
    prompt: &[u32],
    gen: usize,
    batch: usize,
) -> CliResult<(f64, f64)> {
    let start = Instant::now();
    let mut steps: Vec<(SequenceId, u32)> = Vec::with_capacity(batch);
    for _ in 0..batch {
        // Promised only the positions the run fills (no prompt given: no prefix shared).
        let (id, _) = engine.add_sequence_for(&[], prompt.len() + gen)?;
        let logits = engine.prefill(id, prompt)?;
        steps.push((id, argmax(&logits)));
    }
    let prefill = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..gen {
        let logits = engine.decode(&steps)?;
        for (step, row) in steps.iter_mut().zip(&logits) {
            step.1 = argmax(row);
        }
    }
    let decode = start.elapsed().as_secs_f64();
    for (id, _) in steps {
        engine.remove_sequence(id);
    }
    Ok((prefill, decode))
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Measures every size of `batches` (a warm-up run, then `runs` measured ones each),
/// printing a line per size.
pub fn measure(
    engine: &mut BatchEngine,
    prompt: &[u32],
    gen: usize,
    (batches, runs): (&[usize], usize),
) -> CliResult<Vec<BatchFigures>> {
    let mut figures = Vec::with_capacity(batches.len());
    println!("batch  prefill tok/s  decode tok/s  step ms");
    for &batch in batches {
        one_run(engine, prompt, gen, batch)?;
        let mut prefill = Vec::with_capacity(runs);
        let mut decode = Vec::with_capacity(runs);
        for _ in 0..runs {
            let (p, d) = one_run(engine, prompt, gen, batch)?;
            prefill.push(p);
            decode.push(d);
        }
        let (p, d) = (super::bench::median(prefill), super::bench::median(decode));
        let tokens = batch as f64;
        let line = BatchFigures {
            batch,
            prefill_tok_s: tokens * prompt.len() as f64 / p,
            decode_tok_s: tokens * gen as f64 / d,
            step_ms: d * 1e3 / gen as f64,
        };
        println!(
            "{:>5}  {:>13.1}  {:>12.1}  {:>7.2}",
            line.batch, line.prefill_tok_s, line.decode_tok_s, line.step_ms
        );
        figures.push(line);
    }
    Ok(figures)
}
