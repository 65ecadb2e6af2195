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
    /// Prompt tokens per second over all sequences (every sequence's prompt counted,
    /// shared or not; the sequences prefill one after another).
    pub prefill_tok_s: f64,
    /// Tokens decoded per second over all sequences.
    pub decode_tok_s: f64,
    /// Milliseconds of one batched decode step.
    pub step_ms: f64,
    /// KV pages more than one sequence held after the prompts (a shared prompt's).
    pub shared_pages: usize,
}

/// What each run of a batch size does: every sequence prefills `prompt` (`shared`: the
/// first computes it, the others take its pages for all but its last token), then all
/// decode `gen` tokens together.
#[derive(Debug, Clone, Copy)]
pub struct BatchRun<'a> {
    /// The prompt of every sequence.
    pub prompt: &'a [u32],
    /// Tokens each sequence decodes.
    pub gen: usize,
    /// Whether the sequences share the prompt's KV pages.
    pub shared: bool,
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

/// One run of `batch` sequences: `(prefill seconds, decode seconds, shared pages)`.
fn one_run(engine: &mut BatchEngine, run: BatchRun, batch: usize) -> CliResult<(f64, f64, usize)> {
    let BatchRun { prompt, gen, .. } = run;
    let start = Instant::now();
    let mut steps: Vec<(SequenceId, u32)> = Vec::with_capacity(batch);
    for _ in 0..batch {
        // Promised only the positions the run fills; without a shared prompt none is
        // given, so no prefix is taken from another sequence.
        let held_by_others: &[u32] = if run.shared { prompt } else { &[] };
        let (id, reused) = engine.add_sequence_for(held_by_others, prompt.len() + gen)?;
        let logits = engine.prefill(id, &prompt[reused..])?;
        steps.push((id, argmax(&logits)));
    }
    let prefill = start.elapsed().as_secs_f64();
    let shared_pages = engine.page_stats().shared;
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
    Ok((prefill, decode, shared_pages))
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
    run: BatchRun,
    (batches, runs): (&[usize], usize),
) -> CliResult<Vec<BatchFigures>> {
    let mut figures = Vec::with_capacity(batches.len());
    println!("batch  prefill tok/s  decode tok/s  step ms  shared pages");
    for &batch in batches {
        one_run(engine, run, batch)?;
        let mut prefill = Vec::with_capacity(runs);
        let mut decode = Vec::with_capacity(runs);
        let mut shared_pages = 0;
        for _ in 0..runs {
            let (p, d, shared) = one_run(engine, run, batch)?;
            prefill.push(p);
            decode.push(d);
            shared_pages = shared;
        }
        let (p, d) = (super::bench::median(prefill), super::bench::median(decode));
        let tokens = batch as f64;
        let line = BatchFigures {
            batch,
            prefill_tok_s: tokens * run.prompt.len() as f64 / p,
            decode_tok_s: tokens * run.gen as f64 / d,
            step_ms: d * 1e3 / run.gen as f64,
            shared_pages,
        };
        println!(
            "{:>5}  {:>13.1}  {:>12.1}  {:>7.2}  {:>12}",
            line.batch, line.prefill_tok_s, line.decode_tok_s, line.step_ms, line.shared_pages
        );
        figures.push(line);
    }
    Ok(figures)
}
