//! The rewrite rules, as data: a name, the family it belongs to, the pattern it matches
//! (egg's s-expressions over [`Node`]: `(op args... {attrs})`, `{}` for an op without
//! attributes) and the function that builds the replacement with the DSL's typed op
//! constructors. Every replacement is guarded: each op it adds goes through the op
//! registry's inference, and it is unioned with the matched e-class only when its struct
//! info is the matched one's. There are no commutativity or associativity rules: every
//! rule replaces a composition of ops with one fused op.

use super::lang::{add_call, placeholder, Facts, Node, SegmentAnalysis, SegmentGraph};
use egg::{Applier, Id, PatternAst, Rewrite, Subst, Symbol};
use oxrelax_dsl::op::{
    activation_group_scales, add, add_rms_norm, attr, dequantize_weight, matmul, pack_weight,
    packed_matmul, packed_matmul_int, packed_matmul_quant, permute_dims, quantize_activations,
    strided_slice, take_quant, InferError, QuantLayout, QuantPanels,
};
use oxrelax_dsl::{Attrs, DType, Expr, SymExpr};

/// A rewrite rule.
#[derive(Debug)]
pub struct Rule {
    /// Its name (in reports).
    pub name: &'static str,
    /// The family it belongs to (`dequantize+matmul`, `transpose+matmul`, ...).
    pub family: &'static str,
    /// The pattern it matches.
    pub pattern: &'static str,
    /// Builds the replacement of a match; `None` when the rule does not apply to it.
    pub apply: fn(&mut Match<'_>) -> Option<Id>,
}

/// The rules splitting a fused projection (Phi-3's `qkv_proj` and `gate_up_proj`, an
/// MLC-style model's QKV) where its output is sliced into parts: each slice of the
/// output becomes a projection by the same slice of the weight (and of the bias), cut at
/// compile time. So each part is its own matmul, the rotary embedding of q and k joins
/// their projections' epilogues (fuse-ops' windowed epilogue) and the gate's SiLU the
/// up projection's, and no fused output, activation slice or rotary kernel remains. They
/// run before weight quantization, so each part is quantized and packed in panels of its
/// own, whatever its bounds. (MLC instead fuses the split and the rotary embedding into
/// one kernel reading the fused output; here that kernel is not needed at all.)
pub const SPLIT_RULES: &[Rule] = &[
    Rule {
        name: "split-projection",
        family: "split+rotary",
        pattern: "(strided_slice (matmul ?x (permute_dims ?w ?t) {}) ?slice)",
        apply: split_projection,
    },
    Rule {
        name: "split-bias",
        family: "split+rotary",
        pattern: "(strided_slice (add ?y ?b {}) ?slice)",
        apply: split_bias,
    },
];

/// The rule fusing the transpose of a dequantized weight into its dequantization (a
/// linear layer reads its weight transposed), which the dequantize rules then fuse into
/// the matmul reading it.
pub const TRANSPOSE_RULES: &[Rule] = &[Rule {
    name: "dequantize-transpose",
    family: "dequantize+transpose",
    pattern: "(permute_dims (dequantize_weight ?q ?s ?table) {})",
    apply: dequantize_transpose,
}];

/// The rules fusing a dequantized weight into the op that reads it, so that no
/// dequantized weight is written to memory: the matmul microkernels dequantize panels as
/// they read them, the row gather dequantizes the rows it takes.
pub const DEQUANTIZE_RULES: &[Rule] = &[
    Rule {
        name: "dequantize-matmul",
        family: "dequantize+matmul",
        pattern: "(matmul ?x (dequantize_weight ?q ?s ?table) {})",
        apply: dequantize_matmul,
    },
    Rule {
        name: "dequantize-matmul-int8",
        family: "dequantize+matmul",
        pattern: "(matmul ?x (dequantize_weight ?q ?s ?table) {})",
        apply: dequantize_matmul_int8,
    },
    Rule {
        name: "dequantize-take",
        family: "dequantize+take",
        pattern: "(take (dequantize_weight ?q ?s ?table) ?ids {axis=0})",
        apply: dequantize_take,
    },
];

/// The rules fusing a float weight's transpose into the packing of its panels.
pub const LAYOUT_RULES: &[Rule] = &[Rule {
    name: "transpose-matmul",
    family: "transpose+matmul",
    pattern: "(matmul ?x (permute_dims ?w {}) {})",
    apply: transpose_matmul,
}];

/// The rule fusing a residual add into the RMS norm reading it: one kernel reads both
/// summands, so the sum is not written. Extraction keeps it only where the sum has no
/// other reader (else the fused kernel would read one tensor more than the norm of the
/// written sum). In the supported decoders every residual sum has one (the last through
/// the slice of the last position), and the add is fused into the epilogue of the
/// projection before it instead.
pub const NORM_RULES: &[Rule] = &[Rule {
    name: "add-rms-norm",
    family: "add+rms_norm",
    pattern: "(rms_norm (add ?a ?b {}) ?weight ?norm)",
    apply: add_rms_norm_rule,
}];

/// The egg rewrites of `rules`.
pub fn rewrites(rules: &'static [Rule]) -> Vec<Rewrite<Node, SegmentAnalysis>> {
    rules
        .iter()
        .map(|rule| {
            let pattern: egg::Pattern<Node> = rule.pattern.parse().expect("rule patterns parse");
            Rewrite::new(rule.name, pattern, Guarded(rule)).expect("rule names are unique")
        })
        .collect()
}

/// A rule's match: the e-graph and the pattern variables' e-classes.
pub struct Match<'a> {
    egraph: &'a mut SegmentGraph,
    subst: &'a Subst,
}

impl Match<'_> {
    /// The e-class bound to pattern variable `name` (`"?x"`).
    fn var(&self, name: &str) -> Id {
        self.subst[name.parse().expect("a pattern variable")]
    }

    /// The facts of pattern variable `name`.
    fn facts(&self, name: &str) -> &Facts {
        &self.egraph[self.var(name)].data
    }

    /// The attributes bound to pattern variable `name`.
    fn attrs(&self, name: &str) -> Option<&Attrs> {
        match self.facts(name) {
            Facts::Attrs(attrs) => Some(attrs),
            _ => None,
        }
    }

    /// The integer attribute `key` of the attributes bound to pattern variable `name`.
    fn int_attr(&self, name: &str, key: &str) -> Option<i64> {
        attr::int(self.attrs(name)?, key)
    }

    /// Whether the `dequantize_weight` attributes bound to pattern variable `name` ask
    /// for the transpose.
    fn transposed(&self, name: &str) -> Option<bool> {
        Some(attr::boolean(self.attrs(name)?, "transpose").unwrap_or(false))
    }

    /// The layout of the quantized panels bound to pattern variable `name`.
    fn quant_layout(&self, name: &str) -> Option<QuantLayout> {
        let tensor = self.facts(name).sinfo()?.as_tensor()?;
        Some(QuantPanels::of(tensor.dtype, tensor.dims()?)?.layout)
    }

    /// Whether e-class `id` holds a `dequantize_weight` call.
    fn dequantized(&self, id: Id) -> bool {
        let op = Symbol::from("dequantize_weight");
        self.egraph[id]
            .nodes
            .iter()
            .any(|n| matches!(n, Node::Op(o, _) if *o == op))
    }

    /// Adds the op call `build` makes of the e-classes `args` (through the DSL's typed
    /// constructor, which infers and checks it); its e-class.
    fn call(
        &mut self,
        args: &[Id],
        build: impl FnOnce(&[Expr]) -> Result<Expr, InferError>,
    ) -> Option<Id> {
        let stand_ins: Option<Vec<Expr>> =
            args.iter().map(|&a| placeholder(self.egraph, a)).collect();
        let call = build(&stand_ins?).ok()?;
        add_call(self.egraph, &call, args)
    }
}

/// The bounds `(begin, end)` of the slice bound to pattern variable `name` when it cuts
/// the last axis of a tensor of rank `rank` with constant bounds and stride 1. (Applied
/// to an axis of the same length, as a weight's rows, the same bounds cut the same part.)
fn last_axis_slice(m: &Match<'_>, name: &str, rank: usize) -> Option<(i64, i64)> {
    let slice = m.attrs(name)?;
    let unit_strides = attr::ints(slice, "strides").is_none_or(|s| s.iter().all(|&v| v == 1));
    let axes = attr::ints(slice, "axes")?;
    let (&[axis], [begin], [end]) = (
        axes,
        attr::shape(slice, "begin")?,
        attr::shape(slice, "end")?,
    ) else {
        return None;
    };
    let last = attr::normalize_axis("strided_slice", "axes", axis, rank).ok()? + 1 == rank;
    (unit_strides && last).then_some((begin.as_const()?, end.as_const()?))
}

/// The rank of pattern variable `name`'s tensor.
fn rank(m: &Match<'_>, name: &str) -> Option<usize> {
    Some(m.facts(name).sinfo()?.as_tensor()?.dims()?.len())
}

/// `x[..., a..b]` on `axis` (`-1`: the last).
fn cut(x: &Expr, axis: i64, (begin, end): (i64, i64)) -> Result<Expr, InferError> {
    let (begin, end) = (vec![SymExpr::int(begin)], vec![SymExpr::int(end)]);
    strided_slice(x, vec![axis], begin, end, None)
}

/// `strided_slice(matmul(x, permute_dims(w)), last axis a..b)` with `w` a 2-D weight:
/// `matmul(x, permute_dims(strided_slice(w, rows a..b)))`.
fn split_projection(m: &mut Match<'_>) -> Option<Id> {
    let transpose = attr::ints(m.attrs("?t")?, "axes");
    if !m.facts("?w").constant() || rank(m, "?w")? != 2 || transpose.is_some_and(|a| a != [1, 0]) {
        return None;
    }
    let bounds = last_axis_slice(m, "?slice", rank(m, "?x")?)?;
    let rows = m.call(&[m.var("?w")], |a| cut(&a[0], 0, bounds))?;
    let transposed = m.call(&[rows], |a| permute_dims(&a[0], None))?;
    m.call(&[m.var("?x"), transposed], |a| matmul(&a[0], &a[1]))
}

/// `strided_slice(add(y, b), last axis a..b)` with `b` a 1-D weight (a bias):
/// `add(strided_slice(y, a..b), strided_slice(b, a..b))` (the op's inference refuses a
/// `b` too short for the bounds).
fn split_bias(m: &mut Match<'_>) -> Option<Id> {
    if !m.facts("?b").constant() || rank(m, "?b")? != 1 {
        return None;
    }
    let bounds = last_axis_slice(m, "?slice", rank(m, "?y")?)?;
    let part = m.call(&[m.var("?y")], |a| cut(&a[0], -1, bounds))?;
    let bias = m.call(&[m.var("?b")], |a| cut(&a[0], 0, bounds))?;
    m.call(&[part, bias], |a| add(&a[0], &a[1]))
}

/// `permute_dims(dequantize_weight(q, s))`: `dequantize_weight(q, s, transpose)`.
fn dequantize_transpose(m: &mut Match<'_>) -> Option<Id> {
    if m.transposed("?table")? {
        return None;
    }
    let rows = m.int_attr("?table", "rows")?;
    let width = m.int_attr("?table", "width")?;
    let args = [m.var("?q"), m.var("?s")];
    m.call(&args, |a| {
        dequantize_weight(&a[0], &a[1], (rows, width), true)
    })
}

/// `matmul(x, dequantize_weight(q, s, transpose))` with panels of the rows layout:
/// `packed_matmul_quant(x, q, s)`.
fn dequantize_matmul(m: &mut Match<'_>) -> Option<Id> {
    if !m.transposed("?table")? || m.quant_layout("?q")? != QuantLayout::Rows {
        return None;
    }
    let features = m.int_attr("?table", "rows")?;
    let args = [m.var("?x"), m.var("?q"), m.var("?s")];
    m.call(&args, |a| {
        packed_matmul_quant(&a[0], &a[1], &a[2], features)
    })
}

/// `matmul(x, dequantize_weight(q, s, transpose))` with panels of the quads layout:
/// `x` quantized to int8 per group of 32, `packed_matmul_int(xq, xs, q, s)`. An
/// activation read by several such matmuls is quantized once (one e-class).
fn dequantize_matmul_int8(m: &mut Match<'_>) -> Option<Id> {
    if !m.transposed("?table")? || m.quant_layout("?q")? != QuantLayout::Quads {
        return None;
    }
    let features = m.int_attr("?table", "rows")?;
    let (x, q, s) = (m.var("?x"), m.var("?q"), m.var("?s"));
    let xs = m.call(&[x], |a| activation_group_scales(&a[0]))?;
    let xq = m.call(&[x, xs], |a| quantize_activations(&a[0], &a[1]))?;
    m.call(&[xq, xs, q, s], |a| {
        packed_matmul_int((&a[0], &a[1]), (&a[2], &a[3]), features)
    })
}

/// `take(dequantize_weight(q, s), ids, axis=0)`: `take_quant(q, s, ids)`.
fn dequantize_take(m: &mut Match<'_>) -> Option<Id> {
    if m.transposed("?table")? {
        return None;
    }
    let rows = m.int_attr("?table", "rows")?;
    let width = m.int_attr("?table", "width")?;
    let args = [m.var("?q"), m.var("?s"), m.var("?ids")];
    m.call(&args, |a| take_quant(&a[0], &a[1], &a[2], (rows, width)))
}

/// `rms_norm(add(a, b), weight)`: `add_rms_norm(a, b, weight)` (same axes and epsilon;
/// `a` and `b` of one shape, which the op's inference checks).
fn add_rms_norm_rule(m: &mut Match<'_>) -> Option<Id> {
    let norm = m.attrs("?norm")?;
    let axes = attr::ints(norm, "axes")?.to_vec();
    let epsilon = attr::float(norm, "epsilon")?;
    let args = [m.var("?a"), m.var("?b"), m.var("?weight")];
    m.call(&args, |a| {
        add_rms_norm((&a[0], &a[1]), &a[2], axes, epsilon)
    })
}

/// `matmul(x, permute_dims(w))` with `w` a static 2-D f32 or f16 weight (not a
/// dequantized one: those are the dequantize rules'): `packed_matmul(x, pack_weight(w))`.
fn transpose_matmul(m: &mut Match<'_>) -> Option<Id> {
    let w = m.var("?w");
    let Facts::Value {
        sinfo,
        constant: true,
    } = m.facts("?w")
    else {
        return None;
    };
    let tensor = sinfo.as_tensor()?;
    let dims: Option<Vec<i64>> = tensor.dims()?.iter().map(|d| d.as_const()).collect();
    let float = matches!(tensor.dtype, DType::F32 | DType::F16);
    let [features, _] = dims?[..] else {
        return None;
    };
    if !float || m.dequantized(w) {
        return None;
    }
    let block = m.egraph.analysis.block;
    let packed = m.call(&[w], |a| pack_weight(&a[0], block))?;
    m.call(&[m.var("?x"), packed], |a| {
        packed_matmul(&a[0], &a[1], features)
    })
}

/// A rule as an egg applier: builds the replacement and unions it with the match when
/// their struct info agree.
struct Guarded(&'static Rule);

impl Applier<Node, SegmentAnalysis> for Guarded {
    fn apply_one(
        &self,
        egraph: &mut SegmentGraph,
        matched: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Node>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let mut m = Match { egraph, subst };
        let Some(replacement) = (self.0.apply)(&mut m) else {
            return Vec::new();
        };
        let agree = match (
            egraph[matched].data.sinfo(),
            egraph[replacement].data.sinfo(),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
        if agree && egraph.union(matched, replacement) {
            vec![replacement]
        } else {
            Vec::new()
        }
    }
}
