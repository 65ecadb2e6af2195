//! The rewrite phase's e-graph: its language (leaves and op calls) and the analysis that
//! gives every e-class the struct info the op registry infers for it.

use egg::{define_language, Analysis, DidMerge, EGraph, Id, Symbol};
use oxrelax_dsl::ir::{Call, Callee};
use oxrelax_dsl::{Attrs, Expr, StructInfo, Var};
use std::collections::HashMap;

define_language! {
    /// An e-node: a leaf (`in<j>`, the segment's input `j`; or an attributes leaf
    /// `{key=value,...}`), or a call of a registered op whose last child is the leaf of
    /// its attributes (`{}` when it has none), so rules match attributes exactly.
    pub enum Node {
        Leaf(Symbol),
        Op(Symbol, Vec<Id>),
    }
}

/// The e-graph of one segment.
pub type SegmentGraph = EGraph<Node, SegmentAnalysis>;

/// What is known of an e-class.
#[derive(Debug, Clone, PartialEq)]
pub enum Facts {
    /// A value: its struct info, and whether it depends on weights only (a weight
    /// transform, computed once at compile time by `LiftTransformParams`).
    Value {
        /// The inferred struct info.
        sinfo: StructInfo,
        /// Whether it is computed from weights only.
        constant: bool,
    },
    /// An attributes leaf.
    Attrs(Attrs),
    /// An op call the registry rejects (rules never union one with a value).
    Invalid,
}

impl Facts {
    /// The struct info of a value.
    pub fn sinfo(&self) -> Option<&StructInfo> {
        match self {
            Facts::Value { sinfo, .. } => Some(sinfo),
            _ => None,
        }
    }

    /// Whether this is a weight-only value.
    pub fn constant(&self) -> bool {
        matches!(self, Facts::Value { constant: true, .. })
    }
}

/// A segment's input: a variable bound outside it or a literal argument.
#[derive(Debug, Clone)]
pub struct Input {
    /// The expression (a variable or a literal).
    pub expr: Expr,
    /// Whether it is a weight parameter or a literal (a compile-time value).
    pub constant: bool,
}

/// The analysis: the inputs behind the `in<j>` leaves, the attributes behind the
/// attribute leaves, and the target's panel width the rules pack for.
#[derive(Debug, Default)]
pub struct SegmentAnalysis {
    /// The segment's inputs, by index.
    pub inputs: Vec<Input>,
    /// Attributes by their leaf's symbol.
    attrs: HashMap<Symbol, Attrs>,
    /// The matmul microkernels' panel width.
    pub block: i64,
}

impl SegmentAnalysis {
    /// An analysis of a segment with `inputs`, packing for panels `block` wide.
    pub fn new(inputs: Vec<Input>, block: i64) -> Self {
        SegmentAnalysis {
            inputs,
            attrs: HashMap::new(),
            block,
        }
    }

    /// The leaf of `attrs` (interned).
    pub fn attrs_leaf(&mut self, attrs: &Attrs) -> Node {
        let text = oxrelax_dsl::text::print_attrs(attrs).replace(' ', "");
        let symbol = Symbol::from(format!("{{{text}}}"));
        self.attrs.entry(symbol).or_insert_with(|| attrs.clone());
        Node::Leaf(symbol)
    }

    /// The attributes of an attributes leaf.
    pub fn attrs_of(&self, symbol: Symbol) -> Option<&Attrs> {
        self.attrs.get(&symbol)
    }
}

/// The leaf of input `index`.
pub fn input_leaf(index: usize) -> Node {
    Node::Leaf(Symbol::from(format!("in{index}")))
}

/// The input index of an `in<j>` leaf.
pub fn input_index(symbol: Symbol) -> Option<usize> {
    symbol.as_str().strip_prefix("in")?.parse().ok()
}

impl Analysis<Node> for SegmentAnalysis {
    type Data = Facts;

    fn make(egraph: &mut SegmentGraph, enode: &Node) -> Facts {
        match enode {
            Node::Leaf(symbol) => leaf_facts(&egraph.analysis, *symbol),
            Node::Op(op, children) => op_facts(egraph, op.as_str(), children),
        }
    }

    fn merge(&mut self, into: &mut Facts, from: Facts) -> DidMerge {
        if *into == Facts::Invalid && from != Facts::Invalid {
            *into = from;
            return DidMerge(true, false);
        }
        DidMerge(false, *into != from)
    }
}

fn leaf_facts(analysis: &SegmentAnalysis, symbol: Symbol) -> Facts {
    if let Some(input) = input_index(symbol).and_then(|i| analysis.inputs.get(i)) {
        return Facts::Value {
            sinfo: input.expr.sinfo(),
            constant: input.constant,
        };
    }
    analysis
        .attrs_of(symbol)
        .map_or(Facts::Invalid, |attrs| Facts::Attrs(attrs.clone()))
}

/// The facts of a call of `op` on e-classes `children` (arguments, then attributes): its
/// struct info as the op registry infers it.
pub fn op_facts(egraph: &SegmentGraph, op: &str, children: &[Id]) -> Facts {
    let Some((attrs, args)) = children.split_last() else {
        return Facts::Invalid;
    };
    let Facts::Attrs(attrs) = &egraph[*attrs].data else {
        return Facts::Invalid;
    };
    let mut sinfos = Vec::with_capacity(args.len());
    for arg in args {
        match egraph[*arg].data.sinfo() {
            Some(sinfo) => sinfos.push(sinfo.clone()),
            None => return Facts::Invalid,
        }
    }
    let inferred = oxrelax_dsl::op::lookup(op).map(|def| def.infer_sinfo(&sinfos, attrs));
    match inferred {
        Some(Ok(sinfo)) => Facts::Value {
            sinfo,
            constant: args.iter().all(|a| egraph[*a].data.constant()),
        },
        _ => Facts::Invalid,
    }
}

/// A stand-in variable of e-class `id`'s struct info, to call the DSL's typed op
/// constructors on e-classes.
pub fn placeholder(egraph: &SegmentGraph, id: Id) -> Option<Expr> {
    let sinfo = egraph[id].data.sinfo()?.clone();
    Some(Expr::Var(Var {
        name: format!("class{id}"),
        sinfo,
        dataflow: true,
    }))
}

/// Adds the call a DSL constructor built on [`placeholder`]s of `args` (an op call whose
/// arguments are those placeholders, in order) as an e-node; its e-class.
pub fn add_call(egraph: &mut SegmentGraph, call: &Expr, args: &[Id]) -> Option<Id> {
    let Expr::Call(call) = call else {
        return None;
    };
    let Call {
        callee: Callee::Op(op),
        attrs,
        ..
    } = call.as_ref()
    else {
        return None;
    };
    let leaf = egraph.analysis.attrs_leaf(attrs);
    let mut children = args.to_vec();
    children.push(egraph.add(leaf));
    Some(egraph.add(Node::Op(Symbol::from(op.as_str()), children)))
}
