//! The per-process PTX, the per-device modules, and the per-stream cuBLAS handles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use crate::backend::BackendError;

fn driver_err(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> BackendError {
    move |e| BackendError::Driver {
        call,
        message: format!("{e:?}"),
    }
}

/// The PTX of [`super::source`], compiled on first use.
fn ptx() -> Result<Ptx, BackendError> {
    static PTX: OnceLock<Result<Ptx, String>> = OnceLock::new();
    PTX.get_or_init(|| {
        // SAFETY: only tries to open the library by name.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("the NVRTC library (libnvrtc) is not installed: gpuscope compiles its CUDA kernels at run time".into());
        }
        let options = CompileOptions {
            name: Some("gpuscope_ops.cu".into()),
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(super::source(), options).map_err(|e| match e {
            CompileError::CompileError { log, .. } => {
                format!("the kernels did not compile:\n{}", log.to_string_lossy())
            }
            other => format!("{other:?}"),
        })
    })
    .clone()
    .map_err(|message| BackendError::Driver {
        call: "nvrtcCompileProgram",
        message,
    })
}

/// A device's loaded kernel module and the functions looked up so far.
pub struct Kernels {
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels").finish_non_exhaustive()
    }
}

impl Kernels {
    /// The kernel `name` (e.g. `binary_f32`).
    pub fn function(&self, name: &str) -> Result<CudaFunction, BackendError> {
        let mut functions = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = functions.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .module
            .load_function(name)
            .map_err(driver_err("cuModuleGetFunction"))?;
        functions.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

/// The kernels loaded into `ctx` (compiled and loaded on first use, then kept for the
/// process, keyed by the context's device ordinal).
pub fn kernels_for(ctx: &Arc<CudaContext>) -> Result<Arc<Kernels>, BackendError> {
    static MODULES: Mutex<Vec<(usize, Arc<Kernels>)>> = Mutex::new(Vec::new());
    let ordinal = ctx.ordinal();
    let mut modules = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, k)) = modules.iter().find(|(o, _)| *o == ordinal) {
        return Ok(k.clone());
    }
    let module = ctx
        .load_module(ptx()?)
        .map_err(driver_err("cuModuleLoadData"))?;
    let k = Arc::new(Kernels {
        module,
        functions: Mutex::new(HashMap::new()),
    });
    modules.push((ordinal, k.clone()));
    Ok(k)
}

/// A cuBLAS handle whose work goes to `stream` (made on first use for each device and
/// stream, then kept for the process).
pub fn blas_for(
    stream: &Arc<CudaStream>,
    stream_index: u32,
) -> Result<Arc<CudaBlas>, BackendError> {
    type Handles = Vec<((usize, u32), Arc<CudaBlas>)>;
    static HANDLES: Mutex<Handles> = Mutex::new(Vec::new());
    let key = (stream.context().ordinal(), stream_index);
    let mut handles = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, h)) = handles.iter().find(|(k, _)| *k == key) {
        return Ok(h.clone());
    }
    // SAFETY: only tries to open the library by name.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err(BackendError::Unavailable(
            "the cuBLAS library (libcublas) is not installed: CUDA matmul needs it".into(),
        ));
    }
    let blas = CudaBlas::new(stream.clone()).map_err(|e| BackendError::Driver {
        call: "cublasCreate_v2",
        message: format!("{e:?}"),
    })?;
    let blas = Arc::new(blas);
    handles.push((key, blas.clone()));
    Ok(blas)
}
