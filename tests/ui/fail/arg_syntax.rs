// Arguments that are not `key`, `key = value` or `key(..)`: one error each.
use gpuscope::{gpu_scope, no_grad};

#[gpu_scope(a::b = 1)]
fn path_key() {}

#[gpu_scope("step")]
fn literal() {}

#[gpu_scope(name = )]
fn missing_value() {}

#[gpu_scope(name = "a" sync)]
fn missing_comma() {}

#[gpu_scope(,)]
fn lone_comma() {}

#[no_grad(a::b)]
fn no_grad_path() {}

#[no_grad(alow(forget_tensor))]
fn no_grad_misspelt() {}

#[no_grad(name = "eval")]
fn no_grad_scope_argument() {}

fn main() {
    path_key();
    literal();
    missing_value();
    missing_comma();
    lone_comma();
    no_grad_path();
    no_grad_misspelt();
    no_grad_scope_argument();
}
