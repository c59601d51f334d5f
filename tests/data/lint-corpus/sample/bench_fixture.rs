//! False-alarm shape: a benchmark keeps its model and inputs in a `thread_local!` filled once
//! in `main` (burn's model benchmarks): they live as long as `main`'s own locals would.

use burn::tensor::{Int, Tensor, backend::Backend};
use std::cell::RefCell;

thread_local! {
    static STATE: RefCell<Option<Fixture<burn::backend::NdArray>>> = const { RefCell::new(None) };
}

struct Fixture<B: Backend> {
    input_ids: Tensor<B, 2, Int>,
    mask: Tensor<B, 2>,
}

fn fixture<B: Backend>(device: &B::Device) -> Fixture<B> {
    Fixture {
        input_ids: Tensor::zeros([1, 128], device),
        mask: Tensor::ones([1, 128], device),
    }
}

fn main() {
    STATE.with(|s| *s.borrow_mut() = Some(fixture(&Default::default())));
    STATE.with(|s| {
        let state = s.borrow();
        let fixture = state.as_ref().unwrap();
        println!("{:?} {:?}", fixture.input_ids.dims(), fixture.mask.dims());
    });
}
