//! [`StoreClient`]: one connection to a rendezvous store (gpuscope's own
//! [`StoreServer`](super::StoreServer), or PyTorch's `TCPStore`, e.g. the one `torchrun`'s
//! agent hosts).

use std::io::{self, BufReader, BufWriter, ErrorKind};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::wire::{self, Query, Request};
use crate::dist::DistError;

/// How often a refused connection is retried while the store starts.
const RETRY: Duration = Duration::from_millis(50);

struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
}

/// A connection to a rendezvous store: `set`, `get` (waiting for the key), `add`,
/// `wait`, `check`. Thread safe (one request at a time).
///
/// ```
/// use gpuscope_runtime::dist::{StoreClient, StoreServer};
/// use std::time::Duration;
///
/// let server = StoreServer::bind("127.0.0.1", 0).unwrap(); // port 0: any free port
/// let a = StoreClient::connect("127.0.0.1", server.port(), Duration::from_secs(5)).unwrap();
/// let b = StoreClient::connect("127.0.0.1", server.port(), Duration::from_secs(5)).unwrap();
/// a.set("greeting", b"hello").unwrap();
/// assert_eq!(b.get("greeting").unwrap(), b"hello");
/// assert_eq!(a.add("joined", 1).unwrap(), 1);
/// assert_eq!(b.add("joined", 1).unwrap(), 2);
/// ```
pub struct StoreClient {
    conn: Mutex<Conn>,
    addr: String,
    timeout: Duration,
}

impl std::fmt::Debug for StoreClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreClient")
            .field("addr", &self.addr)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl StoreClient {
    /// Connects to the store at `host:port`, retrying while the connection is refused
    /// (the store may not have started yet) for up to `timeout`, which is also the
    /// default time [`get`](Self::get) and [`wait`](Self::wait) wait for a key.
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<StoreClient, DistError> {
        let addr = format!("{host}:{port}");
        let start = Instant::now();
        let stream = loop {
            let attempt = (host, port).to_socket_addrs().and_then(|mut addrs| {
                let first = addrs.next().ok_or_else(|| {
                    io::Error::new(ErrorKind::NotFound, "the host name resolves to no address")
                })?;
                let left = timeout.saturating_sub(start.elapsed()).max(RETRY);
                TcpStream::connect_timeout(&first, left)
            });
            match attempt {
                Ok(s) => break s,
                Err(e) if start.elapsed() >= timeout || !retryable(&e) => {
                    return Err(DistError::Connect {
                        addr,
                        waited: start.elapsed(),
                        source: e,
                    });
                }
                Err(_) => std::thread::sleep(RETRY),
            }
        };
        let io = |source| DistError::Io {
            addr: addr.clone(),
            source,
        };
        stream.set_nodelay(true).map_err(io)?;
        let conn = Conn {
            reader: BufReader::new(stream.try_clone().map_err(io)?),
            writer: BufWriter::new(stream),
        };
        let client = StoreClient {
            conn: Mutex::new(conn),
            addr,
            timeout,
        };
        client.handshake()?;
        Ok(client)
    }

    /// `host:port` of the store.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The default timeout of [`get`](Self::get) and [`wait`](Self::wait).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn handshake(&self) -> Result<(), DistError> {
        let nonce = std::process::id();
        let got = self.request(|c| {
            Request::new(Query::Validate)
                .u32(wire::VALIDATION_MAGIC)
                .send(&mut c.writer)?;
            Request::new(Query::Ping).u32(nonce).send(&mut c.writer)?;
            wire::read_u32(&mut c.reader)
        })?;
        if got != nonce {
            return Err(self.protocol(format!(
                "answered the ping with {got}, not {nonce}: not a rendezvous store"
            )));
        }
        Ok(())
    }

    /// Sets `key` to `value` (waking everyone waiting for it).
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), DistError> {
        self.request(|c| {
            Request::new(Query::Set)
                .key(key)
                .bytes(value)
                .send(&mut c.writer)
        })
    }

    /// The value of `key`, waiting up to the client's timeout for it to be set.
    pub fn get(&self, key: &str) -> Result<Vec<u8>, DistError> {
        self.wait(&[key], self.timeout)?;
        self.request(|c| {
            Request::new(Query::Get).key(key).send(&mut c.writer)?;
            wire::read_bytes(&mut c.reader, wire::MAX_VALUE, "a value")
        })
    }

    /// Adds `delta` to the integer at `key` (0 when unset) and returns the new value.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64, DistError> {
        self.request(|c| {
            Request::new(Query::Add)
                .key(key)
                .i64(delta)
                .send(&mut c.writer)?;
            wire::read_i64(&mut c.reader)
        })
    }

    /// Whether every key in `keys` is set (never waits).
    pub fn check(&self, keys: &[&str]) -> Result<bool, DistError> {
        let reply = self.request(|c| {
            keys_request(Query::Check, keys).send(&mut c.writer)?;
            wire::read_u8(&mut c.reader)
        })?;
        match reply {
            wire::CHECK_READY => Ok(true),
            wire::CHECK_NOT_READY => Ok(false),
            other => Err(self.protocol(format!("answered CHECK with {other}"))),
        }
    }

    /// Waits until every key in `keys` is set, for at most `timeout`.
    pub fn wait(&self, keys: &[&str], timeout: Duration) -> Result<(), DistError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let c = &mut *conn;
        keys_request(Query::Wait, keys)
            .send(&mut c.writer)
            .map_err(|e| self.io(e))?;
        c.reader
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(|e| self.io(e))?;
        let first = wire::read_u8(&mut c.reader);
        c.reader
            .get_ref()
            .set_read_timeout(None)
            .map_err(|e| self.io(e))?;
        match first {
            Ok(wire::WAIT_STOP_WAITING) => return Ok(()),
            Ok(other) => return Err(self.protocol(format!("answered WAIT with {other}"))),
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(self.io(e));
            }
            Err(_) => {}
        }
        // Timed out: cancel the wait, as PyTorch's client does, so the connection stays
        // usable. The store may have answered just before it saw the cancel.
        Request::new(Query::CancelWait)
            .send(&mut c.writer)
            .map_err(|e| self.io(e))?;
        let mut reply = wire::read_u8(&mut c.reader).map_err(|e| self.io(e))?;
        if reply == wire::WAIT_STOP_WAITING {
            reply = wire::read_u8(&mut c.reader).map_err(|e| self.io(e))?;
        }
        if reply != wire::WAIT_CANCELED {
            return Err(self.protocol(format!("answered CANCEL_WAIT with {reply}")));
        }
        Err(DistError::Timeout {
            what: format!("key(s) {keys:?} in the rendezvous store at {}", self.addr),
            after: timeout,
        })
    }

    fn request<T>(&self, f: impl FnOnce(&mut Conn) -> io::Result<T>) -> Result<T, DistError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn).map_err(|e| self.io(e))
    }

    fn io(&self, source: io::Error) -> DistError {
        if matches!(
            source.kind(),
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ) {
            return self.protocol(
                "closed the connection (the store stopped, or it refused a request)".into(),
            );
        }
        DistError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    fn protocol(&self, detail: String) -> DistError {
        DistError::Protocol {
            addr: self.addr.clone(),
            detail,
        }
    }
}

fn keys_request(q: Query, keys: &[&str]) -> Request {
    keys.iter()
        .fold(Request::new(q).u64(keys.len() as u64), |r, k| r.key(k))
}

/// Errors that mean "the store is not up yet" rather than "never will be".
fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::TimedOut
            | ErrorKind::WouldBlock
            | ErrorKind::AddrNotAvailable
            | ErrorKind::Interrupted
    )
}
