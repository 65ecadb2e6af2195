//! A process-wide cache of JIT libraries: compiling the same set of primitive functions
//! again (a model built twice in one process) returns the library compiled the first
//! time.

use crate::{CodegenError, JitLibrary};
use oxrelax_dsl::text::print_prim_func;
use oxrelax_dsl::tir::PrimFunc;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Libraries by the printed text of the functions they were compiled from.
fn libraries() -> &'static Mutex<HashMap<String, Arc<JitLibrary>>> {
    static LIBRARIES: OnceLock<Mutex<HashMap<String, Arc<JitLibrary>>>> = OnceLock::new();
    LIBRARIES.get_or_init(Default::default)
}

impl JitLibrary {
    /// Like [`JitLibrary::compile`], but returns the library already compiled in this
    /// process for identical functions (same names and bodies), if any.
    pub fn compile_cached<'a>(
        funcs: impl IntoIterator<Item = (&'a String, &'a PrimFunc)> + Clone,
    ) -> Result<Arc<JitLibrary>, CodegenError> {
        let key: String = funcs
            .clone()
            .into_iter()
            .map(|(name, func)| print_prim_func(name, func))
            .collect();
        let cache = libraries();
        if let Some(library) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(library.clone());
        }
        let library = Arc::new(JitLibrary::compile(funcs)?);
        cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, library.clone());
        Ok(library)
    }
}
