//! The executable: kernel declarations and graph functions in VM bytecode, with their
//! memory plans; serialized as JSON (`vm.json`).

use super::bytecode::Instr;
use super::error::ExecError;
use super::shape_expr::ShapeExpr;
use super::validate;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The format version this runtime reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// The expected dtype and shape of one kernel buffer parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSig {
    /// Its dtype.
    pub dtype: DType,
    /// Its extents, over the kernel's own dims (`Dim(i)` is the kernel's dim `i`).
    pub shape: Vec<ShapeExpr>,
}

/// A kernel the executable calls: its name in the kernel library and its signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDecl {
    /// The name looked up in the kernel library.
    pub name: String,
    /// Names of its symbolic dims, in the order the kernel receives their values.
    pub dims: Vec<String>,
    /// Its buffer parameters, in the order it receives their pointers.
    pub params: Vec<BufferSig>,
}

/// A dim register of a function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimDecl {
    /// Its name (e.g. `n`).
    pub name: String,
    /// The largest value it may take (the memory plan is sized for it), if bounded.
    pub upper_bound: Option<i64>,
}

/// A region of a function's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// Byte offset in the arena (a multiple of [`crate::tensor::BUFFER_ALIGN`]).
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A graph function in bytecode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmFunction {
    /// Parameter names; parameter `i` arrives in register `i`.
    pub params: Vec<String>,
    /// Dim registers.
    pub dims: Vec<DimDecl>,
    /// Value registers used (parameters included).
    pub num_regs: u32,
    /// Straight-line code ending with `Ret`.
    pub instrs: Vec<Instr>,
    /// Bytes of the arena (allocated once per VM).
    pub arena_size: u64,
    /// The memory plan: slots of the arena.
    pub slots: Vec<Slot>,
}

impl VmFunction {
    /// The names of the dim registers.
    pub fn dim_names(&self) -> Vec<&str> {
        self.dims.iter().map(|d| d.name.as_str()).collect()
    }
}

/// Kernel declarations and functions by name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Executable {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Kernels, referenced by index from `CallKernel`.
    pub kernels: Vec<KernelDecl>,
    /// Functions by name.
    pub functions: BTreeMap<String, VmFunction>,
}

impl Executable {
    /// An executable of the current format version.
    pub fn new(kernels: Vec<KernelDecl>, functions: BTreeMap<String, VmFunction>) -> Executable {
        Executable {
            format_version: FORMAT_VERSION,
            kernels,
            functions,
        }
    }

    /// Checks the format version and that every index, register and slot is in range.
    pub fn validate(&self) -> Result<(), ExecError> {
        if self.format_version != FORMAT_VERSION {
            return Err(ExecError::Version {
                found: self.format_version,
                expected: FORMAT_VERSION,
            });
        }
        validate::kernels(&self.kernels)?;
        self.functions
            .iter()
            .try_for_each(|(name, f)| validate::function(name, f, &self.kernels))
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, ExecError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Parses and validates JSON.
    pub fn from_json(json: &str) -> Result<Executable, ExecError> {
        let exec: Executable = serde_json::from_str(json)?;
        exec.validate()?;
        Ok(exec)
    }

    /// Writes JSON to `path`.
    pub fn save(&self, path: &Path) -> Result<(), ExecError> {
        std::fs::write(path, self.to_json()?).map_err(|source| ExecError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads and validates JSON from `path`.
    pub fn load(path: &Path) -> Result<Executable, ExecError> {
        let json = crate::files::read_text(path).map_err(|source| ExecError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Executable::from_json(&json)
    }
}
