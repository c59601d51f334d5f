//! The launch environment of one process of a multi-process job: the variables that
//! `torchrun` (and other launchers: SLURM scripts, Kubernetes operators) set.

use std::time::Duration;

use super::DistError;

/// Where this process sits in a job, read from `torchrun`'s variables.
///
/// | variable | meaning |
/// |---|---|
/// | `RANK` | this process's rank, `0..WORLD_SIZE` |
/// | `WORLD_SIZE` | how many processes the job has |
/// | `LOCAL_RANK` | its rank on this machine: the GPU it drives (default: `RANK`) |
/// | `MASTER_ADDR` | host of the rendezvous store (default `127.0.0.1`) |
/// | `MASTER_PORT` | its port (default 29500, `torchrun`'s) |
/// | `TORCHELASTIC_USE_AGENT_STORE` | `True` under `torchrun`: its agent already hosts the store, so rank 0 does not start one |
/// | `GPUSCOPE_DIST_TIMEOUT_S` | how long to wait for other ranks (default 300 s) |
///
/// ```
/// use gpuscope_runtime::dist::LaunchEnv;
/// let vars = [("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "29600")];
/// let env = LaunchEnv::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
///     .unwrap()
///     .expect("RANK is set");
/// assert_eq!((env.rank, env.world_size, env.local_rank, env.master_port), (1, 2, 1, 29600));
/// assert!(!env.agent_store);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    /// `RANK`.
    pub rank: usize,
    /// `WORLD_SIZE`.
    pub world_size: usize,
    /// `LOCAL_RANK`.
    pub local_rank: usize,
    /// `MASTER_ADDR`.
    pub master_addr: String,
    /// `MASTER_PORT`.
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE` is `True`.
    pub agent_store: bool,
    /// `GPUSCOPE_DIST_TIMEOUT_S`.
    pub timeout: Duration,
}

/// `torchrun`'s default `MASTER_PORT`.
pub const DEFAULT_PORT: u16 = 29500;
/// Default time to wait for the other ranks.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl LaunchEnv {
    /// Reads the process environment: `Ok(None)` when `RANK` and `WORLD_SIZE` are both
    /// unset (not launched as a multi-process job); an error naming the variable when
    /// one is malformed or only one of the two is set.
    pub fn from_env() -> Result<Option<LaunchEnv>, DistError> {
        LaunchEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// [`from_env`](Self::from_env) over any lookup (for tests and launchers).
    pub fn from_vars(
        get: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Option<LaunchEnv>, DistError> {
        let (rank, world) = (get("RANK"), get("WORLD_SIZE"));
        let (rank, world) = match (rank, world) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(env_error(
                    "WORLD_SIZE",
                    "",
                    "RANK is set but WORLD_SIZE is not: set both (torchrun does), or neither for one process",
                ));
            }
            (None, Some(w)) => {
                return Err(env_error(
                    "RANK",
                    "",
                    &format!(
                        "WORLD_SIZE={w} is set but RANK is not: set both (torchrun does), or neither for one process"
                    ),
                ));
            }
            (Some(r), Some(w)) => (r, w),
        };
        let world_size = parse::<usize>("WORLD_SIZE", &world)?;
        if world_size == 0 {
            return Err(env_error("WORLD_SIZE", &world, "must be at least 1"));
        }
        let rank = parse::<usize>("RANK", &rank)?;
        if rank >= world_size {
            return Err(env_error(
                "RANK",
                &rank.to_string(),
                &format!("must be less than WORLD_SIZE ({world_size}): ranks are 0..{world_size}"),
            ));
        }
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => parse::<usize>("LOCAL_RANK", &v)?,
            None => rank,
        };
        let master_addr = get("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into());
        if master_addr.trim().is_empty() {
            return Err(env_error(
                "MASTER_ADDR",
                &master_addr,
                "is empty: set it to the host name or address of rank 0's machine",
            ));
        }
        let master_port = match get("MASTER_PORT") {
            Some(v) => {
                let p = parse::<u16>("MASTER_PORT", &v)?;
                if p == 0 {
                    return Err(env_error(
                        "MASTER_PORT",
                        &v,
                        "must be a port from 1 to 65535",
                    ));
                }
                p
            }
            None => DEFAULT_PORT,
        };
        let agent_store = get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v == "True");
        let timeout = match get("GPUSCOPE_DIST_TIMEOUT_S") {
            Some(v) => {
                let s = v.parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0);
                let s = s.ok_or_else(|| {
                    env_error(
                        "GPUSCOPE_DIST_TIMEOUT_S",
                        &v,
                        "must be a positive number of seconds",
                    )
                })?;
                Duration::from_secs_f64(s.min(1e9))
            }
            None => DEFAULT_TIMEOUT,
        };
        Ok(Some(LaunchEnv {
            rank,
            world_size,
            local_rank,
            master_addr: master_addr.trim().to_string(),
            master_port,
            agent_store,
            timeout,
        }))
    }
}

fn parse<T: std::str::FromStr>(var: &'static str, value: &str) -> Result<T, DistError> {
    value.trim().parse::<T>().map_err(|_| {
        env_error(
            var,
            value,
            &format!("is not a valid {}", std::any::type_name::<T>()),
        )
    })
}

fn env_error(var: &'static str, value: &str, problem: &str) -> DistError {
    DistError::Env {
        var,
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Result<Option<LaunchEnv>, DistError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LaunchEnv::from_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn unset_is_a_single_process() {
        assert_eq!(env(&[]).unwrap(), None);
    }

    #[test]
    fn torchrun_variables() {
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "1234"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            ("GPUSCOPE_DIST_TIMEOUT_S", "2.5"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            e,
            LaunchEnv {
                rank: 3,
                world_size: 4,
                local_rank: 1,
                master_addr: "node0".into(),
                master_port: 1234,
                agent_store: true,
                timeout: Duration::from_millis(2500),
            }
        );
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("RANK", "0")], "WORLD_SIZE"),
            (&[("WORLD_SIZE", "2")], "RANK"),
            (&[("RANK", "x"), ("WORLD_SIZE", "2")], "RANK"),
            (&[("RANK", "2"), ("WORLD_SIZE", "2")], "RANK"),
            (&[("RANK", "0"), ("WORLD_SIZE", "0")], "WORLD_SIZE"),
            (&[("RANK", "-1"), ("WORLD_SIZE", "2")], "RANK"),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "70000")],
                "MASTER_PORT",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "0")],
                "MASTER_PORT",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", " ")],
                "MASTER_ADDR",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "a")],
                "LOCAL_RANK",
            ),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("GPUSCOPE_DIST_TIMEOUT_S", "-3"),
                ],
                "GPUSCOPE_DIST_TIMEOUT_S",
            ),
        ];
        for (vars, var) in cases {
            let e = env(vars).unwrap_err();
            assert!(
                matches!(&e, DistError::Env { var: v, .. } if v == var),
                "{vars:?}: {e}"
            );
            assert!(e.to_string().starts_with(var), "{e}");
        }
    }
}
