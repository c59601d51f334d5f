//! Reading a decoded pickle ([`Value`]) with errors that say where: every
//! accessor takes the path of the value it reads (`device_traces[0][12].size`), so a
//! malformed snapshot is reported as "`device_traces[0][12].size`: expected an integer,
//! found a string", and unknown keys are collected for one note.

use std::collections::BTreeSet;

use crate::view_unpickle::Value;

/// What is wrong at a path of the pickle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// Where (`segments[2].blocks[0].state`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.path, self.message)
    }
}

pub type Result<T> = std::result::Result<T, Malformed>;

/// The name of a value's Python type, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "a bool",
        Value::Int(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Bytes(_) => "bytes",
        Value::Str(_) => "a string",
        Value::List(_) => "a list",
        Value::Dict(_) => "a dict",
    }
}

fn wrong(path: &str, expected: &str, v: &Value) -> Malformed {
    Malformed {
        path: path.to_string(),
        message: format!("expected {expected}, found {}", type_name(v)),
    }
}

/// A dict with string keys, and the keys its reader did not ask for.
pub struct Dict<'a> {
    pub path: String,
    map: &'a [(Value, Value)],
}

impl<'a> Dict<'a> {
    /// `v` as a dict.
    pub fn new(v: &'a Value, path: String) -> Result<Dict<'a>> {
        match v {
            Value::Dict(map) => Ok(Dict { path, map }),
            other => Err(wrong(&path, "a dict", other)),
        }
    }

    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value at `key`, if present (and not `None`).
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        let v = self
            .map
            .iter()
            .find(|(k, _)| matches!(k, Value::Str(s) if &**s == key))
            .map(|(_, v)| v);
        match v {
            None | Some(Value::None) => None,
            Some(v) => Some(v),
        }
    }

    /// The value at `key`; an error naming it when it is missing.
    pub fn need(&self, key: &str) -> Result<&'a Value> {
        self.get(key).ok_or_else(|| Malformed {
            path: self.key_path(key),
            message: "missing".into(),
        })
    }

    /// A non-negative integer at `key`.
    pub fn u64(&self, key: &str) -> Result<u64> {
        as_u64(self.need(key)?, &self.key_path(key))
    }

    /// A non-negative integer at `key`, if present.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| as_u64(v, &self.key_path(key)))
            .transpose()
    }

    /// An integer at `key` (PyTorch's streams are pointers: may be any integer).
    pub fn int(&self, key: &str) -> Result<Option<i128>> {
        self.get(key)
            .map(|v| as_int(v, &self.key_path(key)))
            .transpose()
    }

    /// A string at `key`.
    pub fn str(&self, key: &str) -> Result<&'a str> {
        let p = self.key_path(key);
        match self.need(key)? {
            Value::Str(s) => Ok(s),
            other => Err(wrong(&p, "a string", other)),
        }
    }

    /// A list at `key` (`[]` when absent).
    pub fn list(&self, key: &str) -> Result<(&'a [Value], String)> {
        let p = self.key_path(key);
        match self.get(key) {
            None => Ok((&[], p)),
            Some(Value::List(l)) => Ok((l, p)),
            Some(other) => Err(wrong(&p, "a list", other)),
        }
    }

    /// Adds the keys that are not in `known` to `unknown`, as `what.key`.
    pub fn note_unknown(&self, what: &str, known: &[&str], unknown: &mut BTreeSet<String>) {
        for (k, _) in self.map {
            let name = match k {
                Value::Str(s) => s.to_string(),
                other => format!("{other:?}"),
            };
            if !known.contains(&name.as_str()) {
                unknown.insert(format!("{what}.{name}"));
            }
        }
    }
}

/// `v` as a non-negative integer.
pub fn as_u64(v: &Value, path: &str) -> Result<u64> {
    let i = as_int(v, path)?;
    u64::try_from(i).map_err(|_| Malformed {
        path: path.to_string(),
        message: format!("expected a non-negative integer, found {i}"),
    })
}

/// `v` as an integer (a bool is not one).
pub fn as_int(v: &Value, path: &str) -> Result<i128> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(wrong(path, "an integer", other)),
    }
}

/// `v` as a list.
pub fn as_list<'a>(v: &'a Value, path: &str) -> Result<&'a [Value]> {
    match v {
        Value::List(l) => Ok(l),
        other => Err(wrong(path, "a list", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(pairs: Vec<(&str, Value)>) -> Value {
        Value::Dict(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::Str(k.into()), v))
                .collect::<Vec<_>>()
                .into(),
        )
    }

    #[test]
    fn errors_name_the_path_and_the_types() {
        let v = dict(vec![
            ("size", Value::Str("big".into())),
            ("addr", Value::Int(-4)),
            ("n", Value::None),
        ]);
        let d = Dict::new(&v, "device_traces[0][3]".into()).unwrap();
        assert_eq!(
            d.u64("size").unwrap_err().to_string(),
            "`device_traces[0][3].size`: expected an integer, found a string"
        );
        assert_eq!(
            d.u64("addr").unwrap_err().to_string(),
            "`device_traces[0][3].addr`: expected a non-negative integer, found -4"
        );
        assert_eq!(
            d.u64("n").unwrap_err().to_string(),
            "`device_traces[0][3].n`: missing"
        );
        assert_eq!(d.opt_u64("n").unwrap(), None);
        let mut unknown = BTreeSet::new();
        d.note_unknown("event", &["size", "addr"], &mut unknown);
        assert_eq!(unknown.into_iter().collect::<Vec<_>>(), ["event.n"]);
        assert_eq!(
            Dict::new(&Value::List(vec![].into()), "x".into())
                .err()
                .unwrap()
                .to_string(),
            "`x`: expected a dict, found a list"
        );
    }
}
