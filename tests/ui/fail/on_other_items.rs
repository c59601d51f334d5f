// On anything that is not a function with a body: one error, at the item's keyword.
use gpuscope::{gpu_scope, no_grad};

#[gpu_scope]
mod module {}

#[gpu_scope]
type Alias = u32;

#[gpu_scope]
use std::fmt;

#[gpu_scope]
unsafe extern "C" {}

#[gpu_scope]
macro_rules! m {
    () => {};
}

#[gpu_scope]
union Bits {
    f: f32,
}

#[gpu_scope]
trait Model {}

#[gpu_scope]
unsafe impl Send for Wrapper {}

struct Wrapper;

#[no_grad]
impl Wrapper {}

trait Eval {
    #[no_grad]
    fn eval(&self) -> bool;
}

fn main() {
    let _: Alias = 1;
    let _ = Bits { f: 1.0 };
    let _: Option<&dyn fmt::Debug> = None;
    m!();
}
