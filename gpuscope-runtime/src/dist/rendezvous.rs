//! [`Rendezvous`]: the ranks of a job meet at the store, check that everyone came, and
//! share small values (the NCCL id).

use std::time::Duration;

use super::DistError;
use super::env::LaunchEnv;
use super::store::{StoreClient, StoreServer};

/// This process's place in a job, with a connection to the job's store: rank 0 hosts
/// the store (unless `torchrun`'s agent already does), every rank connects, announces
/// itself, and waits for all the others; a rank that never comes is a
/// [`DistError::Timeout`] naming the missing ranks, on every rank that did.
///
/// ```
/// use gpuscope_runtime::dist::{LaunchEnv, Rendezvous};
/// use std::time::Duration;
///
/// // Two ranks, as two threads (in a real job: two processes, or two machines).
/// let port = { std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port() };
/// let env = move |rank| LaunchEnv {
///     rank, world_size: 2, local_rank: rank, master_addr: "127.0.0.1".into(),
///     master_port: port, agent_store: false, timeout: Duration::from_secs(10),
/// };
/// let other = std::thread::spawn(move || {
///     let r = Rendezvous::join(&env(1)).unwrap();
///     r.broadcast("token", None).unwrap()
/// });
/// let r0 = Rendezvous::join(&env(0)).unwrap();
/// assert_eq!(r0.broadcast("token", Some(b"from rank 0")).unwrap(), b"from rank 0");
/// assert_eq!(other.join().unwrap(), b"from rank 0");
/// ```
#[derive(Debug)]
pub struct Rendezvous {
    env: LaunchEnv,
    client: StoreClient,
    /// Keys of this rendezvous start with this (a store outlives jobs under `torchrun`).
    prefix: String,
    // Dropped last: the other ranks may still be talking to it.
    _server: Option<StoreServer>,
}

impl Rendezvous {
    /// Meets the other ranks of `env`'s job; waits up to `env.timeout` for all of them.
    pub fn join(env: &LaunchEnv) -> Result<Rendezvous, DistError> {
        let server = if env.rank == 0 && !env.agent_store {
            Some(StoreServer::bind("0.0.0.0", env.master_port)?)
        } else {
            None
        };
        let client = StoreClient::connect(&env.master_addr, env.master_port, env.timeout)?;
        // Several groups (or a restarted job under one agent store) each get fresh keys:
        // every rank counts the rendezvous it has joined, and all ranks join in order.
        let generation = client.add(&format!("gpuscope/joins/{}", env.rank), 1)?;
        let prefix = format!("gpuscope/{generation}");
        let me = format!("{}:{}", hostname(), std::process::id());
        client.set(&format!("{prefix}/rank/{}", env.rank), me.as_bytes())?;
        let r = Rendezvous {
            env: env.clone(),
            client,
            prefix,
            _server: server,
        };
        r.wait_for_ranks("join the rendezvous", |rank| {
            format!("{}/rank/{rank}", r.prefix)
        })?;
        Ok(r)
    }

    /// The launch environment.
    pub fn env(&self) -> &LaunchEnv {
        &self.env
    }

    /// The store connection, for the caller's own keys.
    pub fn store(&self) -> &StoreClient {
        &self.client
    }

    /// Rank 0 passes `Some(value)`, every other rank `None`; all return rank 0's value.
    pub fn broadcast(&self, name: &str, value: Option<&[u8]>) -> Result<Vec<u8>, DistError> {
        let key = format!("{}/value/{name}", self.prefix);
        match (self.env.rank, value) {
            (0, Some(v)) => {
                self.client.set(&key, v)?;
                Ok(v.to_vec())
            }
            (0, None) => Err(DistError::Argument {
                op: "broadcast",
                problem: "rank 0 must give the value".into(),
            }),
            _ => self.client.get(&key).map_err(|e| match e {
                DistError::Timeout { after, .. } => DistError::Timeout {
                    what: format!("rank 0 to publish `{name}` (is rank 0 still running?)"),
                    after,
                },
                e => e,
            }),
        }
    }

    /// Waits until every rank has reached the barrier called `name`.
    pub fn barrier(&self, name: &str) -> Result<(), DistError> {
        let base = format!("{}/barrier/{name}", self.prefix);
        self.client.set(&format!("{base}/{}", self.env.rank), b"")?;
        self.wait_for_ranks(&format!("reach barrier `{name}`"), |rank| {
            format!("{base}/{rank}")
        })
    }

    /// Waits for one key per rank; on time-out, names the ranks whose key is missing.
    fn wait_for_ranks(&self, what: &str, key: impl Fn(usize) -> String) -> Result<(), DistError> {
        let keys: Vec<String> = (0..self.env.world_size).map(&key).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        match self.client.wait(&refs, self.env.timeout) {
            Ok(()) => Ok(()),
            Err(DistError::Timeout { after, .. }) => {
                let mut missing = Vec::new();
                for (rank, k) in refs.iter().enumerate() {
                    if !self.client.check(&[k])? {
                        missing.push(rank);
                    }
                }
                Err(DistError::Timeout {
                    what: format!(
                        "rank(s) {missing:?} of {} to {what} at {} (rank {} is here; is every rank launched with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE? GPUSCOPE_DIST_TIMEOUT_S sets the wait)",
                        self.env.world_size,
                        self.client.addr(),
                        self.env.rank
                    ),
                    after,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// How long waits for other ranks may take.
    pub fn timeout(&self) -> Duration {
        self.env.timeout
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn env(rank: usize, world: usize, port: u16, timeout_ms: u64) -> LaunchEnv {
        LaunchEnv {
            rank,
            world_size: world,
            local_rank: rank,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            agent_store: false,
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    #[test]
    fn three_ranks_meet_share_a_value_and_pass_a_barrier() {
        let port = free_port();
        let others: Vec<_> = (1..3)
            .map(|rank| {
                std::thread::spawn(move || {
                    let r = Rendezvous::join(&env(rank, 3, port, 10_000)).unwrap();
                    let v = r.broadcast("id", None).unwrap();
                    r.barrier("done").unwrap();
                    v
                })
            })
            .collect();
        let r0 = Rendezvous::join(&env(0, 3, port, 10_000)).unwrap();
        r0.broadcast("id", Some(b"xyz")).unwrap();
        r0.barrier("done").unwrap();
        for t in others {
            assert_eq!(t.join().unwrap(), b"xyz");
        }
    }

    #[test]
    fn a_rank_that_never_joins_is_named_in_the_timeout() {
        let port = free_port();
        let r1 = std::thread::spawn(move || Rendezvous::join(&env(1, 3, port, 500)));
        let e = Rendezvous::join(&env(0, 3, port, 500)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("rank(s) [2] of 3"), "{text}");
        assert!(text.contains("timed out"), "{text}");
        let e1 = r1.join().unwrap().unwrap_err();
        assert!(e1.to_string().contains("[2]"), "{e1}");
    }

    #[test]
    fn under_an_agent_store_rank_0_hosts_nothing_and_each_join_gets_fresh_keys() {
        // torchrun's agent hosts the store; the job's processes only connect.
        let agent = StoreServer::bind("127.0.0.1", 0).unwrap();
        let port = agent.port();
        let agent_env = move |rank| LaunchEnv {
            agent_store: true,
            ..env(rank, 2, port, 10_000)
        };
        let t = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..2 {
                let r = Rendezvous::join(&agent_env(1)).unwrap();
                seen.push(r.broadcast("v", None).unwrap());
                r.barrier("end").unwrap();
            }
            seen
        });
        for round in [b"first".as_slice(), b"second"] {
            let r0 = Rendezvous::join(&agent_env(0)).unwrap();
            r0.broadcast("v", Some(round)).unwrap();
            r0.barrier("end").unwrap();
        }
        assert_eq!(
            t.join().unwrap(),
            vec![b"first".to_vec(), b"second".to_vec()]
        );
    }
}
