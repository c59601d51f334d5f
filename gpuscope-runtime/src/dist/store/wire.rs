//! The store's wire format: PyTorch's `c10d::TCPStore` protocol (the subset gpuscope
//! uses). A request is a one-byte query type followed by its arguments; integers are
//! little-endian; a string or byte string is a `u64` length and the bytes.
//!
//! The query numbers are PyTorch's (`TCPStoreBackend.hpp`, since 2.4); keeping them lets
//! a gpuscope process use the store that `torchrun`'s agent hosts, and a PyTorch process
//! use gpuscope's.

use std::io::{self, Read, Write};

/// Sent with [`Query::Validate`] as the first message of every connection.
pub const VALIDATION_MAGIC: u32 = 0x3C85_F7CE;

/// What PyTorch's `TCPStore` client puts before every key it is given (`keyPrefix_`
/// in `TCPStore.hpp`): `store.set("k", ..)` in Python sends the key `/k`. gpuscope's
/// client does the same, so both name a key alike.
pub const KEY_PREFIX: &str = "/";

/// Longest key accepted (bytes): keys are short names; a longer one is hostile input.
pub const MAX_KEY: u64 = 64 * 1024;
/// Largest value accepted (bytes).
pub const MAX_VALUE: u64 = 64 * 1024 * 1024;
/// Most keys in one `WAIT` or `CHECK`.
pub const MAX_KEYS: u64 = 1 << 16;

/// A request's type byte.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Query {
    /// `u32` magic; no reply.
    Validate = 0,
    /// key, value; no reply.
    Set = 1,
    /// key (after a wait); reply: value.
    Get = 3,
    /// key, `i64` delta; reply: the new `i64` value (the value is stored as decimal text).
    Add = 4,
    /// `u64` count, keys; reply: [`CHECK_READY`] or [`CHECK_NOT_READY`].
    Check = 5,
    /// `u64` count, keys; reply: [`WAIT_STOP_WAITING`] once all are set.
    Wait = 6,
    /// no arguments; reply: [`WAIT_CANCELED`] (after any pending stop-waiting).
    CancelWait = 12,
    /// `u32` nonce; reply: the nonce.
    Ping = 13,
}

impl Query {
    /// The query for a type byte, if gpuscope's store serves it.
    pub fn from_byte(b: u8) -> Option<Query> {
        Some(match b {
            0 => Query::Validate,
            1 => Query::Set,
            3 => Query::Get,
            4 => Query::Add,
            5 => Query::Check,
            6 => Query::Wait,
            12 => Query::CancelWait,
            13 => Query::Ping,
            _ => return None,
        })
    }
}

/// Reply to `CHECK`: all keys are set.
pub const CHECK_READY: u8 = 0;
/// Reply to `CHECK`: some key is not set.
pub const CHECK_NOT_READY: u8 = 1;
/// Reply to `WAIT`: all keys are set.
pub const WAIT_STOP_WAITING: u8 = 0;
/// Reply to `CANCEL_WAIT`.
pub const WAIT_CANCELED: u8 = 1;

/// Builds one request in memory so that it goes out in one write.
#[derive(Default)]
pub struct Request(Vec<u8>);

impl Request {
    /// A request of type `q`.
    pub fn new(q: Query) -> Request {
        Request(vec![q as u8])
    }

    /// Appends a byte.
    pub fn u8(mut self, v: u8) -> Request {
        self.0.push(v);
        self
    }

    /// Appends a `u32`.
    pub fn u32(mut self, v: u32) -> Request {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a `u64`.
    pub fn u64(mut self, v: u64) -> Request {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends an `i64`.
    pub fn i64(mut self, v: i64) -> Request {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(self, b: &[u8]) -> Request {
        let mut r = self.u64(b.len() as u64);
        r.0.extend_from_slice(b);
        r
    }

    /// Appends a key as PyTorch's `TCPStore` sends it: with [`KEY_PREFIX`] before it.
    pub fn key(self, key: &str) -> Request {
        let mut r = self.u64((KEY_PREFIX.len() + key.len()) as u64);
        r.0.extend_from_slice(KEY_PREFIX.as_bytes());
        r.0.extend_from_slice(key.as_bytes());
        r
    }

    /// Writes the request.
    pub fn send(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.0)?;
        w.flush()
    }
}

/// Reads one byte.
pub fn read_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

/// Reads a little-endian `u32`.
pub fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads a little-endian `u64`.
pub fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Reads a little-endian `i64`.
pub fn read_i64(r: &mut impl Read) -> io::Result<i64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(i64::from_le_bytes(b))
}

/// Reads a length-prefixed byte string of at most `max` bytes (a longer length is an
/// `InvalidData` error, read no further: the peer is not speaking the protocol).
pub fn read_bytes(r: &mut impl Read, max: u64, what: &str) -> io::Result<Vec<u8>> {
    let len = read_u64(r)?;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what} of {len} bytes announced (at most {max} accepted)"),
        ));
    }
    let mut v = vec![0u8; len as usize];
    r.read_exact(&mut v)?;
    Ok(v)
}

/// Reads a key (a length-prefixed UTF-8 string).
pub fn read_key(r: &mut impl Read) -> io::Result<String> {
    let b = read_bytes(r, MAX_KEY, "a key")?;
    String::from_utf8(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a key that is not UTF-8"))
}

/// Reads a `u64` count and that many keys.
pub fn read_keys(r: &mut impl Read) -> io::Result<Vec<String>> {
    let n = read_u64(r)?;
    if n > MAX_KEYS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{n} keys announced (at most {MAX_KEYS} accepted)"),
        ));
    }
    (0..n).map(|_| read_key(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_the_type_byte_then_little_endian_fields() {
        let r = Request::new(Query::Add).bytes(b"k").i64(-2);
        let mut out = Vec::new();
        r.send(&mut out).unwrap();
        assert_eq!(out[0], 4);
        assert_eq!(&out[1..9], &1u64.to_le_bytes());
        assert_eq!(out[9], b'k');
        assert_eq!(&out[10..], &(-2i64).to_le_bytes());
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocating() {
        let mut input: &[u8] = &u64::MAX.to_le_bytes();
        let e = read_bytes(&mut input, MAX_VALUE, "a value").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("18446744073709551615"));
        let mut input: &[u8] = &(MAX_KEYS + 1).to_le_bytes();
        assert!(read_keys(&mut input).is_err());
    }

    #[test]
    fn keys_go_out_as_pytorchs_tcpstore_sends_them() {
        // `TCPStore.set("k", b"v")` in Python sends: SET, the key `/k`, the value.
        let request = Request::new(Query::Set).key("k").bytes(b"v");
        let mut sent = Vec::new();
        request.send(&mut sent).unwrap();
        let mut expected = vec![1u8];
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(b"/k");
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"v");
        assert_eq!(sent, expected);
    }

    #[test]
    fn query_bytes_round_trip() {
        for q in [
            Query::Validate,
            Query::Set,
            Query::Get,
            Query::Add,
            Query::Check,
            Query::Wait,
            Query::CancelWait,
            Query::Ping,
        ] {
            assert_eq!(Query::from_byte(q as u8), Some(q));
        }
        assert_eq!(Query::from_byte(2), None); // COMPARE_SET: not served
        assert_eq!(Query::from_byte(200), None);
    }
}
