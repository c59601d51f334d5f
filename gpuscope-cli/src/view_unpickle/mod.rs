//! A data-only unpickler: Python pickles (protocols 0 to 5) of `None`, bools, ints,
//! floats, strings, bytes, lists, tuples, sets and dicts, decoded the way CPython does
//! (the memo shares objects: a value referenced from many places is decoded once and
//! shared), and never a class, a function or any code (such pickles are refused).
//!
//! Why not `serde-pickle`: its memo counts references to drop values early, and a
//! container that is shared (memoized) and holds memoized values loses those values the
//! second time it is read ("recursive structure found"; birkenfeld/serde-pickle#24 is
//! open). PyTorch snapshots are exactly that: the C++ code shares one frame list between
//! every trace entry with the same stack, so every real snapshot with a history hits it.
//! (`deser-pickle` reads them, but needs Rust 1.88, above this workspace's 1.85.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A decoded value. Containers are shared (`Rc`) where the pickle shares them.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// A list, tuple, set or frozenset.
    List(Rc<[Value]>),
    /// A dict, in insertion order.
    Dict(Rc<[(Value, Value)]>),
}

/// Why a pickle could not be decoded: where (byte offset) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {message}")]
pub struct UnpickleError {
    pub offset: usize,
    pub message: String,
    /// The input ended before the pickle did.
    pub truncated: bool,
}

/// A value under construction: containers are mutable and shared with the memo.
#[derive(Clone)]
enum Item {
    Mark,
    Done(Value),
    List(Rc<RefCell<Vec<Item>>>),
    Dict(Rc<RefCell<Vec<(Item, Item)>>>),
    Tuple(Rc<Vec<Item>>),
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, message: impl Into<String>) -> UnpickleError {
        UnpickleError {
            offset: self.pos,
            message: message.into(),
            truncated: false,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], UnpickleError> {
        if self.bytes.len() - self.pos < n {
            return Err(UnpickleError {
                offset: self.bytes.len(),
                message: "the pickle ends early (the file is truncated?)".into(),
                truncated: true,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, UnpickleError> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64, UnpickleError> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn len(&mut self, n: usize) -> Result<usize, UnpickleError> {
        let v = self.le(n)?;
        let left = (self.bytes.len() - self.pos) as u64;
        if v > left {
            return Err(UnpickleError {
                offset: self.bytes.len(),
                message: format!(
                    "the pickle ends early: a length of {v} bytes runs past its end (the file is truncated?)"
                ),
                truncated: true,
            });
        }
        Ok(v as usize)
    }

    fn line(&mut self) -> Result<&'a str, UnpickleError> {
        let rest = &self.bytes[self.pos..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(UnpickleError {
                offset: self.bytes.len(),
                message: "the pickle ends early (the file is truncated?)".into(),
                truncated: true,
            });
        };
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end]).map_err(|_| self.err("a text argument is not UTF-8"))
    }
}

/// Every mutable container the decoding made. A pickle can put a container inside
/// itself (through the memo, or DUP): a list that holds itself is a cycle of `Rc`s, which
/// would never be freed. Dropping the arena empties every container, so such cycles are
/// freed whether decoding succeeded or failed (the decoded [`Value`] shares nothing with
/// them).
#[derive(Default)]
struct Arena(Vec<Item>);

impl Arena {
    fn list(&mut self, items: Vec<Item>) -> Item {
        let rc = Rc::new(RefCell::new(items));
        #[cfg(test)]
        tests::CREATED.with(|c| c.borrow_mut().push(Rc::downgrade(&rc)));
        let l = Item::List(rc);
        self.0.push(l.clone());
        l
    }

    fn dict(&mut self, pairs: Vec<(Item, Item)>) -> Item {
        let d = Item::Dict(Rc::new(RefCell::new(pairs)));
        self.0.push(d.clone());
        d
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for item in &self.0 {
            match item {
                Item::List(l) => l.borrow_mut().clear(),
                Item::Dict(d) => d.borrow_mut().clear(),
                Item::Mark | Item::Done(_) | Item::Tuple(_) => {}
            }
        }
    }
}

/// Decodes one pickle (trailing bytes after its STOP are an error).
pub fn unpickle(bytes: &[u8]) -> Result<Value, UnpickleError> {
    let mut r = Reader { bytes, pos: 0 };
    let mut stack: Vec<Item> = Vec::new();
    let mut memo: HashMap<u64, Item> = HashMap::new();
    let mut arena = Arena::default();
    loop {
        let at = r.pos;
        let op = r.u8()?;
        let pop = |stack: &mut Vec<Item>, r: &Reader<'_>| -> Result<Item, UnpickleError> {
            match stack.pop() {
                Some(Item::Mark) | None => {
                    Err(r.err("the pickle's stack is empty where a value was expected"))
                }
                Some(i) => Ok(i),
            }
        };
        let pop_mark =
            |stack: &mut Vec<Item>, r: &Reader<'_>| -> Result<Vec<Item>, UnpickleError> {
                let Some(m) = stack.iter().rposition(|i| matches!(i, Item::Mark)) else {
                    return Err(r.err("no MARK on the pickle's stack"));
                };
                let items = stack.split_off(m + 1);
                stack.pop();
                Ok(items)
            };
        let done = |v: Value| Item::Done(v);
        match op {
            0x80 => {
                let proto = r.u8()?;
                if proto > 5 {
                    return Err(r.err(format!(
                        "pickle protocol {proto} is newer than this reader knows (0 to 5)"
                    )));
                }
            }
            0x95 => {
                r.take(8)?; // FRAME: a length hint
            }
            b'.' => {
                let top = pop(&mut stack, &r)?;
                if r.pos != bytes.len() {
                    return Err(r.err(format!(
                        "{} bytes follow the end of the pickle",
                        bytes.len() - r.pos
                    )));
                }
                return freeze(&top, &mut HashMap::new(), 0).map_err(|m| UnpickleError {
                    offset: at,
                    message: m,
                    truncated: false,
                });
            }
            b'(' => stack.push(Item::Mark),
            b'0' => {
                pop(&mut stack, &r)?;
            }
            b'1' => {
                pop_mark(&mut stack, &r)?;
            }
            b'2' => {
                let top = stack
                    .last()
                    .cloned()
                    .ok_or_else(|| r.err("DUP of an empty stack"))?;
                stack.push(top);
            }
            b'N' => stack.push(done(Value::None)),
            0x88 => stack.push(done(Value::Bool(true))),
            0x89 => stack.push(done(Value::Bool(false))),
            b'J' => stack.push(done(Value::Int(r.le(4)? as u32 as i32 as i128))),
            b'K' => stack.push(done(Value::Int(r.u8()? as i128))),
            b'M' => stack.push(done(Value::Int(r.le(2)? as i128))),
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    r.u8()? as usize
                } else {
                    r.len(4)?
                };
                let b = r.take(n)?;
                if n > 16 {
                    return Err(r.err(format!("an integer of {n} bytes is too large")));
                }
                let mut v: i128 = 0;
                for (i, &byte) in b.iter().enumerate() {
                    v |= (byte as i128) << (8 * i);
                }
                if n > 0 && n < 16 && b[n - 1] & 0x80 != 0 {
                    v -= 1i128 << (8 * n);
                }
                stack.push(done(Value::Int(v)));
            }
            b'I' => {
                let line = r.line()?;
                let v = match line {
                    "01" => Value::Bool(true),
                    "00" => Value::Bool(false),
                    s => Value::Int(
                        s.trim()
                            .parse()
                            .map_err(|_| r.err(format!("bad INT `{s}`")))?,
                    ),
                };
                stack.push(done(v));
            }
            b'L' => {
                let line = r.line()?;
                let s = line.trim().trim_end_matches('L');
                stack.push(done(Value::Int(
                    s.parse().map_err(|_| r.err(format!("bad LONG `{line}`")))?,
                )));
            }
            b'F' => {
                let line = r.line()?;
                stack.push(done(Value::Float(
                    line.trim()
                        .parse()
                        .map_err(|_| r.err(format!("bad FLOAT `{line}`")))?,
                )));
            }
            b'G' => {
                let b = r.take(8)?;
                stack.push(done(Value::Float(f64::from_be_bytes(
                    b.try_into().expect("8 bytes"),
                ))));
            }
            b'X' | 0x8c | 0x8d => {
                let n = match op {
                    0x8c => r.len(1)?,
                    b'X' => r.len(4)?,
                    _ => r.len(8)?,
                };
                let b = r.take(n)?;
                let s = std::str::from_utf8(b).map_err(|_| r.err("a string is not UTF-8"))?;
                stack.push(done(Value::Str(s.into())));
            }
            b'V' => {
                let line = r.line()?;
                stack.push(done(Value::Str(unescape_raw_unicode(line).into())));
            }
            b'T' | b'U' => {
                let n = if op == b'U' { r.len(1)? } else { r.len(4)? };
                let b = r.take(n)?;
                stack.push(done(Value::Str(String::from_utf8_lossy(b).into())));
            }
            b'S' => {
                let line = r.line()?;
                let s = line.trim().trim_matches(|c| c == '\'' || c == '"');
                stack.push(done(Value::Str(s.into())));
            }
            b'B' | b'C' | 0x8e | 0x96 => {
                let n = match op {
                    b'C' => r.len(1)?,
                    b'B' => r.len(4)?,
                    _ => r.len(8)?,
                };
                stack.push(done(Value::Bytes(r.take(n)?.into())));
            }
            b']' => stack.push(arena.list(Vec::new())),
            0x8f => stack.push(arena.list(Vec::new())),
            b'l' => {
                let items = pop_mark(&mut stack, &r)?;
                stack.push(arena.list(items));
            }
            0x91 => {
                let items = pop_mark(&mut stack, &r)?;
                stack.push(Item::Tuple(Rc::new(items)));
            }
            b'a' => {
                let v = pop(&mut stack, &r)?;
                match stack.last() {
                    Some(Item::List(l)) => l.borrow_mut().push(v),
                    _ => return Err(r.err("APPEND to something that is not a list")),
                }
            }
            b'e' | 0x90 => {
                let items = pop_mark(&mut stack, &r)?;
                match stack.last() {
                    Some(Item::List(l)) => l.borrow_mut().extend(items),
                    _ => return Err(r.err("APPENDS to something that is not a list or set")),
                }
            }
            b')' => stack.push(Item::Tuple(Rc::new(Vec::new()))),
            b't' => {
                let items = pop_mark(&mut stack, &r)?;
                stack.push(Item::Tuple(Rc::new(items)));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    return Err(r.err("TUPLE of fewer values than it needs"));
                }
                let items = stack.split_off(stack.len() - n);
                if items.iter().any(|i| matches!(i, Item::Mark)) {
                    return Err(r.err("TUPLE across a MARK"));
                }
                stack.push(Item::Tuple(Rc::new(items)));
            }
            b'}' => stack.push(arena.dict(Vec::new())),
            b'd' => {
                let items = pop_mark(&mut stack, &r)?;
                let pairs = pairs(items).ok_or_else(|| r.err("DICT of an odd number of values"))?;
                stack.push(arena.dict(pairs));
            }
            b's' => {
                let v = pop(&mut stack, &r)?;
                let k = pop(&mut stack, &r)?;
                match stack.last() {
                    Some(Item::Dict(d)) => d.borrow_mut().push((k, v)),
                    _ => return Err(r.err("SETITEM on something that is not a dict")),
                }
            }
            b'u' => {
                let items = pop_mark(&mut stack, &r)?;
                let pairs =
                    pairs(items).ok_or_else(|| r.err("SETITEMS of an odd number of values"))?;
                match stack.last() {
                    Some(Item::Dict(d)) => d.borrow_mut().extend(pairs),
                    _ => return Err(r.err("SETITEMS on something that is not a dict")),
                }
            }
            b'p' | b'q' | b'r' | 0x94 => {
                let id = match op {
                    b'p' => r
                        .line()?
                        .trim()
                        .parse()
                        .map_err(|_| r.err("bad PUT index"))?,
                    b'q' => r.u8()? as u64,
                    b'r' => r.le(4)?,
                    _ => memo.len() as u64,
                };
                let top = stack
                    .last()
                    .cloned()
                    .ok_or_else(|| r.err("memoizing an empty stack"))?;
                if matches!(top, Item::Mark) {
                    return Err(r.err("memoizing a MARK"));
                }
                memo.insert(id, top);
            }
            b'g' | b'h' | b'j' => {
                let id = match op {
                    b'g' => r
                        .line()?
                        .trim()
                        .parse()
                        .map_err(|_| r.err("bad GET index"))?,
                    b'h' => r.u8()? as u64,
                    _ => r.le(4)?,
                };
                let v = memo
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| r.err(format!("memo entry {id} is missing")))?;
                stack.push(v);
            }
            b'c'
            | 0x93
            | b'R'
            | b'b'
            | b'i'
            | b'o'
            | 0x81
            | 0x92
            | 0x82..=0x84
            | b'P'
            | b'Q'
            | 0x97
            | 0x98 => {
                return Err(UnpickleError {
                    offset: at,
                    message: "the pickle holds Python objects (a class, a function or an object to rebuild), not only data; a memory snapshot from torch.cuda.memory._dump_snapshot holds dicts, lists, strings and numbers".into(),
                    truncated: false,
                });
            }
            other => {
                return Err(UnpickleError {
                    offset: at,
                    message: format!(
                        "byte {other:#04x} is not a pickle opcode: not a pickle, or a damaged one"
                    ),
                    truncated: false,
                });
            }
        }
    }
}

fn pairs(items: Vec<Item>) -> Option<Vec<(Item, Item)>> {
    if items.len() % 2 != 0 {
        return None;
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

/// Turns a built item into a value, sharing what the memo shared (by the address of
/// the container) and refusing cycles.
fn freeze(
    item: &Item,
    done: &mut HashMap<usize, Option<Value>>,
    depth: usize,
) -> Result<Value, String> {
    if depth > 512 {
        return Err("values nested more than 512 deep".into());
    }
    let key = match item {
        Item::List(l) => Rc::as_ptr(l) as *const () as usize,
        Item::Dict(d) => Rc::as_ptr(d) as *const () as usize,
        Item::Tuple(t) => Rc::as_ptr(t) as *const () as usize,
        Item::Done(v) => return Ok(v.clone()),
        Item::Mark => return Err("a MARK left on the stack".into()),
    };
    match done.get(&key) {
        Some(Some(v)) => return Ok(v.clone()),
        Some(None) => return Err("a container holds itself (a recursive structure)".into()),
        None => {}
    }
    done.insert(key, None);
    let v = match item {
        Item::List(l) => Value::List(
            l.borrow()
                .iter()
                .map(|i| freeze(i, done, depth + 1))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        Item::Tuple(t) => Value::List(
            t.iter()
                .map(|i| freeze(i, done, depth + 1))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        Item::Dict(d) => Value::Dict(
            d.borrow()
                .iter()
                .map(|(k, v)| Ok((freeze(k, done, depth + 1)?, freeze(v, done, depth + 1)?)))
                .collect::<Result<Vec<_>, String>>()?
                .into(),
        ),
        Item::Done(_) | Item::Mark => unreachable!("handled above"),
    };
    done.insert(key, Some(v.clone()));
    Ok(v)
}

/// Python's raw-unicode-escape (protocol 0's UNICODE): `\uXXXX` and `\UXXXXXXXX`.
fn unescape_raw_unicode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('u') | Some('U')) {
            let n = if chars.next() == Some('u') { 4 } else { 8 };
            let hex: String = chars.by_ref().take(n).collect();
            match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                Some(ch) => out.push(ch),
                None => {
                    out.push('\\');
                    out.push_str(&hex);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
