//! Ctrl-C in interactive commands: during a reply it ends the reply; otherwise it ends
//! the process as usual (exit code 130).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static REPLYING: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// Installs the Ctrl-C handler (once per process; a handler installed by someone else
/// is left in place).
pub fn install() {
    INSTALL.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if REPLYING.load(Ordering::SeqCst) {
                INTERRUPTED.store(true, Ordering::SeqCst);
            } else {
                eprintln!();
                std::process::exit(130);
            }
        });
    });
}

/// While alive, Ctrl-C interrupts the reply instead of ending the process.
pub struct Replying(());

impl Replying {
    /// Starts a reply: Ctrl-C now interrupts it.
    pub fn start() -> Replying {
        INTERRUPTED.store(false, Ordering::SeqCst);
        REPLYING.store(true, Ordering::SeqCst);
        Replying(())
    }

    /// Whether Ctrl-C was pressed since the reply started.
    pub fn interrupted(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
}

impl Drop for Replying {
    fn drop(&mut self) {
        REPLYING.store(false, Ordering::SeqCst);
    }
}
