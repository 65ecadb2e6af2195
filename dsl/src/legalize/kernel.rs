//! What a legalizer builds (tensor expressions plus the call's arguments) and the
//! helpers the op families share: compute dtypes and broadcast indexing.

use crate::ir::Expr as IrExpr;
use crate::te::{Expr, Tensor};
use crate::{AttrValue, DType, SymExpr};

/// How fusion may treat a legalized function (its `op_pattern` attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpPattern {
    /// Each output element depends on the same element of each input.
    Elemwise,
    /// Like elemwise, with inputs broadcast to the output shape.
    Broadcast,
    /// Each output element reads some input elements (data movement).
    Injective,
    /// Reduces over some axes.
    Reduction,
    /// A complex op (matmul) that an element-wise epilogue may fuse into.
    OutEwiseFusible,
    /// Not fusible.
    Opaque,
}

impl OpPattern {
    /// Every pattern.
    pub const ALL: [OpPattern; 6] = [
        OpPattern::Elemwise,
        OpPattern::Broadcast,
        OpPattern::Injective,
        OpPattern::Reduction,
        OpPattern::OutEwiseFusible,
        OpPattern::Opaque,
    ];

    /// The pattern with attribute value `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The attribute value (`"elemwise"`, `"broadcast"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OpPattern::Elemwise => "elemwise",
            OpPattern::Broadcast => "broadcast",
            OpPattern::Injective => "injective",
            OpPattern::Reduction => "reduction",
            OpPattern::OutEwiseFusible => "out_ewise_fusible",
            OpPattern::Opaque => "opaque",
        }
    }
}

/// A legalized op before lowering.
pub(super) struct Kernel {
    /// Placeholders, in parameter order.
    pub(super) inputs: Vec<Tensor>,
    /// The `call_tir` arguments matching `inputs`.
    pub(super) args: Vec<IrExpr>,
    /// The computed outputs.
    pub(super) outputs: Vec<Tensor>,
    /// The fusion pattern.
    pub(super) pattern: OpPattern,
    /// Attributes of the op the function keeps (for its schedule rule).
    pub(super) attrs: Vec<(&'static str, AttrValue)>,
    /// Leading output dims every stage runs inside (see [`crate::te::lower_nested`]); 0
    /// for a loop nest per stage.
    pub(super) shared_loops: usize,
}

impl Kernel {
    /// A kernel with one output.
    pub(super) fn new(
        inputs: Vec<Tensor>,
        args: Vec<IrExpr>,
        output: Tensor,
        pattern: OpPattern,
    ) -> Self {
        Kernel {
            inputs,
            args,
            outputs: vec![output],
            pattern,
            attrs: Vec::new(),
            shared_loops: 0,
        }
    }

    /// The kernel, its stages all inside one loop nest over the output's first `rank` dims
    /// (stages computing per output element need no whole-tensor intermediates).
    pub(super) fn sharing_outer_loops(mut self, rank: usize) -> Self {
        self.shared_loops = rank;
        self
    }

    /// The kernel, keeping `attrs` on the legalized function.
    pub(super) fn with_attrs(mut self, attrs: &[(&'static str, AttrValue)]) -> Self {
        self.attrs.extend_from_slice(attrs);
        self
    }
}

/// The type arithmetic happens in: `f32` for the 16-bit floats, else the dtype itself.
pub(super) fn compute_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `tensor[indices]` converted to its compute dtype.
pub(super) fn load(tensor: &Tensor, indices: &[Expr]) -> Expr {
    tensor.at(indices).cast(compute_dtype(tensor.dtype()))
}

/// The indices reading a tensor of `shape` broadcast (numpy-style, aligned to the right)
/// to an output indexed by `out`: dims of extent 1 read index 0. `shape` must not be
/// longer than `out`.
pub(super) fn broadcast_indices(shape: &[SymExpr], out: &[Expr]) -> Vec<Expr> {
    let skip = out.len().saturating_sub(shape.len());
    shape
        .iter()
        .zip(&out[skip..])
        .map(|(dim, index)| {
            if dim.as_const() == Some(1) {
                Expr::int(0)
            } else {
                index.clone()
            }
        })
        .collect()
}

/// The number of elements of `shape`, as an `i64` expression.
pub(super) fn size_of(shape: &[SymExpr]) -> Expr {
    Expr::from(SymExpr::product(shape))
}
