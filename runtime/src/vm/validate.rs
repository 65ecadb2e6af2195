//! Load-time checks of an executable, so that running it never indexes out of range.

use super::bytecode::{Instr, Placement};
use super::error::ExecError;
use super::exec::{KernelDecl, VmFunction};
use crate::tensor::BUFFER_ALIGN;

fn invalid(func: &str, reason: String) -> ExecError {
    ExecError::Invalid {
        func: func.to_string(),
        reason,
    }
}

/// Kernel signatures may only read the kernel's own dims.
pub(super) fn kernels(decls: &[KernelDecl]) -> Result<(), ExecError> {
    for decl in decls {
        let dims = decl
            .params
            .iter()
            .flat_map(|p| &p.shape)
            .flat_map(|e| e.dims());
        if let Some(d) = dims.into_iter().find(|&d| d as usize >= decl.dims.len()) {
            let reason = format!("signature reads dim {d} of {}", decl.dims.len());
            return Err(invalid(&format!("kernel {}", decl.name), reason));
        }
    }
    Ok(())
}

/// Registers, dims, slots and kernels referenced by `f` exist; slots fit the arena; the code
/// ends with `Ret`.
pub(super) fn function(
    name: &str,
    f: &VmFunction,
    kernels: &[KernelDecl],
) -> Result<(), ExecError> {
    let fail = |reason: String| Err(invalid(name, reason));
    if f.params.len() > f.num_regs as usize {
        return fail(format!(
            "{} parameters but {} registers",
            f.params.len(),
            f.num_regs
        ));
    }
    // Each instruction writes at most one register: more than the parameters and the
    // instructions can fill is a broken (or hostile) file, not a reason to allocate.
    let fillable = f.params.len() + f.instrs.len();
    if f.num_regs as usize > fillable {
        return fail(format!(
            "{} registers, but its {} parameters and {} instructions fill at most {fillable}",
            f.num_regs,
            f.params.len(),
            f.instrs.len()
        ));
    }
    if let Some(d) = f.dims.iter().find(|d| d.upper_bound.is_some_and(|b| b < 0)) {
        return fail(format!("dim `{}` has a negative upper bound", d.name));
    }
    for (i, slot) in f.slots.iter().enumerate() {
        let fits = slot
            .offset
            .checked_add(slot.size)
            .is_some_and(|end| end <= f.arena_size);
        if !fits || slot.offset % BUFFER_ALIGN as u64 != 0 {
            let (offset, size, arena) = (slot.offset, slot.size, f.arena_size);
            return fail(format!(
                "slot {i} (offset {offset}, {size} bytes) must start at a multiple of \
                 {BUFFER_ALIGN} and fit the {arena}-byte arena"
            ));
        }
    }
    if !matches!(f.instrs.last(), Some(Instr::Ret { .. })) {
        return fail("code must end with `ret`".into());
    }
    for (i, instr) in f.instrs.iter().enumerate() {
        instruction(f, instr, kernels)
            .or_else(|reason| fail(format!("instruction {i}: {reason}")))?;
    }
    Ok(())
}

/// Checks one instruction; the error is the reason.
fn instruction(f: &VmFunction, instr: &Instr, kernels: &[KernelDecl]) -> Result<(), String> {
    if let Some(r) = instr.regs().into_iter().find(|&r| r >= f.num_regs) {
        return Err(format!(
            "register %{r} out of range ({} registers)",
            f.num_regs
        ));
    }
    if let Some(d) = instr
        .dim_regs()
        .into_iter()
        .find(|&d| d as usize >= f.dims.len())
    {
        return Err(format!(
            "dim register {d} out of range ({} dims)",
            f.dims.len()
        ));
    }
    match instr {
        Instr::AllocTensor {
            place: Placement::Slot(s),
            ..
        } if *s as usize >= f.slots.len() => {
            Err(format!("slot {s} out of range ({} slots)", f.slots.len()))
        }
        Instr::CallKernel { kernel, args, dims } => {
            let decl = kernels.get(*kernel as usize).ok_or_else(|| {
                format!("kernel {kernel} out of range ({} kernels)", kernels.len())
            })?;
            if args.len() != decl.params.len() || dims.len() != decl.dims.len() {
                return Err(format!(
                    "kernel `{}` takes {} buffers and {} dims, given {} and {}",
                    decl.name,
                    decl.params.len(),
                    decl.dims.len(),
                    args.len(),
                    dims.len()
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
