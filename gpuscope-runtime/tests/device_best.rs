//! `Device::best` picks CUDA device 0 when a driver and a GPU are there, else the host,
//! and says which (and why) through `tracing`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use gpuscope_runtime::Device;
use gpuscope_runtime::backend::DeviceKind;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn best_picks_cuda_when_present_else_host_and_logs_the_choice() {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let device = tracing::subscriber::with_default(subscriber, || Device::best().unwrap());
    let log = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    #[cfg(feature = "cuda")]
    let cuda_expected = gpuscope_runtime::backend::cuda::unavailable_reason().is_none();
    #[cfg(not(feature = "cuda"))]
    let cuda_expected = false;
    if cuda_expected {
        assert_eq!(device.kind(), DeviceKind::Cuda);
        assert!(log.contains("using CUDA device 0"), "{log}");
    } else {
        assert_eq!(device.kind(), DeviceKind::Host);
        assert!(
            log.contains("no CUDA device; using the host backend"),
            "{log}"
        );
        assert!(log.contains("reason="), "the log says why: {log}");
    }
    assert!(log.contains("gpuscope::device"), "{log}");
}

/// A device index that does not exist is an error that says how many there are (or, on
/// a machine without a driver, why there is none), never a panic; so is a bad name.
#[test]
fn a_device_that_does_not_exist_is_a_clear_error() {
    let e = gpuscope_runtime::Device::cuda(1000)
        .unwrap_err()
        .to_string();
    #[cfg(feature = "cuda")]
    let driver = gpuscope_runtime::backend::cuda::unavailable_reason().is_none();
    #[cfg(not(feature = "cuda"))]
    let driver = false;
    if driver {
        assert!(
            e.contains("CUDA device 1000 does not exist") && e.contains("present"),
            "{e}"
        );
    } else {
        assert!(e.starts_with("no device available"), "{e}");
    }
    let e = gpuscope_runtime::Device::by_name("cuda:x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected host, cuda or cuda:N"), "{e}");
}
