//! Schedules: rewrites of TIR loop nests into fast ones for a target (split, reorder,
//! fuse, vectorize, parallel, unroll, pack, tensorize) and the default rules per target.
//!
//! Nothing is implemented yet; the compiler front (graph IR, passes, legalization) comes
//! first. See the README's Status section.
