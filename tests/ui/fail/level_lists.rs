// Lint levels in the wrong form: one error each.
use gpuscope::{gpu_scope, no_grad};

#[gpu_scope(allow())]
fn empty_list() {}

#[gpu_scope(warn(gpuscope::forget_tensor))]
fn rule_path() {}

#[gpu_scope(deny(forget_tensor = true))]
fn rule_value() {}

#[gpu_scope(allow = "forget_tensor")]
fn level_value() {}

#[no_grad(warn("graph_accumulation"))]
fn rule_string() {}

fn main() {
    empty_list();
    rule_path();
    rule_value();
    level_value();
    rule_string();
}
