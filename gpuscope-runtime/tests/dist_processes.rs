//! Several processes on one machine, launched as `torchrun` launches them (the
//! variables `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`): they
//! meet at rank 0's store, and a rank that never comes or dies is a clear time-out on
//! the others, never a hang. With two GPUs and NCCL, the same processes run NCCL
//! collectives on tensors (skipped, printing why, elsewhere).
//!
//! Each test starts copies of this test binary that run the `child` test with a role.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "GPUSCOPE_DIST_TEST_ROLE";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts rank `rank` of `world` in role `role`.
fn spawn(role: &str, rank: usize, world: usize, port: u16, timeout_s: &str) -> Child {
    command(role, rank, world, port, timeout_s).spawn().unwrap()
}

/// The command [`spawn`] runs, for tests that add variables.
fn command(role: &str, rank: usize, world: usize, port: u16, timeout_s: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("GPUSCOPE_DIST_TIMEOUT_S", timeout_s)
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for a child, failing the test if it runs past `limit` (a hang).
fn finish(child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "a rank hung past {limit:?}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The lines a child printed as `RESULT <text>`.
fn results(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // libtest prints `test child ... ` before the child's first line.
        .filter_map(|l| l.split_once("RESULT ").map(|(_, r)| r.to_string()))
        .collect()
}

/// What the children do; a no-op when the binary runs as the test harness.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    match roles::run(&role) {
        Ok(()) => {}
        Err(e) => {
            println!("RESULT error: {e}");
            std::process::exit(3);
        }
    }
}

mod roles {
    use gpuscope_runtime::dist::{DistError, LaunchEnv, Rendezvous};

    pub fn run(role: &str) -> Result<(), DistError> {
        let env = LaunchEnv::from_env()?.expect("the parent sets RANK and WORLD_SIZE");
        match role {
            "meet" => {
                let r = Rendezvous::join(&env)?;
                let token = format!("token-from-pid-{}", std::process::id());
                let v = r.broadcast("token", (env.rank == 0).then_some(token.as_bytes()))?;
                r.barrier("end")?;
                println!("RESULT {}", String::from_utf8_lossy(&v));
            }
            "join-then-exit" => {
                let _r = Rendezvous::join(&env)?;
                println!("RESULT joined");
                // Leave without reaching the barrier the others wait at.
                std::process::exit(0);
            }
            "fail-rank-1" => {
                if env.rank == 1 {
                    std::process::exit(5);
                }
                let r = Rendezvous::join(&env)?;
                r.barrier("never")?;
            }
            "join-then-barrier" => {
                let r = Rendezvous::join(&env)?;
                r.barrier("after-join")?;
                println!("RESULT passed");
            }
            #[cfg(feature = "cuda")]
            "collectives" => super::cuda_roles::collectives(&env)?,
            #[cfg(feature = "cuda")]
            "collective-then-exit" => super::cuda_roles::collective_then_exit(&env)?,
            #[cfg(feature = "cuda")]
            "nccl-alone" => super::cuda_roles::nccl_alone(&env)?,
            other => panic!("unknown role {other}"),
        }
        Ok(())
    }
}

#[test]
fn ranks_in_separate_processes_meet_and_agree_on_rank_0s_value() {
    let port = free_port();
    let children: Vec<Child> = (0..3).map(|r| spawn("meet", r, 3, port, "30")).collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| finish(c, Duration::from_secs(60)))
        .collect();
    let mut values = Vec::new();
    for out in &outs {
        assert!(out.status.success(), "{}", text(out));
        values.extend(results(out));
    }
    assert_eq!(values.len(), 3, "{values:?}");
    assert!(values[0].starts_with("token-from-pid-"), "{values:?}");
    assert!(values.iter().all(|v| v == &values[0]), "{values:?}");
}

#[test]
fn a_rank_that_never_starts_is_named_by_the_others_within_the_timeout() {
    let port = free_port();
    let start = Instant::now();
    // Ranks 0 and 1 of 3; rank 2 is never launched.
    let children: Vec<Child> = (0..2).map(|r| spawn("meet", r, 3, port, "1.5")).collect();
    for c in children {
        let out = finish(c, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        let r = results(&out).join("\n");
        assert!(r.contains("rank(s) [2] of 3"), "{r}");
        assert!(r.contains("timed out after"), "{r}");
    }
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_rank_that_dies_after_joining_is_named_at_the_next_barrier() {
    let port = free_port();
    let survivor = spawn("join-then-barrier", 0, 2, port, "2");
    let quitter = spawn("join-then-exit", 1, 2, port, "2");
    let q = finish(quitter, Duration::from_secs(30));
    assert!(q.status.success(), "{}", text(&q));
    let out = finish(survivor, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let r = results(&out).join("\n");
    assert!(
        r.contains("rank(s) [1] of 2 to reach barrier `after-join`"),
        "{r}"
    );
}

/// `Some(n)` GPUs when there are at least two and NCCL loads; else prints why not.
#[cfg(feature = "cuda")]
fn two_gpus_and_nccl() -> Option<usize> {
    if let Some(reason) = gpuscope_runtime::backend::cuda::unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    cudarc::driver::result::init().ok()?;
    let n = cudarc::driver::result::device::get_count().unwrap_or(0) as usize;
    if n < 2 {
        println!("skipped: {n} CUDA device(s); collectives across processes need 2");
        return None;
    }
    if let Err(e) = gpuscope_runtime::dist::nccl::comm::library() {
        println!("skipped: {e}");
        return None;
    }
    Some(n)
}

#[cfg(feature = "cuda")]
mod cuda_roles {
    use gpuscope_runtime::dist::{DistError, LaunchEnv, ProcessGroup, ReduceOp};
    use gpuscope_runtime::{Device, Tensor};

    pub fn collectives(env: &LaunchEnv) -> Result<(), DistError> {
        let dev = Device::cuda(env.local_rank)?;
        let g = ProcessGroup::init(env, &dev)?;
        let (r, w) = (g.rank() as f32, g.world_size() as f32);
        // all_reduce: sum of (rank + 1) over ranks.
        let t = Tensor::full(&[1 << 20], r + 1.0, &dev)?;
        g.all_reduce(&[&t], ReduceOp::Sum)?.wait()?;
        let sum: f32 = (1..=g.world_size()).map(|x| x as f32).sum();
        assert!(t.to_vec::<f32>()?.iter().all(|&x| x == sum));
        // broadcast from the last rank.
        let b = Tensor::full(&[1000], r, &dev)?;
        g.broadcast(&[&b], g.world_size() - 1)?.wait()?;
        assert!(b.to_vec::<f32>()?.iter().all(|&x| x == w - 1.0));
        // all_gather: rank order.
        let mine = Tensor::full(&[3], r, &dev)?;
        let all = Tensor::zeros(&[3 * g.world_size()], &dev)?;
        g.all_gather(&[&mine], &[&all])?.wait()?;
        let expect: Vec<f32> = (0..g.world_size()).flat_map(|k| [k as f32; 3]).collect();
        assert_eq!(all.to_vec::<f32>()?, expect);
        // reduce_scatter: chunk r of the sum.
        let input = Tensor::from_slice(
            &(0..2 * g.world_size())
                .map(|i| i as f32)
                .collect::<Vec<_>>(),
            &[2 * g.world_size()],
            &dev,
        )?;
        let out = Tensor::zeros(&[2], &dev)?;
        g.reduce_scatter(&[&input], &[&out], ReduceOp::Sum)?
            .synchronize()?;
        let base = 2.0 * r;
        assert_eq!(out.to_vec::<f32>()?, vec![base * w, (base + 1.0) * w]);
        println!("RESULT ok rank {} of {}", g.rank(), g.world_size());
        Ok(())
    }

    pub fn collective_then_exit(env: &LaunchEnv) -> Result<(), DistError> {
        let dev = Device::cuda(env.local_rank)?;
        let g = ProcessGroup::init(env, &dev)?;
        if env.rank == 1 {
            println!("RESULT leaving");
            std::process::exit(0);
        }
        let t = Tensor::ones(&[1024], &dev)?;
        g.all_reduce(&[&t], ReduceOp::Sum)?.synchronize()?;
        println!("RESULT unexpected: the all-reduce finished without rank 1");
        Ok(())
    }

    /// Rank 0 of a two-rank NCCL communicator whose rank 1 never comes (no store: the
    /// id is made here), waiting `GPUSCOPE_DIST_TIMEOUT_S`.
    pub fn nccl_alone(env: &LaunchEnv) -> Result<(), DistError> {
        use gpuscope_runtime::dist::nccl::comm::{Communicator, unique_id};
        let dev = Device::cuda(env.local_rank)?;
        let id = unique_id()?;
        let _comms = Communicator::init(&id, 2, &[(0, dev)], env.timeout)?;
        println!("RESULT unexpected: the communicator was made without rank 1");
        Ok(())
    }
}

/// A communicator whose other rank never calls NCCL is a time-out naming the wait,
/// within the time-out, with blocking communicators (the default) and non-blocking ones.
#[cfg(feature = "cuda")]
#[test]
fn a_communicator_whose_other_rank_never_joins_times_out() {
    if one_gpu_and_nccl().is_none() {
        return;
    }
    for nonblocking in ["0", "1"] {
        let start = Instant::now();
        let mut c = command("nccl-alone", 0, 2, free_port(), "3");
        let child = c
            .env("GPUSCOPE_NCCL_NONBLOCKING", nonblocking)
            .spawn()
            .unwrap();
        let out = finish(child, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        let r = results(&out).join("\n");
        assert!(
            r.contains("timed out after 3"), // 3s, or the time waited: 3.0001..s
            "nonblocking={nonblocking}: {r}"
        );
        assert!(
            r.contains("joining the NCCL communicator"),
            "nonblocking={nonblocking}: {r}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nonblocking={nonblocking}: {:?}",
            start.elapsed()
        );
    }
}

#[cfg(feature = "cuda")]
#[test]
fn nccl_collectives_across_two_processes() {
    if two_gpus_and_nccl().is_none() {
        return;
    }
    let port = free_port();
    let children: Vec<Child> = (0..2)
        .map(|r| spawn("collectives", r, 2, port, "60"))
        .collect();
    for c in children {
        let out = finish(c, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out));
        assert!(results(&out)[0].starts_with("ok rank"), "{}", text(&out));
    }
}

#[cfg(feature = "cuda")]
#[test]
fn a_rank_that_dies_mid_training_is_a_timeout_on_the_other() {
    if two_gpus_and_nccl().is_none() {
        return;
    }
    let port = free_port();
    let children: Vec<Child> = (0..2)
        .map(|r| spawn("collective-then-exit", r, 2, port, "8"))
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| finish(c, Duration::from_secs(90)))
        .collect();
    let r0 = results(&outs[0]).join("\n");
    assert_eq!(outs[0].status.code(), Some(3), "{}", text(&outs[0]));
    assert!(r0.contains("all_reduce"), "{r0}");
    assert!(r0.contains("timed out") || r0.contains("NCCL"), "{r0}");
}

#[cfg(feature = "cuda")]
#[test]
fn one_process_drives_two_gpus() {
    use gpuscope_runtime::dist::{ProcessGroup, ReduceOp};
    use gpuscope_runtime::{Device, Tensor};
    if two_gpus_and_nccl().is_none() {
        return;
    }
    let devs = [Device::cuda(0).unwrap(), Device::cuda(1).unwrap()];
    let g = ProcessGroup::local(&devs, Duration::from_secs(60)).unwrap();
    assert_eq!((g.rank(), g.world_size()), (0, 2));
    let a = Tensor::full(&[4096], 1.0, &devs[0]).unwrap();
    let b = Tensor::full(&[4096], 2.0, &devs[1]).unwrap();
    g.all_reduce(&[&a, &b], ReduceOp::Sum)
        .unwrap()
        .wait()
        .unwrap();
    assert!(a.to_vec::<f32>().unwrap().iter().all(|&x| x == 3.0));
    assert!(b.to_vec::<f32>().unwrap().iter().all(|&x| x == 3.0));
    // Wrong arguments are errors, not crashes.
    let e = g.all_reduce(&[&a], ReduceOp::Sum).err().unwrap();
    assert!(e.to_string().contains("one tensor per local device"), "{e}");
    let e = g.all_reduce(&[&b, &a], ReduceOp::Sum).err().unwrap();
    assert!(e.to_string().contains("local rank 0 drives"), "{e}");
}

/// PyTorch's side of the store interoperability test.
const TORCH_STORE: &str = r#"
import datetime, sys
import torch.distributed as d
mode, port = sys.argv[1], int(sys.argv[2])
t = datetime.timedelta(seconds=30)
if mode == "server":
    s = d.TCPStore("127.0.0.1", port, None, True, t, wait_for_workers=False)
else:
    s = d.TCPStore("127.0.0.1", port, None, False, t)
s.set("from_torch", "hello from torch")
print("GOT", s.get("from_gpuscope").decode())
s.add("count", 5)
s.set("torch_done", "1")
s.wait(["gpuscope_done"])
"#;

/// `Some(())` when `python3` can import `torch.distributed`; else prints why not.
fn torch_python() -> Option<()> {
    let ok = Command::new("python3")
        .args(["-c", "import torch.distributed"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: python3 with torch.distributed is not installed here");
        return None;
    }
    Some(())
}

/// gpuscope's client and PyTorch's `TCPStore` share keys, with either side hosting.
#[test]
fn the_store_speaks_pytorchs_tcpstore_protocol_both_ways() {
    use gpuscope_runtime::dist::{StoreClient, StoreServer};
    if torch_python().is_none() {
        return;
    }
    for torch_hosts in [true, false] {
        let port = free_port();
        let server = (!torch_hosts).then(|| StoreServer::bind("127.0.0.1", port).unwrap());
        let py = Command::new("python3")
            .args([
                "-c",
                TORCH_STORE,
                if torch_hosts { "server" } else { "client" },
                &port.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let c = StoreClient::connect("127.0.0.1", port, Duration::from_secs(30)).unwrap();
        assert_eq!(c.get("from_torch").unwrap(), b"hello from torch");
        c.set("from_gpuscope", b"hello from gpuscope").unwrap();
        c.wait(&["torch_done"], Duration::from_secs(30)).unwrap();
        assert_eq!(c.add("count", 1).unwrap(), 6);
        c.set("gpuscope_done", b"1").unwrap();
        let out = finish(py, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "torch hosts: {torch_hosts}\n{}",
            text(&out)
        );
        assert!(
            text(&out).contains("GOT hello from gpuscope"),
            "{}",
            text(&out)
        );
        drop(server);
    }
}

/// `Some(())` with a GPU and NCCL; else prints why not.
#[cfg(feature = "cuda")]
fn one_gpu_and_nccl() -> Option<()> {
    if let Some(reason) = gpuscope_runtime::backend::cuda::unavailable_reason() {
        println!("skipped: {reason}");
        return None;
    }
    if let Err(e) = gpuscope_runtime::dist::nccl::comm::library() {
        println!("skipped: {e}");
        return None;
    }
    Some(())
}

/// A job of one rank runs the whole path (rendezvous, NCCL id, non-blocking init,
/// collectives, registration, time-outs) on a machine with one GPU.
#[cfg(feature = "cuda")]
#[test]
fn a_one_rank_job_runs_every_collective() {
    if one_gpu_and_nccl().is_none() {
        return;
    }
    let port = free_port();
    let out = finish(
        spawn("collectives", 0, 1, port, "60"),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        results(&out),
        vec!["ok rank 0 of 1".to_string()],
        "{}",
        text(&out)
    );
}

#[cfg(feature = "cuda")]
#[test]
fn a_one_device_local_group_registers_memory_and_keeps_stream_order() {
    use gpuscope_runtime::dist::{ProcessGroup, ReduceOp};
    use gpuscope_runtime::{Device, Tensor};
    if one_gpu_and_nccl().is_none() {
        return;
    }
    let dev = Device::cuda(0).unwrap();
    let g = ProcessGroup::local(std::slice::from_ref(&dev), Duration::from_secs(60)).unwrap();
    // A tensor written on a side stream: the collective must wait for that write.
    let side = dev.backend().create_stream().unwrap();
    let t = Tensor::zeros(&[1 << 22], &dev).unwrap();
    let src = Tensor::full(&[1 << 22], 7.0, &dev).unwrap();
    t.copy_from(&src).unwrap();
    let reg = g.register(&[&t]);
    println!(
        "registration: {:?}",
        reg.as_ref().map(|_| "ok").map_err(|e| e.to_string())
    );
    g.all_reduce(&[&t], ReduceOp::Max).unwrap().wait().unwrap();
    assert!(t.to_vec::<f32>().unwrap().iter().all(|&x| x == 7.0));
    // The allocator knows the comm stream used the memory.
    let before = t.version();
    g.broadcast(&[&t], 0).unwrap().synchronize().unwrap();
    assert_eq!(t.version(), before + 1, "a collective is an in-place write");
    drop(reg);
    let _ = side;
    // Argument errors name the problem.
    let view = t.narrow(0, 1, 10).unwrap();
    let strided = Tensor::zeros(&[4, 4], &dev).unwrap().t().unwrap();
    let e = g.all_reduce(&[&strided], ReduceOp::Sum).err().unwrap();
    assert!(e.to_string().contains("non-contiguous"), "{e}");
    let e = g.broadcast(&[&view], 3).err().unwrap();
    assert!(e.to_string().contains("root 3 is not a rank"), "{e}");
    let host = Tensor::zeros(&[4], &Device::host().unwrap()).unwrap();
    let e = g.all_reduce(&[&host], ReduceOp::Sum).err().unwrap();
    assert!(e.to_string().contains("host"), "{e}");
}

/// The launcher: a `--devices N` flag re-executes the program N times as ranks.
#[test]
fn launch_local_starts_ranks_that_meet_and_stops_them_when_one_fails() {
    if std::env::var_os(ROLE).is_some() || gpuscope_runtime::dist::launch::is_launched() {
        return;
    }
    use gpuscope_runtime::dist::launch::launch_local_with_env;
    // The launched copies run this test binary's `child` test in a role.
    let args: Vec<String> = ["--exact", "child", "--nocapture", "--test-threads=1"]
        .map(String::from)
        .to_vec();
    let status = launch_local_with_env(3, &args, &[(ROLE, "meet")]).unwrap();
    assert!(status.success(), "{status}");
    // Rank 1 fails at once; rank 0 would wait 60 s at a barrier: the launcher stops it.
    let start = Instant::now();
    let status = launch_local_with_env(
        2,
        &args,
        &[(ROLE, "fail-rank-1"), ("GPUSCOPE_DIST_TIMEOUT_S", "60")],
    )
    .unwrap();
    assert!(!status.success());
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}
