//! NCCL's C API, loaded at run time (like the CUDA driver): the few functions gpuscope
//! calls, looked up once.
//!
//! gpuscope loads NCCL itself rather than through cudarc's bindings for two reasons:
//! cudarc looks only for `libnccl.so` (pip's `nvidia-nccl` and most distributions ship
//! `libnccl.so.2`), and it panics when none is found; and gpuscope needs the
//! non-blocking communicator configuration, `ncclCommAbort` and
//! `ncclCommGetAsyncError` to turn a rank that never comes or dies into a time-out error
//! instead of a hang.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

/// `ncclComm_t`.
pub type Comm = *mut c_void;
/// `ncclResult_t`.
pub type NcclResult = c_int;
/// `cudaStream_t` (the same handle as the driver's `CUstream`).
pub type Stream = *mut c_void;

/// `ncclSuccess`.
pub const SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a non-blocking call has not finished yet.
pub const IN_PROGRESS: NcclResult = 7;

/// `ncclUniqueId`: 128 opaque bytes that rank 0 makes and every rank needs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The bytes.
    pub internal: [c_char; 128],
}

/// `ncclConfig_t` as NCCL 2.17 defined it. Later versions append fields and read
/// `size` and `version` to know which are present, so this layout works with them.
#[repr(C)]
pub struct Config {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub blocking: c_int,
    pub cga_cluster_size: c_int,
    pub min_ctas: c_int,
    pub max_ctas: c_int,
    pub net_name: *const c_char,
    pub split_share: c_int,
}

/// `NCCL_CONFIG_UNDEF_INT`: "use NCCL's default".
const UNDEF_INT: c_int = c_int::MIN;

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` with `blocking` set.
    pub fn new(blocking: bool) -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            version: 2 * 10000 + 17 * 100, // NCCL_VERSION(2, 17, 0)
            blocking: c_int::from(blocking),
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
        }
    }
}

/// NCCL's data types (`ncclDataType_t`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(i32)]
pub enum DataType {
    Int8 = 0,
    Uint8 = 1,
    Int32 = 2,
    Uint32 = 3,
    Int64 = 4,
    Uint64 = 5,
    Float16 = 6,
    Float32 = 7,
    Float64 = 8,
    Bfloat16 = 9,
}

/// The functions gpuscope calls, from one loaded library.
#[allow(clippy::type_complexity)]
pub struct Nccl {
    /// Where it was loaded from.
    pub path: String,
    /// `ncclGetVersion`'s value (e.g. 22703 for 2.27.3).
    pub version: c_int,
    pub get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    pub comm_init_rank_config:
        unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int, *mut Config) -> NcclResult,
    pub comm_destroy: unsafe extern "C" fn(Comm) -> NcclResult,
    pub comm_abort: unsafe extern "C" fn(Comm) -> NcclResult,
    pub comm_get_async_error: unsafe extern "C" fn(Comm, *mut NcclResult) -> NcclResult,
    pub get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    pub get_last_error: unsafe extern "C" fn(Comm) -> *const c_char,
    pub group_start: unsafe extern "C" fn() -> NcclResult,
    pub group_end: unsafe extern "C" fn() -> NcclResult,
    pub all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> NcclResult,
    pub broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> NcclResult,
    pub all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> NcclResult,
    pub reduce_scatter: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        Stream,
    ) -> NcclResult,
    pub comm_register:
        unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void) -> NcclResult,
    pub comm_deregister: unsafe extern "C" fn(Comm, *mut c_void) -> NcclResult,
    _lib: libloading::Library,
}

// SAFETY: function pointers and a library handle; NCCL's functions are thread safe
// for distinct communicators, and gpuscope serialises calls on one communicator.
unsafe impl Send for Nccl {}
unsafe impl Sync for Nccl {}

impl Nccl {
    /// NCCL's text for a result code.
    pub fn error_string(&self, r: NcclResult) -> String {
        // SAFETY: NCCL returns a static C string for any code.
        let p = unsafe { (self.get_error_string)(r) };
        if p.is_null() {
            return format!("NCCL error {r}");
        }
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// NCCL's last error message for `comm` (may be empty).
    ///
    /// # Safety
    /// `comm` is null or a communicator of this library that has not been destroyed.
    pub unsafe fn last_error(&self, comm: Comm) -> String {
        // SAFETY: NCCL accepts any communicator (or null) and returns a C string.
        let p = unsafe { (self.get_last_error)(comm) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated; copied before the next NCCL call.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The process's NCCL, loaded on first use; the error says every place looked at.
pub fn nccl() -> Result<&'static Nccl, String> {
    static NCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();
    NCCL.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Nccl, String> {
    let mut tried = Vec::new();
    for candidate in candidates() {
        // SAFETY: loading NCCL runs its initialisers, which only set up NCCL's state.
        match unsafe { libloading::Library::new(&candidate) } {
            Ok(lib) => {
                return bind(lib, candidate.display().to_string())
                    .map_err(|e| format!("{}: {e}", candidate.display()));
            }
            Err(e) => tried.push(format!("{} ({e})", candidate.display())),
        }
    }
    Err(format!(
        "NCCL was not found; tried: {}. Install NCCL (e.g. `pip install nvidia-nccl-cu13`, or your distribution's libnccl2) or set GPUSCOPE_NCCL_LIBRARY to the path of libnccl.so.2",
        tried.join("; ")
    ))
}

/// Where NCCL may be: `GPUSCOPE_NCCL_LIBRARY`, the loader's search path, and the
/// `nvidia-nccl` wheel inside Python installations and virtual environments.
fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("GPUSCOPE_NCCL_LIBRARY") {
        out.push(PathBuf::from(p));
        return out;
    }
    out.push(PathBuf::from("libnccl.so.2"));
    out.push(PathBuf::from("libnccl.so"));
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            roots.push(PathBuf::from(v).join("lib"));
        }
    }
    roots.extend(
        [
            "/usr/local/lib",
            "/usr/lib",
            "/opt/conda/lib",
            "/opt/torch/.venv/lib",
            "/opt/venv/lib",
        ]
        .map(PathBuf::from),
    );
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pythons.sort();
        for py in pythons.into_iter().rev() {
            for packages in ["site-packages", "dist-packages"] {
                let lib = py.join(packages).join("nvidia/nccl/lib/libnccl.so.2");
                if lib.is_file() {
                    out.push(lib);
                }
            }
        }
    }
    out
}

fn bind(lib: libloading::Library, path: String) -> Result<Nccl, String> {
    /// Looks up `name` as a function pointer of the type it is assigned to.
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is NCCL's function of that name, whose C signature
            // the field's type matches (nccl.h).
            let s = unsafe { lib.get::<*const ()>(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{} is missing ({e}): NCCL 2.18 or later is needed", $name))?;
            // SAFETY: as above; a function pointer has the size of a data pointer.
            unsafe { std::mem::transmute_copy(&*s) }
        }};
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult = sym!("ncclGetVersion");
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { get_version(&mut version) };
    Ok(Nccl {
        path,
        version,
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank_config: sym!("ncclCommInitRankConfig"),
        comm_destroy: sym!("ncclCommDestroy"),
        comm_abort: sym!("ncclCommAbort"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        get_error_string: sym!("ncclGetErrorString"),
        get_last_error: sym!("ncclGetLastError"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        all_reduce: sym!("ncclAllReduce"),
        broadcast: sym!("ncclBroadcast"),
        all_gather: sym!("ncclAllGather"),
        reduce_scatter: sym!("ncclReduceScatter"),
        comm_register: sym!("ncclCommRegister"),
        comm_deregister: sym!("ncclCommDeregister"),
        _lib: lib,
    })
}
