//! False-alarm shape (`parse`): a define-by-run autodiff crate on ndarray, of the 2015
//! edition (its Cargo.toml has no `edition` key), declares its trait methods with anonymous
//! parameters (`fn set_value(&self, T);`, `fn backward(&self, &Self::Gradient);`). That is
//! valid Rust 2015 (a hard error only since 2018), but `syn` does not parse it, so the file
//! was reported as not parsing and none of it was linted. Read as rustc reads it (each such
//! parameter named `_`), it parses, and its training loop (the optimizer's `step` takes the
//! parameters and clears their gradients itself) has nothing to report.

use std::cell::RefCell;
use std::rc::Rc;

use ndarray::Array2;

pub trait Node {
    type Value;
    type Gradient;
    fn forward(&self);
    fn backward(&self, &Self::Gradient);
    fn value(&self) -> &Self::Value;
    fn zero_gradient(&self);
}

pub trait DataInput<T> {
    fn set_value(&self, T);
}

pub trait ArraySliceOps<RHS> {
    fn slice_assign(&mut self, RHS);
    fn slice_add_assign(&mut self, RHS);
}

pub trait Optimizer {
    fn step(&self, &[Rc<Parameter>]);
}

pub struct Parameter {
    pub value: RefCell<Array2<f32>>,
    pub gradient: RefCell<Array2<f32>>,
}

impl ArraySliceOps<f32> for Array2<f32> {
    fn slice_assign(&mut self, rhs: f32) {
        self.fill(rhs);
    }
    fn slice_add_assign(&mut self, rhs: f32) {
        self.mapv_inplace(|x| x + rhs);
    }
}

pub struct Sgd {
    pub learning_rate: f32,
}

impl Optimizer for Sgd {
    fn step(&self, parameters: &[Rc<Parameter>]) {
        for parameter in parameters {
            let gradient = parameter.gradient.borrow();
            parameter
                .value
                .borrow_mut()
                .scaled_add(-self.learning_rate, &gradient);
            drop(gradient);
            parameter.gradient.borrow_mut().fill(0.0);
        }
    }
}

pub fn fit<L, I>(
    loss: &L,
    input: &I,
    optimizer: &Sgd,
    parameters: &[Rc<Parameter>],
    batches: Vec<Array2<f32>>,
) -> f32
where
    L: Node<Value = f32, Gradient = f32>,
    I: DataInput<Array2<f32>>,
{
    let mut total = 0.0;
    for batch in batches {
        input.set_value(batch);
        loss.forward();
        total += *loss.value();
        loss.backward(&1.0);
        optimizer.step(parameters);
    }
    total
}
