//! [`StoreServer`]: gpuscope's rendezvous store, speaking the subset of PyTorch's
//! `TCPStore` protocol that [`StoreClient`](super::StoreClient) uses (so PyTorch clients
//! can use it too). One thread per connection: a store serves one process per rank.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, ErrorKind};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::wire::{self, Query, Request};
use crate::dist::DistError;

/// How often blocked threads look at the shutdown flag and at cancelled waits.
const POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Shared {
    values: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
    stop: AtomicBool,
    /// Connections being served (the drop waits a little for them to close).
    open: AtomicUsize,
}

/// How long a dropped store waits for its clients to hang up: a rank that is still
/// reading (the list of missing ranks, a last barrier) gets its answer.
const LINGER: Duration = Duration::from_secs(2);

/// A rendezvous store listening on a TCP port, served by background threads until it
/// is dropped. See [`StoreClient`](super::StoreClient) for an example.
pub struct StoreServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StoreServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl StoreServer {
    /// Listens on `host:port` (`port` 0: a free port, see [`port`](Self::port)).
    pub fn bind(host: &str, port: u16) -> Result<StoreServer, DistError> {
        let listener = TcpListener::bind((host, port)).map_err(|source| DistError::Bind {
            addr: format!("{host}:{port}"),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| DistError::Bind {
            addr: format!("{host}:{port}"),
            source,
        })?;
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("gpuscope-store".into())
                .spawn(move || accept_loop(listener, shared))
                .map_err(|source| DistError::Bind {
                    addr: addr.to_string(),
                    source,
                })?
        };
        Ok(StoreServer {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        let start = std::time::Instant::now();
        while self.shared.open.load(Ordering::Acquire) > 0 && start.elapsed() < LINGER {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
        // Wake the blocking accept with a connection of our own.
        let wake = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => {
                SocketAddr::from(([127, 0, 0, 1], a.port()))
            }
            a => a,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = Vec::new();
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(stream) = stream else { continue };
        shared.open.fetch_add(1, Ordering::AcqRel);
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("gpuscope-store-conn".into())
            .spawn(move || {
                let served = serve(stream, &conn_shared);
                conn_shared.open.fetch_sub(1, Ordering::AcqRel);
                if let Err(e) = served {
                    if !matches!(e.kind(), ErrorKind::UnexpectedEof) {
                        tracing::debug!(target: "gpuscope::dist", error = %e, "store connection closed");
                    }
                }
            });
        match spawned {
            Ok(t) => conns.push(t),
            Err(_) => {
                shared.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        conns.retain(|t| !t.is_finished());
    }
    for t in conns {
        let _ = t.join();
    }
}

/// Serves one connection until the peer closes it, breaks the protocol, or the store
/// stops. The first request must be `VALIDATE` with the magic number.
fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let mut validated = false;
    loop {
        let byte = match wire::read_u8(&mut reader) {
            Ok(b) => b,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if shared.stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        // A request's arguments follow its type byte at once: read them blocking.
        reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(30)))?;
        let query = Query::from_byte(byte).ok_or_else(|| invalid(format!("query {byte}")))?;
        if !validated && query != Query::Validate {
            return Err(invalid("a first request that is not VALIDATE".into()));
        }
        match query {
            Query::Validate => {
                if wire::read_u32(&mut reader)? != wire::VALIDATION_MAGIC {
                    return Err(invalid("a wrong validation number".into()));
                }
                validated = true;
            }
            Query::Ping => {
                let nonce = wire::read_u32(&mut reader)?;
                reply(&mut writer, Request::default().u32(nonce))?;
            }
            Query::Set => {
                let key = wire::read_key(&mut reader)?;
                let value = wire::read_bytes(&mut reader, wire::MAX_VALUE, "a value")?;
                lock(shared).insert(key, value);
                shared.changed.notify_all();
            }
            Query::Get => {
                let key = wire::read_key(&mut reader)?;
                let value = lock(shared).get(&key).cloned();
                // PyTorch's store fails the connection for a missing key; so does this one.
                let value = value.ok_or_else(|| invalid(format!("GET of unset key {key:?}")))?;
                reply(&mut writer, Request::default().bytes(&value))?;
            }
            Query::Add => {
                let key = wire::read_key(&mut reader)?;
                let delta = wire::read_i64(&mut reader)?;
                let new = {
                    let mut values = lock(shared);
                    let old = match values.get(&key) {
                        None => 0,
                        Some(v) => std::str::from_utf8(v)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                            .ok_or_else(|| invalid(format!("ADD to non-integer key {key:?}")))?,
                    };
                    let new = old
                        .checked_add(delta)
                        .ok_or_else(|| invalid(format!("ADD overflows key {key:?}")))?;
                    values.insert(key, new.to_string().into_bytes());
                    new
                };
                shared.changed.notify_all();
                reply(&mut writer, Request::default().i64(new))?;
            }
            Query::Check => {
                let keys = wire::read_keys(&mut reader)?;
                let ready = all_set(shared, &keys);
                let answer = if ready {
                    wire::CHECK_READY
                } else {
                    wire::CHECK_NOT_READY
                };
                reply(&mut writer, Request::default().u8(answer))?;
            }
            Query::Wait => {
                let keys = wire::read_keys(&mut reader)?;
                wait(&mut reader, &mut writer, shared, &keys)?;
            }
            // A cancel that arrives after its wait was answered: answer it alone.
            Query::CancelWait => reply(&mut writer, Request::default().u8(wire::WAIT_CANCELED))?,
        }
        reader.get_ref().set_read_timeout(Some(POLL))?;
    }
}

/// Answers a `WAIT` once all `keys` are set, or `WAIT_CANCELED` when the client
/// cancels first.
fn wait(
    reader: &mut BufReader<TcpStream>,
    writer: &mut BufWriter<TcpStream>,
    shared: &Shared,
    keys: &[String],
) -> io::Result<()> {
    let mut values = lock(shared);
    loop {
        if keys.iter().all(|k| values.contains_key(k)) {
            drop(values);
            return reply(writer, Request::default().u8(wire::WAIT_STOP_WAITING));
        }
        if shared.stop.load(Ordering::Acquire) {
            return Err(io::Error::new(ErrorKind::UnexpectedEof, "store stopped"));
        }
        values = shared
            .changed
            .wait_timeout(values, POLL)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        // Anything the client sends while waiting can only be CANCEL_WAIT.
        if readable(reader)? {
            drop(values);
            let byte = wire::read_u8(reader)?;
            if Query::from_byte(byte) != Some(Query::CancelWait) {
                return Err(invalid(format!("query {byte} during a WAIT")));
            }
            return reply(writer, Request::default().u8(wire::WAIT_CANCELED));
        }
    }
}

/// Whether the client has sent something (without blocking).
fn readable(reader: &mut BufReader<TcpStream>) -> io::Result<bool> {
    if !reader.buffer().is_empty() {
        return Ok(true);
    }
    let s = reader.get_ref();
    s.set_nonblocking(true)?;
    let mut b = [0u8; 1];
    let r = s.peek(&mut b);
    s.set_nonblocking(false)?;
    match r {
        Ok(0) => Err(io::Error::new(ErrorKind::UnexpectedEof, "client closed")),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

fn all_set(shared: &Shared, keys: &[String]) -> bool {
    let values = lock(shared);
    keys.iter().all(|k| values.contains_key(k))
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
    shared.values.lock().unwrap_or_else(|e| e.into_inner())
}

fn reply(w: &mut BufWriter<TcpStream>, r: Request) -> io::Result<()> {
    r.send(w)
}

fn invalid(what: String) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidData,
        format!("protocol violation: {what}"),
    )
}
