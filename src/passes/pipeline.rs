//! A sequence of passes with instrumentation: IR dumps before and after each pass, wall
//! time per pass, and an optional well-formedness check after each pass.

use super::{Pass, PassError};
use oxrelax_dsl::{IRModule, Target};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to record and check while running a pipeline.
#[derive(Debug, Clone, Default)]
pub struct Instrument {
    /// Write the printed module before the first pass and after each pass into this
    /// folder (`00-input.txt`, `01-<pass>.txt`, ...).
    pub dump_dir: Option<PathBuf>,
    /// Check well-formedness after every pass.
    pub verify: bool,
    /// Continue from the module's text form after every pass: print it, parse it back,
    /// and fail if that changed the module. Keeps the text form complete.
    pub verify_text: bool,
    /// Print what each pass reports (the rewrite phases: rules fired, e-graph sizes, stop
    /// reasons) to stderr as it runs.
    pub verbose: bool,
}

/// The environment variable that turns on checks in [`Instrument::from_env`]: a comma
/// list of `wellformed` and `text` (or `all`).
pub const VERIFY_ENV: &str = "OXRELAX_VERIFY";

impl Instrument {
    /// No dumps; the checks named in [`VERIFY_ENV`] (none when it is unset).
    pub fn from_env() -> Self {
        let value = std::env::var(VERIFY_ENV).unwrap_or_default();
        let on = |name: &str| {
            value
                .split(',')
                .any(|v| v.trim() == name || v.trim() == "all")
        };
        Instrument {
            dump_dir: None,
            verify: on("wellformed"),
            verify_text: on("text"),
            verbose: false,
        }
    }
}

/// Time spent in one pass.
#[derive(Debug, Clone, PartialEq)]
pub struct PassTiming {
    /// The pass name.
    pub pass: &'static str,
    /// Wall time of its `run`.
    pub elapsed: Duration,
}

/// What a pipeline run recorded.
#[derive(Debug, Clone, Default)]
pub struct PipelineReport {
    /// One entry per pass, in order.
    pub timings: Vec<PassTiming>,
    /// Files written when dumping.
    pub dumps: Vec<PathBuf>,
    /// What the passes that report reported, by pass.
    pub notes: Vec<(&'static str, String)>,
}

/// Passes run in order.
#[derive(Default)]
pub struct Pipeline {
    passes: Vec<Box<dyn Pass>>,
    instrument: Instrument,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Self {
        Pipeline::default()
    }

    /// Appends a pass.
    pub fn with(mut self, pass: impl Pass + 'static) -> Self {
        self.passes.push(Box::new(pass));
        self
    }

    /// Sets the instrumentation.
    pub fn instrumented(mut self, instrument: Instrument) -> Self {
        self.instrument = instrument;
        self
    }

    /// The names of the passes, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Runs every pass in order.
    pub fn run(&self, module: IRModule) -> Result<(IRModule, PipelineReport), PassError> {
        self.run_observed(module, |_, _| {})
    }

    /// Runs every pass in order, showing `observe` the module before the first pass (as
    /// `input`) and after each pass (with the pass name).
    pub fn run_observed(
        &self,
        module: IRModule,
        mut observe: impl FnMut(&str, &IRModule),
    ) -> Result<(IRModule, PipelineReport), PassError> {
        let mut report = PipelineReport::default();
        observe("input", &module);
        self.dump(&module, "00-input.txt", &mut report)?;
        let mut module = module;
        for (index, pass) in self.passes.iter().enumerate() {
            let start = Instant::now();
            module = pass.run(module)?;
            report.timings.push(PassTiming {
                pass: pass.name(),
                elapsed: start.elapsed(),
            });
            if let Some(note) = pass.report() {
                if self.instrument.verbose {
                    eprintln!("{}: {note}", pass.name());
                }
                report.notes.push((pass.name(), note));
            }
            if self.instrument.verify_text {
                module = through_text(module, pass.name())?;
            }
            if self.instrument.verify {
                oxrelax_dsl::wellformed::check_module(&module).map_err(|source| {
                    PassError::NotWellFormed {
                        pass: pass.name().to_string(),
                        source: Box::new(source),
                    }
                })?;
            }
            observe(pass.name(), &module);
            let file = format!("{:02}-{}.txt", index + 1, pass.name());
            self.dump(&module, &file, &mut report)?;
        }
        Ok((module, report))
    }

    fn dump(
        &self,
        module: &IRModule,
        file: &str,
        report: &mut PipelineReport,
    ) -> Result<(), PassError> {
        let Some(dir) = &self.instrument.dump_dir else {
            return Ok(());
        };
        let path = dir.join(file);
        std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&path, oxrelax_dsl::text::print_module(module)))
            .map_err(|source| PassError::Dump {
                path: path.clone(),
                source,
            })?;
        report.dumps.push(path);
        Ok(())
    }
}

/// The front-end pipeline for the host: see [`default_pipeline_for`].
pub fn default_pipeline() -> Pipeline {
    default_pipeline_for(&Target::host())
}

/// The front-end pipeline: normalize, split fused projections whose output is sliced
/// (`rewrite-split`), quantize weights (in a quantized function), the rewrite phases
/// (fusing dequantized and transposed weights into the packed kernels of `target`'s
/// microkernels), lift weight-only computations into `transform_params`, legalize every
/// op, fuse element-wise kernels into their producers, drop dead code.
pub fn default_pipeline_for(target: &Target) -> Pipeline {
    let phases = super::PHASES.iter().fold(
        Pipeline::new()
            .with(super::Normalize)
            .with(super::RewritePhase::new(&super::SPLIT_PHASE, target))
            .with(super::QuantizeWeights {
                target: target.clone(),
            }),
        |pipeline, phase| pipeline.with(super::RewritePhase::new(phase, target)),
    );
    phases
        .with(super::LiftTransformParams)
        .with(super::LegalizeOps)
        .with(super::FuseOps)
        .with(super::DeadCodeElimination)
}

/// The whole compile pipeline for the host: see [`compile_pipeline_for`].
pub fn compile_pipeline() -> Pipeline {
    compile_pipeline_for(&Target::host())
}

/// The whole compile pipeline up to bytecode: the front end, then scheduling of every
/// kernel with `target`'s rules and static memory planning.
pub fn compile_pipeline_for(target: &Target) -> Pipeline {
    default_pipeline_for(target)
        .with(super::ScheduleKernels {
            target: target.clone(),
        })
        .with(super::StaticPlanBlockMemory)
}

/// The module after printing and parsing it back; an error if that changed it.
fn through_text(module: IRModule, pass: &str) -> Result<IRModule, PassError> {
    let text = oxrelax_dsl::text::print_module(&module);
    let failed = |reason: String| PassError::TextRoundTrip {
        pass: pass.to_string(),
        reason,
    };
    let parsed = oxrelax_dsl::text::parse_module(&text).map_err(|e| failed(e.to_string()))?;
    if parsed != module {
        return Err(failed(
            "the parsed module differs from the printed one".into(),
        ));
    }
    Ok(parsed)
}
