//! The kernel ABI: the signature every compiled kernel has, its status codes, the symbol
//! it is exported under, and where the VM finds kernels by name ([`KernelLibrary`]).

use crate::RtEnv;
use std::collections::HashMap;

/// A compiled kernel: `args` holds the tensor data pointers in parameter order, `dims` the
/// values of the kernel's symbolic dims in order, `env` the runtime services. Returns 0 on
/// success; any other value is an error the VM reports with the kernel's name.
///
/// # Safety
/// The caller passes pointers to buffers of the dtypes and shapes the kernel was compiled
/// for (the VM checks them against the kernel's signature), `dims` with one value per dim,
/// and a live `env`.
pub type KernelFn =
    unsafe extern "C" fn(args: *const *mut u8, dims: *const i64, env: *const RtEnv) -> i32;

/// Status returned for a task that panicked (by the runtime's thread pool and
/// [`RtEnv::parallel_for`]).
pub const TASK_PANICKED: i32 = -1;

/// Status returned by a runtime service given an invalid argument (e.g. a negative task
/// count or a null env).
pub const INVALID_ARGUMENT: i32 = -2;

/// Where the VM looks kernels up by name.
///
/// # Safety
/// Every kernel returned for a name must honour the ABI for the signature the executable
/// declares under that name: given buffers of the declared dtypes and extents (row-major),
/// it accesses them only within those extents, writes only the buffers the executable
/// allocates for its results (never its inputs or borrowed weights), starts no threads
/// other than through `env.parallel_for`, and returns before its buffers are released. The
/// kernel code must stay valid as long as the library value lives.
pub unsafe trait KernelLibrary: Send + Sync {
    /// The kernel named `name`, if the library has it.
    fn lookup(&self, name: &str) -> Option<KernelFn>;
}

/// The symbol a compiled kernel named `name` is exported under in an ahead-of-time
/// kernel library (`oxrelax_kernel_` + the name), so kernels never clash with the C
/// library's or the app's symbols.
pub fn kernel_symbol(name: &str) -> String {
    format!("oxrelax_kernel_{name}")
}

/// A kernel library backed by a map of function pointers (e.g. hand-written kernels, or
/// symbols resolved from a shared library).
#[derive(Clone, Debug, Default)]
pub struct KernelTable {
    kernels: HashMap<String, KernelFn>,
}

impl KernelTable {
    /// An empty table.
    pub fn new() -> KernelTable {
        KernelTable::default()
    }

    /// Adds (or replaces) the kernel `name`; returns `self` for chaining.
    ///
    /// # Safety
    /// `kernel` must honour the contract of [`KernelLibrary`] for every signature an
    /// executable run with this table declares under `name`.
    pub unsafe fn with(mut self, name: &str, kernel: KernelFn) -> KernelTable {
        self.kernels.insert(name.to_string(), kernel);
        self
    }
}

// SAFETY: every kernel was added through `with`, whose contract is this trait's.
unsafe impl KernelLibrary for KernelTable {
    fn lookup(&self, name: &str) -> Option<KernelFn> {
        self.kernels.get(name).copied()
    }
}
