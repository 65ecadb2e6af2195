//! [`Artifact::open`]: an artifact folder in, a VM with its kernels and weights out.

use super::error::ArtifactError;
use super::manifest::{Manifest, NpuRecord, MANIFEST_FILE, MODULE_FILE, PARAMS_FILE, VM_FILE};
use crate::abi::SharedKernelLibrary;
use crate::chat::{eos_ids_of, eos_token_ids, Tokenizer, GENERATION_CONFIG};
use crate::engine::{Engine, EngineConfig};
use crate::microkernel::MicrokernelSet;
use crate::packed::Registry;
use crate::pool::ThreadPool;
use crate::value::Value;
use crate::vm::{Executable, VirtualMachine};
use crate::weights::{detach_from_file, WeightError, WeightStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether `dir` is an artifact folder (it holds a manifest).
pub fn is_artifact(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
}

/// Reads the manifest of the artifact in `dir` and checks it: the format version, the
/// target triple and CPU features (against this host), and the path and hash of every
/// file.
pub fn verify_artifact(dir: &Path) -> Result<Manifest, ArtifactError> {
    let manifest = Manifest::read(dir)?;
    manifest.check_compatible(dir)?;
    let library = manifest.target.library.as_str();
    manifest.check_files(dir, &[MODULE_FILE, VM_FILE, PARAMS_FILE, library])?;
    if let Some(npu) = &manifest.npu {
        let files: Vec<&str> = npu.files.iter().map(String::as_str).collect();
        manifest.check_files(dir, &files)?;
    }
    Ok(manifest)
}

/// What runs an artifact's NPU graphs (its manifest's [`NpuRecord`], the files of its
/// `npu/` folder) beside the CPU part: the NPU's run side implements it (behind the `npu`
/// feature), the loader knows only this trait.
pub trait GraphBackend {
    /// Registers into `builtins` each graph `record` lists in the artifact folder `dir`,
    /// as the builtin the compiled CPU part calls.
    fn register(
        &self,
        dir: &Path,
        record: &NpuRecord,
        builtins: &mut Registry,
    ) -> Result<(), ArtifactError>;
}

/// The runtime's builtins, and the artifact's NPU graphs run by `backend` (both or
/// neither).
fn graph_builtins(
    dir: &Path,
    manifest: &Manifest,
    backend: Option<&dyn GraphBackend>,
) -> Result<Registry, ArtifactError> {
    let mut builtins = Registry::with_builtins();
    match (&manifest.npu, backend) {
        (None, None) => {}
        (None, Some(_)) => {
            return Err(ArtifactError::NoNpu {
                path: dir.to_path_buf(),
            })
        }
        (Some(record), None) => {
            return Err(ArtifactError::NeedsNpu {
                path: dir.to_path_buf(),
                soc: record.soc.clone(),
                backend: record.backend.clone(),
            })
        }
        (Some(record), Some(backend)) => backend.register(dir, record, &mut builtins)?,
    }
    Ok(builtins)
}

/// The pool the CPU part runs on while the NPU graphs run on the host reference backend
/// (a host core of their own): one thread fewer than `threads`, when there are two or more.
fn cpu_pool_beside_host_npu(threads: usize) -> Option<Arc<ThreadPool>> {
    (threads > 1).then(|| ThreadPool::new(threads - 1).ok().map(Arc::new))?
}

/// A checked artifact loaded into a VM with its kernel library and weights.
pub struct Artifact {
    dir: PathBuf,
    manifest: Manifest,
    vm: VirtualMachine,
    weights: Vec<Value>,
}

/// An artifact's engine (VM, weights, one KV cache) and its tokenizer, when it has one.
pub struct LoadedEngine {
    /// The engine.
    pub engine: Engine,
    /// The tokenizer (`tokenizer.json` and `tokenizer_config.json`), if the artifact has
    /// one.
    pub tokenizer: Option<Tokenizer>,
}

impl Artifact {
    /// Opens the artifact in `dir`: [`verify_artifact`], then loads its executable,
    /// checks that it exports what the manifest records, opens its kernel library
    /// (checking every kernel's recorded signature against the bytecode's calls), picks
    /// the microkernels its CPU features allow, and maps its weights, checked against the
    /// names, shapes and dtypes the manifest records. Each weight is then copied out of
    /// the mapping ([`detach_from_file`]: large ones into huge pages where the OS has
    /// them), so the open artifact no longer depends on the file, unless
    /// [`crate::tensor::HUGE_PAGES_ENV`] turns huge pages off.
    pub fn open(dir: &Path) -> Result<Artifact, ArtifactError> {
        Artifact::open_with(dir, None)
    }

    /// [`Artifact::open`] with its NPU graphs (if it has them, which then is required)
    /// run by `backend`.
    pub fn open_with(
        dir: &Path,
        backend: Option<&dyn GraphBackend>,
    ) -> Result<Artifact, ArtifactError> {
        let manifest = verify_artifact(dir)?;
        let builtins = graph_builtins(dir, &manifest, backend)?;
        let vm_path = dir.join(VM_FILE);
        let executable =
            Executable::load(&vm_path).map_err(|source| ArtifactError::Executable {
                path: vm_path.clone(),
                source,
            })?;
        manifest.check_functions(dir, &executable)?;
        let library_path = dir.join(&manifest.target.library);
        // SAFETY: the library's hash is the one the compiler recorded (`verify_artifact`),
        // so it is the kernel library the compiler wrote.
        let library = unsafe { SharedKernelLibrary::open(&library_path, &executable.kernels) }?;
        let vm =
            VirtualMachine::new(executable, Arc::new(library), &builtins).map_err(|source| {
                ArtifactError::Vm {
                    path: vm_path,
                    source: Box::new(source),
                }
            })?;
        let features: Vec<&str> = manifest
            .target
            .cpu_features
            .iter()
            .map(String::as_str)
            .collect();
        let mut vm = vm.with_microkernels(MicrokernelSet::for_features(&features));
        vm.retire(super::WEIGHT_TRANSFORM);
        let params = dir.join(PARAMS_FILE);
        let store = WeightStore::open(&params)?;
        let weights = store
            .load_expected(&manifest.weights)?
            .into_iter()
            .zip(&manifest.weights)
            .map(|(tensor, expected)| {
                detach_from_file(tensor).map_err(|source| WeightError::Tensor {
                    tensor: expected.name.clone(),
                    file: params.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Artifact {
            dir: dir.to_path_buf(),
            manifest,
            vm,
            weights: weights.into_iter().map(Value::Tensor).collect(),
        })
    }

    /// The folder it was opened from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its manifest (model config, exported signatures, target, ...).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Its bytecode (each function's arena sized by its memory plan).
    pub fn executable(&self) -> &Executable {
        self.vm.executable()
    }

    /// The VM and the weights its weighted functions take after their inputs.
    pub fn into_parts(self) -> (VirtualMachine, Vec<Value>) {
        (self.vm, self.weights)
    }

    /// The tokenizer, if the artifact has one.
    pub fn tokenizer(&self) -> Result<Option<Tokenizer>, ArtifactError> {
        let listed = |name: &str| self.manifest.tokenizer_files.iter().any(|f| f == name);
        Ok(match listed("tokenizer.json") {
            true => Some(Tokenizer::from_listed(&self.dir, listed)?),
            false => None,
        })
    }

    /// The engine's sizes, from the manifest, and the ids that end generation: those of
    /// `generation_config.json` (when listed), the recorded model config and `tokenizer`.
    pub fn engine_config(
        &self,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<EngineConfig, ArtifactError> {
        let generation = Some(GENERATION_CONFIG)
            .filter(|name| self.manifest.files.contains_key(*name))
            .map(|name| self.dir.join(name));
        let mut eos = eos_ids_of(generation, tokenizer)?;
        eos.extend(eos_token_ids(&self.manifest.model_config));
        eos.sort_unstable();
        eos.dedup();
        Ok(EngineConfig {
            context_window: self.size("context_window", self.manifest.context_window)?,
            prefill_chunk: self.size("prefill_chunk", self.manifest.prefill_chunk)?,
            vocab_size: self.vocab_size()?,
            eos_ids: eos,
        })
    }

    /// An engine over the artifact whose kernels run on `pool`, and its tokenizer. An
    /// artifact with NPU graphs prefills two chunks at a time (the CPU/NPU pipeline,
    /// [`Engine::enable_pipeline`]).
    pub fn into_engine(self, pool: Arc<ThreadPool>) -> Result<LoadedEngine, ArtifactError> {
        let tokenizer = self.tokenizer()?;
        let config = self.engine_config(tokenizer.as_ref())?;
        let pipelined = self.manifest.npu.is_some();
        let (vm, weights) = self.into_parts();
        let threads = pool.threads();
        let mut engine =
            Engine::new(vm.with_thread_pool(pool), weights, config).map_err(Box::new)?;
        if pipelined {
            engine
                .enable_pipeline(cpu_pool_beside_host_npu(threads))
                .map_err(Box::new)?;
        }
        Ok(LoadedEngine { engine, tokenizer })
    }

    /// `model_config.vocab_size`, positive.
    fn vocab_size(&self) -> Result<usize, ArtifactError> {
        let value = &self.manifest.model_config["vocab_size"];
        let vocab = value.as_i64().ok_or_else(|| ArtifactError::Config {
            path: self.dir.join(MANIFEST_FILE),
            key: "model_config.vocab_size",
            reason: format!("expected a positive integer, found {value}"),
        })?;
        self.size("vocab_size", vocab)
    }

    /// `value` (the manifest's `key`) as a positive size.
    fn size(&self, key: &'static str, value: i64) -> Result<usize, ArtifactError> {
        usize::try_from(value)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| ArtifactError::Config {
                path: self.dir.join(MANIFEST_FILE),
                key,
                reason: format!("expected a positive integer, found {value}"),
            })
    }
}
