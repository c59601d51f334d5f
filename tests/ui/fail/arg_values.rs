// Every argument given in the wrong form: one error each, at the argument.
use gpuscope::gpu_scope;

#[gpu_scope(name("step"))]
fn name_in_parens() {}

#[gpu_scope(leaks = 3)]
fn leaks_not_string() {}

#[gpu_scope(leaks)]
fn leaks_without_value() {}

#[gpu_scope(leaks("deny"))]
fn leaks_in_parens() {}

#[gpu_scope(device(dev))]
fn device_in_parens(dev: &gpuscope::Device) {
    let _ = dev;
}

#[gpu_scope(sync, sync = false)]
fn sync_twice() {}

#[gpu_scope(device = dev, device = dev)]
fn device_twice(dev: &gpuscope::Device) {
    let _ = dev;
}

fn main() {
    name_in_parens();
    leaks_not_string();
    leaks_without_value();
    leaks_in_parens();
    device_twice(&gpuscope::Device::host().unwrap());
    device_in_parens(&gpuscope::Device::host().unwrap());
    sync_twice();
}
