//! The unpickler's tests: every kind of value, shared and recursive structures, refused
//! pickles.

use super::*;

thread_local! {
    /// Every list the decoder made on this thread (weakly).
    pub(super) static CREATED: RefCell<Vec<std::rc::Weak<RefCell<Vec<Item>>>>> =
        const { RefCell::new(Vec::new()) };
}

/// A list that holds itself (`l = []; l.append(l)`, through the memo, and through
/// DUP) is refused, and the cycle is freed: the fuzz target `pytorch_snapshot` found
/// it leaking under LeakSanitizer (its input: `fuzz/regressions/pytorch_snapshot/`).
#[test]
fn a_list_that_holds_itself_is_refused_and_freed() {
    for p in [
        &b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]\x94h\x00a."[..],
        b"]2a.",
    ] {
        CREATED.with(|c| c.borrow_mut().clear());
        let r = unpickle(p);
        assert!(r.is_err(), "{r:?}");
        let created = CREATED.with(|c| c.borrow().len());
        assert_eq!(created, 1);
        CREATED.with(|c| {
            assert!(
                c.borrow().iter().all(|w| w.upgrade().is_none()),
                "a list was not freed"
            )
        });
    }
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

// `pickle.dumps(v, protocol=4)` in CPython 3.11, for each v below.
#[test]
fn reads_what_cpython_writes() {
    // {'a': [1, -2, 300, 70000, 2**40, -2**70, 1.5, None, True, 'é', b'x', (1, 2)]}
    let p = b"\x80\x04\x95H\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94]\x94(K\x01J\xfe\xff\xff\xffM,\x01Jp\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xc0G?\xf8\x00\x00\x00\x00\x00\x00N\x88\x8c\x02\xc3\xa9\x94C\x01x\x94K\x01K\x02\x86\x94es.";
    let v = unpickle(p).unwrap();
    let Value::Dict(d) = v else { panic!() };
    assert_eq!(d[0].0, s("a"));
    let Value::List(l) = &d[0].1 else { panic!() };
    assert_eq!(
        l[..9],
        [
            Value::Int(1),
            Value::Int(-2),
            Value::Int(300),
            Value::Int(70000),
            Value::Int(1 << 40),
            Value::Int(-(1 << 70)),
            Value::Float(1.5),
            Value::None,
            Value::Bool(true)
        ]
    );
    assert_eq!(l[9], s("é"));
    assert_eq!(l[10], Value::Bytes(b"x"[..].into()));
    assert_eq!(
        l[11],
        Value::List(vec![Value::Int(1), Value::Int(2)].into())
    );
}

#[test]
fn shared_containers_with_shared_children_read_everywhere() {
    // f = [{'filename': 'x.py'}]; pickle.dumps([{'frames': f}, {'frames': f}, {'frames': f}], 4)
    let p = b"\x80\x04\x957\x00\x00\x00\x00\x00\x00\x00]\x94(}\x94\x8c\x06frames\x94]\x94}\x94\x8c\x08filename\x94\x8c\x04x.py\x94sas}\x94h\x02h\x03s}\x94h\x02h\x03se.";
    let Value::List(l) = unpickle(p).unwrap() else {
        panic!()
    };
    assert_eq!(l.len(), 3);
    for entry in l.iter() {
        let Value::Dict(d) = entry else { panic!() };
        let Value::List(frames) = &d[0].1 else {
            panic!()
        };
        let Value::Dict(f) = &frames[0] else { panic!() };
        assert_eq!(f[0], (s("filename"), s("x.py")));
    }
}

#[test]
fn protocol_0_text_opcodes() {
    // pickle.dumps({'a': [1, 2.5, 'b']}, 0)
    let p = b"(dp0\nVa\np1\n(lp2\nI1\naF2.5\naVb\np3\nas.";
    let Value::Dict(d) = unpickle(p).unwrap() else {
        panic!()
    };
    assert_eq!(
        d[0].1,
        Value::List(vec![Value::Int(1), Value::Float(2.5), s("b")].into())
    );
}

#[test]
fn bad_pickles_say_where_and_what() {
    let p = b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x05abc";
    let e = unpickle(p).unwrap_err();
    assert!(e.truncated && e.message.contains("ends early"), "{e}");
    let e = unpickle(b"\x80\x04cos\nsystem\n.").unwrap_err();
    assert!(e.message.contains("Python objects"), "{e}");
    assert_eq!(e.offset, 2);
    let e = unpickle(b"\x80\x04K\x01.xx").unwrap_err();
    assert!(e.message.contains("2 bytes follow"), "{e}");
    let e = unpickle(b"\x80\x04\xffK").unwrap_err();
    assert!(e.message.contains("not a pickle opcode"), "{e}");
    assert!(unpickle(b"").unwrap_err().truncated);
    // A list that contains itself: l = []; l.append(l)
    let e = unpickle(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]\x94h\x00a.").unwrap_err();
    assert!(e.message.contains("recursive"), "{e}");
}
