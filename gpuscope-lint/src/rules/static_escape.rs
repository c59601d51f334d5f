//! `static_escape` (deny): a value owning device memory stored into a `static` (or a
//! `thread_local!`, `lazy_static!`) from inside a function.

use syn::Expr;

use crate::check::{Check, Trigger};
use crate::context::{Cx, Sink};
use crate::infer::Kind;
use crate::syntax::{chain_root, is_compound_assign, show, strip};
use crate::{Level, Rule};

pub(crate) const RULE: Rule = Rule {
    name: "static_escape",
    default: Level::Deny,
    summary: "a tensor stored into a `static` or `thread_local!` inside a function outlives every scope",
    docs: DOCS,
};

const DOCS: &str = r#"## `static_escape`

Default level: **deny**.

### What it does
Finds a value that owns device memory stored into a static from inside a function: an
assignment to a place rooted at a static (`CACHE = Some(t)`, `*LAST.lock().unwrap() = t`), or
a storing method (`set`, `get_or_init`, `push`, `insert`, `extend`, `replace`, ...) on a chain
rooted at one (`POOL.lock().unwrap().push(t)`, `CELL.set(t)`). Statics are those declared in
the file (also in `thread_local!` and `lazy_static!`), bindings aliasing them
(`let g = X.lock().unwrap();`, `X.with(|c| ..)`), and SCREAMING_CASE paths not declared as
`const`s. The stored value must be known to own device memory, or the static's declared type
must hold device memory (`Mutex<Vec<Tensor>>`) and the value not be host data.

### Why is this bad
A static lives until the process exits, and with it every tensor (and autograd graph) stored
in it: that memory is never freed, whatever scope the function runs in.

### Example
```rust
static LAST_BATCH: Mutex<Option<Tensor>> = Mutex::new(None);

fn remember(batch: &Tensor) {
    *LAST_BATCH.lock().unwrap() = Some(batch.clone());
}
```
Use instead:
```rust
struct Trainer {
    last_batch: Option<Tensor>,
}

impl Trainer {
    fn remember(&mut self, batch: &Tensor) {
        self.last_batch = Some(batch.clone());
    }
}
```

### Known problems
- A static whose contents the file also releases (`clear`, `truncate`, `pop`, `remove`,
  `take`, ...: a scoped stack or a bounded cache) does not fire, nor does code in `fn main`
  outside its loops (what it stores lives no longer than `main`'s own locals).
- Nor does a static of a type of the file whose own methods release what its fields hold
  (`OnceLock<MemoryPool>` where `MemoryPool::clear` empties `self.pools`, also through a
  local bound to the field, `if let Ok(mut pools) = self.pools.lock() { pools.clear() }`),
  or of a type with a field of such a type: a pool that bounds itself. Whether those methods
  run is not checked.
- Statics of configuration, paths, settings or handles (`OnceLock<Config>`,
  `Mutex<Vec<PathBuf>>`) never fire; a static whose type is unknown (declared in another file,
  or a generic) fires only when the value stored is known to own device memory.
- A cache kept on purpose needs a bounded size and an explicit clear; allow the rule on that
  function (`#[gpuscope::lints::allow(static_escape)]`).
"#;

/// Methods that store their argument into the receiver.
const STORING: &[&str] = &[
    "set",
    "get_or_init",
    "get_or_try_init",
    "get_or_insert",
    "get_or_insert_with",
    "push",
    "push_back",
    "push_front",
    "insert",
    "extend",
    "append",
    "replace",
];

/// The rule's checks.
pub(crate) struct StaticEscape;

impl Check for StaticEscape {
    fn rule(&self) -> &'static Rule {
        &RULE
    }

    fn triggers(&self) -> Option<&'static [Trigger]> {
        // A static declared here (`static`, also inside `thread_local!` or `lazy_static!`),
        // or one from another file, known by its SCREAMING_CASE name where it is stored into.
        Some(&[Trigger::Keyword("static"), Trigger::ScreamingRoot])
    }

    fn expr(&self, e: &Expr, cx: &Cx<'_>, sink: &mut Sink) {
        let (target, values): (&Expr, Vec<&Expr>) = match e {
            Expr::Assign(a) => (&a.left, vec![&*a.right]),
            Expr::Binary(b) if is_compound_assign(&b.op) => (&b.left, vec![&*b.right]),
            // `map.insert(key, value)`, `vec.insert(index, value)`: the key or index is not
            // where the device memory goes.
            Expr::MethodCall(m) if m.method == "insert" && m.args.len() == 2 => {
                (&m.receiver, m.args.iter().skip(1).collect())
            }
            Expr::MethodCall(m) if STORING.iter().any(|s| m.method == s) => {
                (&m.receiver, m.args.iter().collect())
            }
            _ => return,
        };
        if cx.runs_once() {
            return;
        }
        let Some((name, holds_device)) = cx.static_target(chain_root(target)) else {
            return;
        };
        // For `get_or_init(|| value)` the stored value is what the closure returns.
        fn stored(v: &Expr) -> &Expr {
            match strip(v) {
                Expr::Closure(c) => &c.body,
                other => other,
            }
        }
        let Some(value) = values.into_iter().map(stored).find(|v| {
            let value = cx.value(v);
            !value.empty
                && (value.owns_device_memory()
                    || (holds_device && value.kind == Kind::Unknown && !value.borrowed))
        }) else {
            return;
        };
        let value = show(value);
        let scope = if cx.f.scoped {
            ", past the end of this `#[gpu_scope]`"
        } else {
            ""
        };
        sink.emit(
            &RULE,
            e,
            format!("`{value}` is stored in static `{name}` and lives until the process exits{scope}: its GPU memory is never freed"),
            "return the value to the caller (or pass an owner in by `&mut`); a real cache needs a bounded size and an explicit clear".to_owned(),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{findings, hits};

    const RULE: &str = "static_escape";

    #[test]
    fn fires_on_assignment_set_and_push() {
        let src = r#"
static mut LAST: Option<Tensor> = None;
static BEST: OnceLock<Tensor> = OnceLock::new();
fn f(t: Tensor, u: Tensor, v: Tensor, w: Tensor) {
    unsafe { LAST = Some(t.clone()) };
    BEST.set(u).ok();
    HISTORY.lock().unwrap().push(v);
    *CURRENT.write().unwrap() = w;
    let first = FIRST.get_or_init(|| make_tensor());
}
fn make_tensor() -> Tensor { todo!() }
"#;
        assert_eq!(hits(RULE, src), [(5, 14), (6, 5), (7, 5), (8, 5), (9, 17)]);
        let f = &findings(RULE, src)[0];
        assert_eq!(
            f.message,
            "`Some(..)` is stored in static `LAST` and lives until the process exits: its GPU memory is never freed"
        );
        assert!(f.help.starts_with("return the value"));
    }

    #[test]
    fn a_map_insert_names_the_value_not_the_key() {
        // The shape of kornia-rs's colormap cache: device LUTs keyed by (colormap, device) in
        // a static map that is never cleared. The key is host data; the value is what stays.
        let src = r#"
use cudarc::driver::{CudaSlice, CudaStream};
static LUTS: OnceLock<Mutex<HashMap<(Colormap, usize), Arc<CudaSlice<u32>>>>> = OnceLock::new();
fn lut(stream: &Arc<CudaStream>, map: Colormap) -> Arc<CudaSlice<u32>> {
    let key = (map, stream.context().ordinal());
    let mut cache = LUTS.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap();
    let dev = Arc::new(stream.clone_htod(&map.table()).unwrap());
    cache.insert(key, dev.clone());
    dev
}
"#;
        assert_eq!(hits(RULE, src), [(8, 5)]);
        assert!(
            findings(RULE, src)[0]
                .message
                .starts_with("`dev.clone()` is stored"),
            "{}",
            findings(RULE, src)[0].message
        );
    }

    #[test]
    fn fires_through_thread_local_with_and_guards() {
        let src = r#"
thread_local! {
    static ACTIVATIONS: RefCell<Vec<Tensor>> = RefCell::new(Vec::new());
    static Stash: RefCell<Option<Tensor>> = RefCell::new(None);
}
fn f(a: Tensor, b: Tensor, c: Tensor, d: Tensor) {
    ACTIVATIONS.with(|acts| acts.borrow_mut().push(a));
    Stash.with(|s| *s.borrow_mut() = Some(b));
    ACTIVATIONS.with_borrow_mut(|v| v.push(c));
    let mut guard = POOL.lock().unwrap();
    guard.insert(1, d);
}
"#;
        assert_eq!(hits(RULE, src), [(7, 29), (8, 20), (9, 37), (11, 5)]);
        assert!(findings(RULE, src)[1].message.contains("static `Stash`"));
    }

    #[test]
    fn ignores_consts_locals_plain_statics_and_literals() {
        let src = r#"
const EMPTY: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());
static STEPS: AtomicUsize = AtomicUsize::new(0);
static mut COUNT: usize = 0;
static NAMES: Mutex<Vec<String>> = Mutex::new(Vec::new());
fn f(t: Tensor, n: usize, name: &str) -> Tensor {
    EMPTY.lock().unwrap().push(t.clone());
    unsafe { COUNT = n; COUNT += 1; }
    NAMES.lock().unwrap().push(name.to_string());
    READY.set(true);
    let mut cache = Vec::new();
    cache.push(t.clone());
    let CACHE = Vec::new();
    CACHE.push(t.clone());
    LOG.with(|l| l.borrow().len());
    let x = CACHE2.lock().unwrap().get(0).cloned();
    t
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn declared_statics_of_types_without_tensors_do_not_fire() {
        let src = r#"
static HOST: OnceLock<Device> = OnceLock::new();
static POLICY: OnceLock<LeakPolicy> = OnceLock::new();
thread_local! {
    static RNG: RefCell<(u64, Generator)> = RefCell::new((0, Generator::new(0)));
}
static WEIGHTS: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();
fn f(device: Device, t: Tensor) {
    HOST.get_or_init(|| device);
    POLICY.set(LeakPolicy::from_env()).ok();
    RNG.with(|cell| {
        let mut slot = cell.borrow_mut();
        *slot = (1, Generator::new(7));
    });
    WEIGHTS.get_or_init(Default::default).lock().unwrap().push(t);
}
"#;
        assert_eq!(hits(RULE, src), [(15, 5)]);
    }

    #[test]
    fn closure_given_to_other_methods_is_not_the_static() {
        let src = "fn f(t: Tensor) { LOG.map(|v| v.push(t.clone())); items.with(|v| v.push(t.clone())); }";
        assert_eq!(hits(RULE, src), []);
    }

    #[test]
    fn statics_of_settings_paths_and_handles_do_not_fire() {
        let src = r#"
use std::path::PathBuf;
struct Settings { verbose: bool, name: String }
struct Session { ids: Vec<u64>, next: usize }
static CONFIG: OnceLock<Mutex<Settings>> = OnceLock::new();
static SEEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static SEED: Mutex<Option<StdRng>> = Mutex::new(None);
static SESSION: OnceLock<Mutex<Session>> = OnceLock::new();
fn f(path: PathBuf, settings: Settings, rng: StdRng, ids: Vec<u64>, cache: Cache) {
    CONFIG.set(Mutex::new(settings)).ok();
    SEEN.lock().unwrap().push(path);
    *SEED.lock().unwrap() = Some(rng);
    SESSION.set(Mutex::new(Session { ids, next: 0 })).ok();
    GLOBAL_CACHE.get_or_init(|| cache);
    ENGINE.lock().unwrap().replace(None);
}
"#;
        assert_eq!(hits(RULE, src), []);
    }

    /// torsh's global pools: a `OnceLock` of a pool whose own methods empty what it holds
    /// (`clear`, `pop_front` through locals bound to `self.pools`), and a manager holding
    /// such a pool. A pool whose methods release nothing still fires.
    #[test]
    fn a_pool_that_empties_itself_is_a_bounded_cache() {
        let src = r#"
struct MemoryPool { pools: Mutex<HashMap<Key, VecDeque<Tensor>>> }
impl MemoryPool {
    fn new() -> Self { todo!() }
    fn take(&self, key: Key) -> Option<Tensor> {
        let mut pools = self.pools.lock().unwrap();
        if let Some(pool) = pools.get_mut(&key) { return pool.pop_front(); }
        None
    }
    fn global() -> &'static MemoryPool {
        static GLOBAL_POOL: OnceLock<MemoryPool> = OnceLock::new();
        GLOBAL_POOL.get_or_init(|| MemoryPool::new())
    }
}
struct Manager { pool: Arc<Mutex<MemoryPool>>, name: String }
static MANAGER: OnceLock<Manager> = OnceLock::new();
fn manager() -> &'static Manager {
    MANAGER.get_or_init(|| Manager::new())
}
struct Hoard { kept: Mutex<Vec<Tensor>> }
impl Hoard {
    fn new() -> Self { todo!() }
    fn keep(&self, t: Tensor) { self.kept.lock().unwrap().push(t); }
}
static HOARD: OnceLock<Hoard> = OnceLock::new();
fn hoard() -> &'static Hoard {
    HOARD.get_or_init(|| Hoard::new())
}
"#;
        assert_eq!(hits(RULE, src), [(27, 5)]);
    }
}
