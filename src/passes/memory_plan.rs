//! `StaticPlanBlockMemory`: gives every `call_tir` output of a graph function a byte
//! offset in one per-function arena, except the outputs of calls whose result the
//! function returns (those are allocated fresh, since they outlive the call). Sizes are the upper bounds of the outputs' symbolic
//! shapes; outputs whose lifetimes (definition to last use, through aliases such as tuple
//! projections) do not overlap share memory. The offsets are recorded on each call as the
//! `arena_offsets` attribute (one per output); the arena's size is the largest
//! `offset + size` ([`arena_size`]).

use super::{Pass, PassError};
use oxrelax_dsl::ir::{BindingValue, Callee, Function};
use oxrelax_dsl::{AttrValue, Expr, IRModule, StructInfo, SymExpr};
use std::collections::HashMap;

/// The call attribute holding the arena offset (bytes) of each output.
pub const ARENA_OFFSETS: &str = "arena_offsets";

/// Offsets and sizes are multiples of this many bytes.
pub const ARENA_ALIGN: i64 = 64;

/// Plans the memory of every graph function's intermediate tensors.
pub struct StaticPlanBlockMemory;

impl Pass for StaticPlanBlockMemory {
    fn name(&self) -> &'static str {
        "static-plan-block-memory"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        for (name, function) in module.functions.iter_mut() {
            plan_function(name, function)?;
        }
        Ok(module)
    }
}

/// One planned output tensor.
#[derive(Debug, Clone)]
struct Block {
    /// Bytes reserved (aligned).
    size: i64,
    /// Index of the defining binding.
    def: usize,
    /// Index of the last binding that reads it (`usize::MAX` when returned).
    last_use: usize,
    offset: i64,
}

/// The output tensors of a call's result struct info.
fn output_tensors(sinfo: &StructInfo) -> Vec<&StructInfo> {
    match sinfo {
        StructInfo::Tuple(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// The bytes the plan reserves for a tensor: its size at the dims' upper bounds, rounded
/// up to [`ARENA_ALIGN`]; `None` when the shape is unknown or unbounded.
pub fn planned_bytes(sinfo: &StructInfo) -> Option<i64> {
    let tensor = sinfo.as_tensor()?;
    let elements = SymExpr::product(tensor.dims()?).max_value()?;
    let bytes = (elements * i64::from(tensor.dtype.bits()) + 7) / 8;
    Some((bytes.max(1) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)
}

fn tensor_bytes(function: &str, var: &str, sinfo: &StructInfo) -> Result<i64, PassError> {
    planned_bytes(sinfo).ok_or_else(|| PassError::Unplannable {
        function: function.to_string(),
        var: var.to_string(),
        sinfo: sinfo.to_string(),
    })
}

fn plan_function(name: &str, function: &mut Function) -> Result<(), PassError> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut owners: Vec<(usize, usize)> = Vec::new(); // (binding, output) per block
    let mut refs: HashMap<String, Vec<usize>> = HashMap::new();
    let bindings: Vec<_> = function.bindings().cloned().collect();
    for (index, binding) in bindings.iter().enumerate() {
        let mut used: Vec<usize> = Vec::new();
        binding
            .value
            .expr()
            .for_each_var(&mut |v| used.extend(refs.get(&v.name).into_iter().flatten().copied()));
        for &block in &used {
            blocks[block].last_use = blocks[block].last_use.max(index);
        }
        let defines = match &binding.value {
            BindingValue::Expr(Expr::Call(call)) if matches!(call.callee, Callee::Tir(_)) => {
                let mut ids = Vec::new();
                for (output, sinfo) in output_tensors(&call.sinfo).into_iter().enumerate() {
                    ids.push(blocks.len());
                    owners.push((index, output));
                    blocks.push(Block {
                        size: tensor_bytes(name, &binding.var.name, sinfo)?,
                        def: index,
                        last_use: index,
                        offset: 0,
                    });
                }
                ids
            }
            // Anything else may hand back (a view of) what it reads.
            _ => used,
        };
        refs.insert(binding.var.name.clone(), defines);
    }
    function.ret.for_each_var(&mut |v| {
        for &block in refs.get(&v.name).into_iter().flatten() {
            blocks[block].last_use = usize::MAX;
        }
    });
    // A call whose output is returned allocates its outputs fresh: they outlive the call.
    let escaping: std::collections::HashSet<usize> = blocks
        .iter()
        .zip(&owners)
        .filter(|(block, _)| block.last_use == usize::MAX)
        .map(|(_, &(binding, _))| binding)
        .collect();
    let (mut planned, planned_owners): (Vec<Block>, Vec<(usize, usize)>) = blocks
        .into_iter()
        .zip(owners)
        .filter(|(_, (binding, _))| !escaping.contains(binding))
        .unzip();
    assign_offsets(&mut planned);
    write_offsets(function, &planned, &planned_owners);
    Ok(())
}

/// Greedy placement, largest first: each block goes to the lowest offset that does not
/// overlap a placed block whose lifetime overlaps its own.
fn assign_offsets(blocks: &mut [Block]) {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(blocks[i].size), i));
    let mut placed: Vec<usize> = Vec::new();
    for i in order {
        let live_together = |j: &&usize| {
            blocks[**j].def <= blocks[i].last_use && blocks[i].def <= blocks[**j].last_use
        };
        let mut busy: Vec<(i64, i64)> = placed
            .iter()
            .filter(live_together)
            .map(|&j| (blocks[j].offset, blocks[j].offset + blocks[j].size))
            .collect();
        busy.sort();
        let mut offset = 0;
        for (start, end) in busy {
            if offset + blocks[i].size <= start {
                break;
            }
            offset = offset.max(end);
        }
        blocks[i].offset = offset;
        placed.push(i);
    }
}

fn write_offsets(function: &mut Function, blocks: &[Block], owners: &[(usize, usize)]) {
    let mut offsets: HashMap<usize, Vec<i64>> = HashMap::new();
    for (block, &(binding, _)) in blocks.iter().zip(owners) {
        offsets.entry(binding).or_default().push(block.offset);
    }
    let all = function.blocks.iter_mut().flat_map(|b| &mut b.bindings);
    for (index, binding) in all.enumerate() {
        if let (Some(list), BindingValue::Expr(Expr::Call(call))) =
            (offsets.remove(&index), &mut binding.value)
        {
            call.attrs
                .insert(ARENA_OFFSETS.to_string(), AttrValue::Ints(list));
        }
    }
}

/// The arena size (bytes) a planned function needs: the largest `offset + size` of its
/// planned outputs.
pub fn arena_size(function: &Function) -> i64 {
    let mut size = 0;
    for binding in function.bindings() {
        if let BindingValue::Expr(Expr::Call(call)) = &binding.value {
            if let Some(AttrValue::Ints(offsets)) = call.attrs.get(ARENA_OFFSETS) {
                for (offset, sinfo) in offsets.iter().zip(output_tensors(&call.sinfo)) {
                    let bytes = planned_bytes(sinfo).unwrap_or(0);
                    size = size.max(offset + bytes);
                }
            }
        }
    }
    size
}
