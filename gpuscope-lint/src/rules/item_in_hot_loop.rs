//! `item_in_hot_loop` (allow): `.item()` inside an inner loop (a loop nested in another
//! loop). Each call copies a value to the host and waits for the device, every iteration of
//! the innermost loop. Off by default: it costs time, not memory.

use syn::Expr;
use syn::spanned::Spanned;

use crate::syntax::show;
use crate::visit::{Sink, State};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "item_in_hot_loop",
    default: Level::Allow,
    summary: "`.item()` in an inner loop synchronizes with the device on every iteration",
};

pub(crate) fn check(e: &Expr, st: &State<'_>, sink: &mut Sink<'_>) {
    let Expr::MethodCall(call) = e else { return };
    if call.method != "item" || !call.args.is_empty() || st.loop_depth() < 2 {
        return;
    }
    let value = show(&call.receiver);
    sink.emit(
        &RULE,
        e.span(),
        format!("`{value}.item()` in an inner loop copies to the host and waits for the device on every iteration"),
        "keep the values on the device (sum `.detach()`ed tensors) and call `.item()` once after the inner loop".to_owned(),
    );
}

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    const RULE: &str = "item_in_hot_loop";

    #[test]
    fn fires_in_inner_loops() {
        let src = r#"
fn f(data: &[Vec<Batch>], model: &Model) {
    for epoch in data {
        for batch in epoch {
            log(model.loss(batch).item());
        }
        epoch.iter().for_each(|b| log(model.loss(b).item()));
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 17), (7, 39)]);
    }

    #[test]
    fn outer_loops_and_other_items_do_not_fire() {
        let src = r#"
fn f(data: &[Batch], model: &Model, map: &HashMap<u8, u8>) {
    for batch in data {
        log(model.loss(batch).item());
        for k in 0..3 {
            let v = map.item(k);
        }
    }
    let last = model.loss(&data[0]).item();
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
