//! A sequence of passes with instrumentation: IR dumps before and after each pass, wall
//! time per pass, and an optional well-formedness check after each pass.

use super::{Pass, PassError};
use oxrelax_dsl::IRModule;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to record while running a pipeline.
#[derive(Debug, Clone, Default)]
pub struct Instrument {
    /// Write the printed module before the first pass and after each pass into this
    /// folder (`00-input.txt`, `01-<pass>.txt`, ...).
    pub dump_dir: Option<PathBuf>,
    /// Check well-formedness after every pass.
    pub verify: bool,
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
        let mut report = PipelineReport::default();
        self.dump(&module, "00-input.txt", &mut report)?;
        let mut module = module;
        for (index, pass) in self.passes.iter().enumerate() {
            let start = Instant::now();
            module = pass.run(module)?;
            report.timings.push(PassTiming {
                pass: pass.name(),
                elapsed: start.elapsed(),
            });
            if self.instrument.verify {
                oxrelax_dsl::wellformed::check_module(&module).map_err(|source| {
                    PassError::NotWellFormed {
                        pass: pass.name().to_string(),
                        source: Box::new(source),
                    }
                })?;
            }
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

/// The front-end pipeline: normalize, legalize every op, drop dead code.
pub fn default_pipeline() -> Pipeline {
    Pipeline::new()
        .with(super::Normalize)
        .with(super::LegalizeOps)
        .with(super::DeadCodeElimination)
}

/// The whole compile pipeline up to bytecode: the front end, then scheduling of every
/// kernel and static memory planning.
pub fn compile_pipeline() -> Pipeline {
    default_pipeline()
        .with(super::ScheduleKernels::default())
        .with(super::StaticPlanBlockMemory)
}
