//! [`HtpBackend`]: a QNN log, backend and device of the HTP library, the device set up for
//! one SoC (the graphs it prepares and the context binaries it writes are that SoC's).

use super::api::{
    DeviceConfig, ErrorHandle, Handle, HtpDeviceSocConfig, DEVICE_CONFIG_CUSTOM,
    HTP_DEVICE_CONFIG_SOC, LOG_LEVEL_WARN,
};
use super::error::HtpError;
use super::library::{exclusive, log_line, take_log, QnnLibrary};
use std::ffi::{c_char, CStr};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The process's open backend: the HTP library keeps device state per process, so one
/// backend (one SoC) is open at a time and shared by everything that runs on it.
static OPEN: Mutex<Option<Weak<HtpBackend>>> = Mutex::new(None);

/// A backend and device of a loaded library, for one SoC. Freed when dropped.
pub struct HtpBackend {
    library: Arc<QnnLibrary>,
    log: Handle,
    backend: Handle,
    device: Handle,
    soc: String,
    soc_model: u32,
}

// SAFETY: QNN handles may be used from any thread; every use through this crate goes
// through `&self` calls the library documents as thread-safe, or through a context that
// serializes its graph calls.
unsafe impl Send for HtpBackend {}
// SAFETY: as above.
unsafe impl Sync for HtpBackend {}

/// Fetches an entry point of the table, or the error naming it.
macro_rules! entry {
    ($library:expr, $field:ident) => {
        $library
            .functions()
            .$field
            .ok_or(HtpError::MissingFunction(stringify!($field)))
    };
}
pub(super) use entry;

impl HtpBackend {
    /// The process's backend of `library` for the SoC `soc` (named in errors) whose QNN
    /// code (`Qnn_SocModel_t`) is `soc_model`: the one open already, or a new log,
    /// backend and device. While a backend for another SoC or library is open, opening
    /// one is an error naming both.
    pub fn open(
        library: Arc<QnnLibrary>,
        soc: &str,
        soc_model: u32,
    ) -> Result<Arc<HtpBackend>, HtpError> {
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(backend) = open.as_ref().and_then(Weak::upgrade) {
            let same = backend.soc_model == soc_model && backend.library.path() == library.path();
            return match same {
                true => Ok(backend),
                false => Err(HtpError::BackendBusy {
                    open: backend.soc.clone(),
                    asked: soc.to_string(),
                }),
            };
        }
        let backend = Arc::new(HtpBackend::create(library, soc, soc_model)?);
        *open = Some(Arc::downgrade(&backend));
        Ok(backend)
    }

    fn create(library: Arc<QnnLibrary>, soc: &str, soc_model: u32) -> Result<HtpBackend, HtpError> {
        let _turn = exclusive();
        let mut this = HtpBackend {
            library,
            log: std::ptr::null_mut(),
            backend: std::ptr::null_mut(),
            device: std::ptr::null_mut(),
            soc: soc.to_string(),
            soc_model,
        };
        let log_create = entry!(this.library, log_create)?;
        take_log();
        // SAFETY: the callback is an `extern "C"` function of the declared type that
        // lives for the program; the out-pointer is valid.
        let status = unsafe { log_create(log_line, LOG_LEVEL_WARN, &mut this.log) };
        this.check(status, "QnnLog_create", "")?;
        let backend_create = entry!(this.library, backend_create)?;
        // SAFETY: a null config list means the defaults; the out-pointer is valid.
        let status = unsafe { backend_create(this.log, std::ptr::null(), &mut this.backend) };
        this.check(status, "QnnBackend_create", "")?;
        let soc_config = HtpDeviceSocConfig {
            option: HTP_DEVICE_CONFIG_SOC,
            soc_model: soc_model as u64,
        };
        let config = DeviceConfig {
            option: DEVICE_CONFIG_CUSTOM,
            custom: (&soc_config as *const HtpDeviceSocConfig).cast(),
        };
        let configs = [&config as *const DeviceConfig, std::ptr::null()];
        let device_create = entry!(this.library, device_create)?;
        // SAFETY: the config list is null-terminated and its configs outlive the call.
        let status = unsafe { device_create(this.log, configs.as_ptr(), &mut this.device) };
        let what = format!("SoC {soc} (QNN SoC model {soc_model})");
        this.check(status, "QnnDevice_create", &what)?;
        Ok(this)
    }

    /// The library.
    pub fn library(&self) -> &Arc<QnnLibrary> {
        &self.library
    }

    /// The backend handle.
    pub(super) fn backend(&self) -> Handle {
        self.backend
    }

    /// The device handle.
    pub(super) fn device(&self) -> Handle {
        self.device
    }

    /// The library's build id (e.g. `v2.40.0...`).
    pub fn build_id(&self) -> String {
        let _turn = exclusive();
        let Ok(get) = entry!(self.library, backend_get_build_id) else {
            return String::new();
        };
        let mut id: *const c_char = std::ptr::null();
        // SAFETY: the out-pointer is valid; the string it receives is the library's.
        if unsafe { get(&mut id) } != 0 || id.is_null() {
            return String::new();
        }
        // SAFETY: a NUL-terminated string owned by the library.
        unsafe { CStr::from_ptr(id) }.to_string_lossy().into_owned()
    }

    /// `Ok` for a successful status, else the call's error with the library's message
    /// and log lines. Called with the process's QNN turn held.
    pub(super) fn check(
        &self,
        status: ErrorHandle,
        call: &'static str,
        what: &str,
    ) -> Result<(), HtpError> {
        let log = take_log();
        if status == 0 {
            return Ok(());
        }
        Err(HtpError::Call {
            call,
            what: what.to_string(),
            code: status & 0xFFFF,
            message: self.message(status),
            log,
        })
    }

    fn message(&self, status: ErrorHandle) -> String {
        let Ok(get) = entry!(self.library, error_get_message) else {
            return String::new();
        };
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: the out-pointer is valid; the message is the library's.
        if unsafe { get(status, &mut text) } != 0 || text.is_null() {
            return String::new();
        }
        // SAFETY: a NUL-terminated string owned by the library.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for HtpBackend {
    fn drop(&mut self) {
        let _turn = exclusive();
        let functions = self.library.functions();
        // SAFETY: each handle was created by this library and is freed once, device
        // before backend before log, as the API orders it; null handles are skipped.
        unsafe {
            if let (false, Some(free)) = (self.device.is_null(), functions.device_free) {
                free(self.device);
            }
            if let (false, Some(free)) = (self.backend.is_null(), functions.backend_free) {
                free(self.backend);
            }
            if let (false, Some(free)) = (self.log.is_null(), functions.log_free) {
                free(self.log);
            }
        }
        take_log();
    }
}
