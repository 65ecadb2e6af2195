//! The NPU's flags of `oxrelax compile`, `compare` and `dump-ir` (`--npu` and what goes
//! with it), behind the `npu` feature.

use oxrelax::artifact::{GraphCompile, Manifest};
use oxrelax::npu::compile::{NpuCompile, CALIBRATION_TOKENS};
use oxrelax::npu::qnn::recipe::RecipeChoice;
use oxrelax::npu::{partition_pipeline, PartitionNpu, Soc, QNN_HTP};
use oxrelax::passes::Pipeline;
use oxrelax_runtime::qnn::htp::LIB_DIR_ENV;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to make a model's NPU graphs (`compile --npu qnn`, `compare --npu sim`).
#[derive(clap::Args)]
pub struct NpuCompileArgs {
    /// The SoCs the NPU graphs are for, comma-separated: one context binary each (with
    /// --npu).
    #[arg(
        long,
        default_value = "SM8650",
        value_delimiter = ',',
        requires = "npu"
    )]
    soc: Vec<String>,
    /// Tokens per NPU prefill graph call (with --npu).
    #[arg(long, default_value_t = 32, requires = "npu")]
    chunk: i64,
    /// Fewer tokens per call to give the prefill graphs variants for, comma-separated: a
    /// call runs the variant with the least padding (default: a quarter of --chunk; 0:
    /// none) (with --npu).
    #[arg(long, value_delimiter = ',', requires = "npu")]
    chunk_variants: Option<Vec<i64>>,
    /// The NPU quantization recipe: w4a16 (LPBQ int4 weights, uint16 activations),
    /// w8a16 (8-bit weights), or auto: the first of those whose graphs predict the float
    /// graphs' next token at 98% of the calibration text's positions (with --npu).
    #[arg(long, default_value = "auto", requires = "npu")]
    npu_recipe: String,
    /// The text the NPU activations are calibrated on (required with --npu).
    #[arg(long, requires = "npu")]
    calibration_text: Option<PathBuf>,
}

impl NpuCompileArgs {
    /// The chunk variants asked for (0 means none), or a quarter of the chunk.
    fn chunk_variants(&self) -> Vec<i64> {
        match &self.chunk_variants {
            Some(sizes) => sizes.iter().copied().filter(|&s| s != 0).collect(),
            None => (self.chunk / 4 > 1)
                .then_some(self.chunk / 4)
                .into_iter()
                .collect(),
        }
    }

    /// The NPU compile these options describe (the calibration text read), with
    /// Qualcomm's libraries in `qnn_lib` (else OXRELAX_QNN_LIB_DIR's, else none).
    pub fn npu_compile(
        &self,
        qnn_lib: Option<&Path>,
    ) -> Result<NpuCompile, Box<dyn std::error::Error>> {
        let path = self.calibration_text.as_ref().ok_or(
            "--npu needs --calibration-text FILE (the text its activations are calibrated on)",
        )?;
        let text = oxrelax_runtime::files::read_text(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(NpuCompile {
            soc: Soc::named(self.soc.first().map_or("", String::as_str))?,
            more_socs: (self.soc.iter().skip(1))
                .map(|name| Soc::named(name))
                .collect::<Result<_, _>>()?,
            chunk: self.chunk,
            chunk_variants: self.chunk_variants(),
            recipe: RecipeChoice::named(&self.npu_recipe)?,
            calibration_text: text,
            calibration_tokens: CALIBRATION_TOKENS,
            qnn_lib: (qnn_lib.map(Path::to_path_buf))
                .or_else(|| std::env::var_os(LIB_DIR_ENV).map(PathBuf::from)),
        })
    }
}

/// The NPU flags of `oxrelax compile`.
#[derive(clap::Args)]
pub struct NpuCompileFlags {
    /// Also partition prefill and decode for an NPU and write its graphs to `npu/`
    /// (`qnn`: Qualcomm HTP through QNN, with the recipe --npu-recipe names or picks:
    /// W4A16 or W8A16).
    #[arg(long, value_parser = ["qnn"])]
    npu: Option<String>,
    #[command(flatten)]
    npu_options: NpuCompileArgs,
    /// The folder holding Qualcomm's libQnnHtp.so, to build the NPU graphs with it and
    /// store the SoC's context binary (default: OXRELAX_QNN_LIB_DIR; with neither, no
    /// context binary is written) (with --npu).
    #[arg(long, value_name = "DIR", requires = "npu")]
    qnn_lib: Option<PathBuf>,
}

impl NpuCompileFlags {
    /// The NPU part asked for by `--npu`, if any.
    pub fn npu_compile(&self) -> Result<Option<Arc<dyn GraphCompile>>, Box<dyn std::error::Error>> {
        match self.npu {
            Some(_) => self
                .npu_options
                .npu_compile(self.qnn_lib.as_deref())
                .map(|npu| Some(Arc::new(npu) as _)),
            None => Ok(None),
        }
    }
}

/// Prints what the artifact in `output` holds for the NPU (its `manifest`'s record), if
/// anything.
pub fn print_npu_record(manifest: &Manifest, output: &Path) {
    if let Some(npu) = &manifest.npu {
        for (recipe, share) in &npu.recipe_agreement {
            println!(
                "npu: {recipe} predicts the float graphs' next token at {:.1}% of the calibration positions",
                share * 100.0
            );
        }
        for (soc, binary) in &npu.context_binaries {
            println!(
                "npu: context binary for {soc} in {}",
                output.join(binary).display()
            );
        }
        if npu.context_binaries.is_empty() {
            println!(
                "npu: no context binary (set OXRELAX_QNN_LIB_DIR or --qnn-lib to the folder holding \
                 Qualcomm's libQnnHtp.so to build one; `--npu sim` runs the artifact without it)"
            );
        }
        println!(
            "npu: {} graphs for {} ({} recipe, chunks of {}, variants for {:?}) in {}",
            npu.backend,
            npu.soc,
            npu.recipe,
            npu.chunk,
            npu.chunk_variants,
            output.join("npu").display()
        );
    }
}

/// An NPU backend.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum NpuBackend {
    /// Qualcomm's HTP through QNN.
    Qnn,
}

/// The NPU flags of `oxrelax dump-ir`.
#[derive(clap::Args)]
pub struct DumpIrNpuArgs {
    /// Partition the model for this NPU backend instead of compiling it for the CPU:
    /// the passes are normalize and `partition-npu`.
    #[arg(long, value_enum)]
    npu: Option<NpuBackend>,
    /// The SoC the NPU graphs are for (with `--npu`).
    #[arg(long, default_value = "SM8650", requires = "npu", value_parser = Soc::named)]
    soc: Soc,
    /// Tokens per NPU prefill graph call (with `--npu`).
    #[arg(long, default_value_t = 32, requires = "npu", value_parser = clap::value_parser!(i64).range(1..=4096))]
    chunk: i64,
}

impl DumpIrNpuArgs {
    /// The partition pipeline `--npu` asks for, if any.
    pub fn pipeline(&self) -> Option<Pipeline> {
        let Some(NpuBackend::Qnn) = self.npu else {
            return None;
        };
        let partition = PartitionNpu {
            soc: self.soc,
            chunk: self.chunk,
            capability: &QNN_HTP,
        };
        Some(partition_pipeline(partition))
    }
}
