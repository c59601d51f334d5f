//! The guard of `#[gpu_scope(device = <expr>, sync)]`.

use crate::device::Device;

/// Waits for the whole device when dropped (at the scope's exit, before its leak
/// report); a failure is printed, naming the scope, since a destructor cannot return it.
#[must_use = "the device is synchronised when this guard is dropped"]
pub struct SyncDevice {
    device: Device,
    scope: &'static str,
}

impl SyncDevice {
    /// A guard for `device`, in the scope named `scope`.
    #[inline]
    pub fn new(device: &Device, scope: &'static str) -> SyncDevice {
        SyncDevice {
            device: device.clone(),
            scope,
        }
    }
}

impl Drop for SyncDevice {
    fn drop(&mut self) {
        if let Err(e) = self.device.backend().synchronize_device() {
            eprintln!(
                "gpuscope: scope `{}`: could not synchronise {}: {}",
                self.scope,
                self.device.description(),
                e
            );
        }
    }
}
