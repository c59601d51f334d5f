//! [`launch_local`]: what `torchrun --nproc_per_node=N` does for a program on one
//! machine, for programs that want a `--devices N` flag: start N copies of the current
//! executable with the launch variables set, prefix their output with the rank, and
//! stop the others when one fails.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::DistError;

/// The variable a launched copy sees, so that it does not launch again.
pub const LAUNCHED: &str = "GPUSCOPE_LAUNCHED";

/// Whether this process was started by [`launch_local`] (or `torchrun`: `RANK` is set).
pub fn is_launched() -> bool {
    std::env::var_os(LAUNCHED).is_some() || std::env::var_os("RANK").is_some()
}

/// Starts `n` copies of this executable with `args`, ranks `0..n` on this machine
/// (`LOCAL_RANK` = rank, `MASTER_ADDR` 127.0.0.1, `MASTER_PORT` a free port unless set),
/// forwards their output line by line as `[rank r] ...` (rank 0's stdout unprefixed, so
/// its summary lines stay machine-readable), and waits for all. When one exits with a
/// failure the others are stopped. Returns the first failure, or success.
pub fn launch_local(n: usize, args: &[String]) -> Result<ExitStatus, DistError> {
    launch_local_with_env(n, args, &[])
}

/// [`launch_local`] with extra variables for every rank.
pub fn launch_local_with_env(
    n: usize,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<ExitStatus, DistError> {
    if n == 0 {
        return Err(DistError::Argument {
            op: "launch",
            problem: "zero processes asked for".into(),
        });
    }
    let exe = std::env::current_exe().map_err(|source| DistError::Io {
        addr: "the current executable".into(),
        source,
    })?;
    let port = match std::env::var("MASTER_PORT") {
        Ok(p) => p,
        Err(_) => std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port().to_string())
            .map_err(|source| DistError::Bind {
                addr: "127.0.0.1:0".into(),
                source,
            })?,
    };
    let mut children: Vec<Child> = Vec::with_capacity(n);
    let mut pumps = Vec::new();
    for rank in 0..n {
        let spawned = Command::new(&exe)
            .args(args)
            .envs(env.iter().copied())
            .env(LAUNCHED, "1")
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", n.to_string())
            .env("LOCAL_WORLD_SIZE", n.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .env_remove("TORCHELASTIC_USE_AGENT_STORE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(source) => {
                for c in &mut children {
                    let _ = c.kill();
                }
                return Err(DistError::Io {
                    addr: format!("starting rank {rank}"),
                    source,
                });
            }
        };
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        pumps.push(std::thread::spawn(move || {
            pump(out, rank, rank != 0, false)
        }));
        pumps.push(std::thread::spawn(move || pump(err, rank, true, true)));
        children.push(child);
    }
    let mut first_failure: Option<ExitStatus> = None;
    let mut done = vec![None; n];
    while done.iter().any(Option::is_none) {
        for (rank, c) in children.iter_mut().enumerate() {
            if done[rank].is_some() {
                continue;
            }
            if let Ok(Some(status)) = c.try_wait() {
                done[rank] = Some(status);
                if !status.success() && first_failure.is_none() {
                    first_failure = Some(status);
                    eprintln!("[launch] rank {rank} failed ({status}); stopping the others");
                }
            }
        }
        if first_failure.is_some() {
            for (rank, c) in children.iter_mut().enumerate() {
                if done[rank].is_none() {
                    let _ = c.kill();
                    done[rank] = c.wait().ok();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in pumps {
        let _ = p.join();
    }
    Ok(first_failure.unwrap_or_else(|| done[0].expect("rank 0 finished")))
}

fn pump(from: impl std::io::Read, rank: usize, prefix: bool, stderr: bool) {
    for line in BufReader::new(from).lines().map_while(Result::ok) {
        let text = if prefix {
            format!("[rank {rank}] {line}\n")
        } else {
            format!("{line}\n")
        };
        if stderr {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        } else {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
}
