//! The rendezvous store: a small key-value server that the ranks of a job meet at
//! (to agree on an NCCL id, count who has joined, and tell who is missing).
//!
//! - [`wire`]: the protocol (PyTorch's `TCPStore` protocol, the subset used here);
//! - [`StoreClient`]: a connection, with timeouts on every wait;
//! - [`StoreServer`]: gpuscope's store, one thread per connection.

mod client;
mod server;
pub mod wire;

pub use client::StoreClient;
pub use server::StoreServer;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn pair() -> (StoreServer, StoreClient, StoreClient) {
        let server = StoreServer::bind("127.0.0.1", 0).unwrap();
        let t = Duration::from_secs(5);
        let a = StoreClient::connect("127.0.0.1", server.port(), t).unwrap();
        let b = StoreClient::connect("127.0.0.1", server.port(), t).unwrap();
        (server, a, b)
    }

    #[test]
    fn get_waits_for_a_key_another_client_sets_later() {
        let (_server, a, b) = pair();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            a.set("id", &[1, 2, 3]).unwrap();
        });
        assert_eq!(b.get("id").unwrap(), vec![1, 2, 3]);
        setter.join().unwrap();
    }

    #[test]
    fn a_wait_times_out_and_the_connection_stays_usable() {
        let (_server, a, b) = pair();
        let start = Instant::now();
        let e = b.wait(&["never"], Duration::from_millis(150)).unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(150));
        assert!(e.to_string().contains("timed out"), "{e}");
        assert!(e.to_string().contains("never"), "{e}");
        a.set("k", b"v").unwrap();
        assert_eq!(b.get("k").unwrap(), b"v");
        assert!(b.check(&["k"]).unwrap());
        assert!(!b.check(&["k", "never"]).unwrap());
    }

    #[test]
    fn add_counts_across_clients_and_threads() {
        let (_server, a, b) = pair();
        let a = std::sync::Arc::new(a);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        a.add("n", 1).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(b.add("n", 0).unwrap(), 100);
        assert_eq!(b.get("n").unwrap(), b"100"); // stored as decimal text, as PyTorch does
    }

    #[test]
    fn connecting_retries_until_the_store_starts() {
        // Find a free port, then start the store on it a little later.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            StoreServer::bind("127.0.0.1", port).unwrap()
        });
        let c = StoreClient::connect("127.0.0.1", port, Duration::from_secs(10)).unwrap();
        c.set("x", b"1").unwrap();
        drop(server.join().unwrap());
    }

    #[test]
    fn no_store_is_a_connect_error_naming_the_address() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = StoreClient::connect("127.0.0.1", port, Duration::from_millis(200)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.contains("MASTER_ADDR"), "{text}");
    }

    #[test]
    fn a_peer_that_is_not_a_store_is_a_protocol_error() {
        // A server that accepts and closes at once.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            drop(s);
        });
        let e = StoreClient::connect("127.0.0.1", port, Duration::from_secs(2)).unwrap_err();
        assert!(e.to_string().contains("closed the connection"), "{e}");
        t.join().unwrap();
    }

    #[test]
    fn garbage_on_a_connection_closes_only_that_connection() {
        use std::io::Write;
        let (server, a, _b) = pair();
        let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
        raw.write_all(&[0xff; 64]).unwrap();
        raw.write_all(&u64::MAX.to_le_bytes()).unwrap();
        drop(raw);
        a.set("still", b"fine").unwrap();
        assert_eq!(a.get("still").unwrap(), b"fine");
    }
}
