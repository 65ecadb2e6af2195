//! An artifact's kernels, compiled ahead of time: every primitive function of the
//! compiled module into one object file for the target triple (Cranelift, position
//! independent), linked into a shared library by the target's linker ([`LINKERS`]), and
//! opened by the runtime at load (no compiler involved).

use super::error::ArtifactError;
use oxrelax_codegen::{compile_object, isa};
use oxrelax_dsl::{IRModule, Target};
use oxrelax_runtime::abi::SIGNATURES_SYMBOL;
use oxrelax_runtime::vm::KernelDecl;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The features every target of an architecture has, recorded in every artifact for it
/// (so loading checks them and the runtime picks their microkernels): x86-64 code assumes
/// x86-64-v2 (SSE4.1); every aarch64 CPU has NEON.
const BASELINE_FEATURES: &[(&str, &[&str])] = &[("x86_64", &["sse4.1"]), ("aarch64", &["neon"])];

/// How to link an object file into a shared library for a family of targets.
struct Linker {
    /// Whether a triple belongs to the family.
    matches: fn(&str) -> bool,
    /// The library's file name in the artifact.
    library: &'static str,
    /// The linker programs tried in order when no `--linker` is given (the first that
    /// exists runs).
    programs: &'static [&'static str],
    /// Arguments before `-o LIBRARY OBJECT`.
    args: &'static [&'static str],
}

/// The linkers, per target family, first match wins (the host's C compiler for the host).
const LINKERS: &[Linker] = &[
    Linker {
        matches: |t| t == Target::host().triple && t.ends_with("-linux-gnu"),
        library: "kernels.so",
        programs: &["cc"],
        args: &["-shared", "-lm"],
    },
    Linker {
        matches: |t| t == Target::host().triple && t.contains("-apple-"),
        library: "kernels.dylib",
        programs: &["cc"],
        args: &["-shared", "-undefined", "dynamic_lookup"],
    },
    Linker {
        matches: |t| t == "aarch64-unknown-linux-gnu",
        library: "kernels.so",
        programs: &["aarch64-linux-gnu-gcc"],
        args: &["-shared", "-lm"],
    },
    Linker {
        matches: |t| t.ends_with("-linux-android"),
        library: "kernels.so",
        programs: &["ld.lld", "ld.lld-14"],
        args: &["-shared"],
    },
    Linker {
        matches: |t| t.starts_with("aarch64-apple-"),
        library: "kernels.dylib",
        programs: &["ld64.lld", "ld64.lld-14"],
        args: &[
            "-dylib",
            "-arch",
            "arm64",
            "-platform_version",
            "macos",
            "11.0",
            "11.0",
            "-undefined",
            "dynamic_lookup",
        ],
    },
    Linker {
        matches: |t| t.starts_with("x86_64-apple-"),
        library: "kernels.dylib",
        programs: &["ld64.lld", "ld64.lld-14"],
        args: &[
            "-dylib",
            "-arch",
            "x86_64",
            "-platform_version",
            "macos",
            "11.0",
            "11.0",
            "-undefined",
            "dynamic_lookup",
        ],
    },
];

/// The kernels' target: what the code may use, and how to link it.
#[derive(Debug, Clone)]
pub struct KernelTarget {
    /// The triple and CPU features the kernels and schedules are compiled for.
    pub target: Target,
    /// The linker to run instead of the target family's default.
    pub linker: Option<String>,
}

impl KernelTarget {
    /// The host, with every feature it has, linked by `cc`.
    pub fn host() -> KernelTarget {
        KernelTarget {
            target: Target::host(),
            linker: None,
        }
    }

    /// The target of `--target TRIPLE --target-features LIST --linker PROGRAM`: the host
    /// and its features by default; a named triple gets exactly the listed features
    /// (comma-separated, `+` prefixes allowed) and its architecture's
    /// baseline features (`BASELINE_FEATURES`).
    pub fn parse(
        triple: Option<&str>,
        features: Option<&str>,
        linker: Option<String>,
    ) -> Result<KernelTarget, String> {
        let host = Target::host();
        let triple = triple.unwrap_or(&host.triple);
        let arch = triple.split('-').next().unwrap_or("");
        let baseline = BASELINE_FEATURES
            .iter()
            .find(|(a, _)| *a == arch)
            .map_or(&[][..], |(_, features)| *features);
        let target = match features {
            None if triple == host.triple => host.clone(),
            None => Target::named(triple, baseline)?,
            Some(list) => {
                let names: Vec<&str> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .chain(baseline.iter().copied())
                    .collect();
                Target::named(triple, &names)?
            }
        };
        if !LINKERS.iter().any(|l| (l.matches)(triple)) {
            return Err(format!("no linker is known for target `{triple}`"));
        }
        Ok(KernelTarget { target, linker })
    }

    fn linker(&self, manifest: &Path) -> Result<&'static Linker, ArtifactError> {
        LINKERS
            .iter()
            .find(|l| (l.matches)(&self.target.triple))
            .ok_or_else(|| ArtifactError::Link {
                path: manifest.to_path_buf(),
                reason: format!("no linker is known for target `{}`", self.target.triple),
            })
    }
}

/// Compiles the kernels of `module` for `target` into `out` with the signatures the
/// executable calls them with (`kernels`, recorded in the library's
/// [`SIGNATURES_SYMBOL`] table), and links them; returns the library's file name.
pub fn write_kernels(
    out: &Path,
    module: &IRModule,
    kernels: &[KernelDecl],
    target: &KernelTarget,
) -> Result<String, ArtifactError> {
    let linker = target.linker(out)?;
    let object_path = out.join("kernels.o");
    let codegen_failed = |e: oxrelax_codegen::CodegenError| ArtifactError::Link {
        path: object_path.clone(),
        reason: e.to_string(),
    };
    let isa = if target.target == Target::host() {
        isa::host_isa(true)
    } else {
        let features: Vec<String> = target.target.features.iter().cloned().collect();
        isa::target_isa(&target.target.triple, &features)
    }
    .map_err(codegen_failed)?;
    let signatures = serde_json::to_vec(kernels).map_err(|e| ArtifactError::Link {
        path: object_path.clone(),
        reason: format!("kernel signatures: {e}"),
    })?;
    let tables = [(SIGNATURES_SYMBOL, signatures.as_slice())];
    let object = compile_object(&module.prim_funcs, isa, &tables).map_err(codegen_failed)?;
    std::fs::write(&object_path, object).map_err(|source| ArtifactError::Io {
        path: object_path.clone(),
        source,
    })?;
    let library = out.join(linker.library);
    let linked = link(linker, target.linker.as_deref(), &object_path, &library);
    let _ = std::fs::remove_file(&object_path);
    linked?;
    Ok(linker.library.to_string())
}

/// Runs the linker: `PROGRAM ARGS... -o library object`, with `program` or else the first
/// of the family's programs that exists.
fn link(
    linker: &Linker,
    program: Option<&str>,
    object: &Path,
    library: &PathBuf,
) -> Result<(), ArtifactError> {
    let failed = |reason: String| ArtifactError::Link {
        path: library.clone(),
        reason,
    };
    let candidates = program.map_or(linker.programs.to_vec(), |p| vec![p]);
    for program in &candidates {
        let run = Command::new(program)
            .args(linker.args)
            .arg("-o")
            .arg(library)
            .arg(object)
            .output();
        let output = match run {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(format!("cannot run the linker `{program}`: {e}"))),
            Ok(output) => output,
        };
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(failed(format!(
            "`{program}` failed ({}): {}",
            output.status,
            stderr.trim()
        )));
    }
    Err(failed(format!(
        "no linker found (tried {}; give one with --linker)",
        candidates.join(", ")
    )))
}
