//! `empty_cache_in_loop` (warn): `empty_cache()` inside a loop.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::syntax::{callee_name, chain_root, ident_of, with_text};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "empty_cache_in_loop",
    default: Level::Warn,
    summary: "`empty_cache()` inside a loop frees cached blocks only to allocate them again next iteration",
    docs: DOCS,
};

const DOCS: &str = r#"## `empty_cache_in_loop`

Default level: **warn**.

### What it does
Finds `empty_cache()` (a method, `alloc.empty_cache()`, or a path call,
`gpuscope::empty_cache()`, `tch::Cuda::empty_cache()`) inside a loop.

### Why is this bad
Emptying the cache hands every free cached block back to the driver; the next iteration
then pays for fresh device allocations (slow, and synchronising) of the same sizes. The
caching allocator exists to reuse those blocks.

### Example
```rust
fn train(alloc: &Allocator, data: &[Batch]) {
    for batch in data {
        step(batch);
        alloc.empty_cache();
    }
}
```
Use instead:
```rust
fn train(alloc: &Allocator, data: &[Batch]) {
    for batch in data {
        step(batch);
    }
    alloc.empty_cache();
}
```

### Known problems
- A loop over models of very different sizes may empty the cache on purpose between them:
  allow the rule there.
- A call on the loop's own element (`for pool in pools { pool.empty_cache() }`) empties a
  different cache each iteration and is not reported; neither is one on a name the element
  was copied into.
- A bare `empty_cache()` of a function the file defines with an empty body (a mock, `fn
  empty_cache() {}`) empties nothing and is not reported; one the file defines with a body,
  or that another file defines, is.
"#;

/// Whether `receiver` starts from the element of the innermost loop (`pool` in `for pool
/// in pools.values() { pool.read().unwrap().empty_cache() }`): each iteration empties
/// another cache, once.
fn of_loop_element(receiver: &Expr, cx: &Cx<'_>) -> bool {
    let (Some(root), Some(innermost)) = (ident_of(chain_root(receiver)), cx.f.loops.last()) else {
        return false;
    };
    with_text(root, |name| innermost.element.contains(name))
}

/// Whether `call` is a bare `name(..)` of a free function the file defines with an empty
/// body (`fn empty_cache() { /* mock */ }`): it empties nothing.
fn calls_empty_fn(call: &syn::ExprCall, cx: &Cx<'_>) -> bool {
    matches!(&*call.func, Expr::Path(p) if p.qself.is_none()
        && p.path.get_ident().is_some_and(|name| cx.index().is_empty_fn(&name.to_string())))
}

/// The rule's checks.
pub(crate) struct EmptyCacheInLoop;

impl Check for EmptyCacheInLoop {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A call named `empty_cache`.
        Some(&[Trigger::Part("empty_cache")])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        if !cx.in_loop() {
            return;
        }
        let is_empty_cache = match e {
            Expr::MethodCall(m) => m.method == "empty_cache" && !of_loop_element(&m.receiver, cx),
            Expr::Call(c) => {
                callee_name(c).is_some_and(|name| name == "empty_cache") && !calls_empty_fn(c, cx)
            }
            _ => false,
        };
        if is_empty_cache {
            sink.emit(
                &RULE,
                e,
                "`empty_cache()` inside a loop returns cached blocks to the driver every iteration, so the next one pays for fresh device allocations".to_owned(),
                "call `empty_cache()` once after the loop, or not at all: the caching allocator reuses freed blocks".to_owned(),
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::hits;

    const RULE: &str = "empty_cache_in_loop";

    #[test]
    fn fires_on_method_and_path_calls_in_loops() {
        let src = r#"
fn train(alloc: &Allocator, data: &[Batch]) {
    for batch in data {
        step(batch);
        alloc.empty_cache();
    }
    loop {
        if done() { break; }
        gpuscope::cuda::empty_cache();
    }
}
"#;
        assert_eq!(hits(RULE, src), [(5, 9), (9, 9)]);
    }

    /// Each iteration empties another device's pool, once: EriDiffusion's
    /// `empty_cache_all_devices`. The same pool emptied in a loop nested inside is still
    /// reported, as is one reached through something other than the element.
    #[test]
    fn a_loop_over_caches_empties_each_once() {
        let src = r#"
fn empty_all(pools: &HashMap<usize, Arc<RwLock<Pool>>>, alloc: &Allocator) {
    for pool in pools.values() {
        pool.read().unwrap().empty_cache()?;
    }
    pools.values().for_each(|p| p.empty_cache());
    for (device, pool) in pools.iter() {
        for step in 0..10 {
            pool.empty_cache();
        }
        alloc.empty_cache();
    }
}
"#;
        assert_eq!(hits(RULE, src), [(9, 13), (11, 9)]);
    }

    /// torsh's memory-optimisation example calls its own mock, `fn empty_cache() { // no-op }`,
    /// once an epoch.
    #[test]
    fn a_mock_of_the_file_empties_nothing() {
        let src = r#"
fn empty_cache() {
    // Mock implementation - no-op
}
fn train(data: &[Batch]) {
    for batch in data {
        step(batch);
        empty_cache();
        cuda::empty_cache();
    }
}
"#;
        assert_eq!(hits(RULE, src), [(9, 9)]);
        // A function of the file with a body may well empty a cache.
        let src = src.replace(
            "// Mock implementation - no-op",
            "unsafe { c10_cuda_empty_cache() }",
        );
        assert_eq!(hits(RULE, &src), [(8, 9), (9, 9)]);
    }

    #[test]
    fn after_the_loop_is_fine() {
        let src = r#"
fn train(alloc: &Allocator, data: &[Batch]) {
    alloc.empty_cache();
    for batch in data {
        step(batch);
        let stats = alloc.cache_stats();
    }
    alloc.empty_cache();
    empty_cache();
}
"#;
        assert_eq!(hits(RULE, src), []);
    }
}
