//! `gpuscope view` on each kind of input, and a clear error (the file, what is wrong)
//! for each kind of bad input; `gpuscope replay` on PyTorch snapshot pickles.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuscope_runtime::memory;
use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, set_tracking};
use gpuscope_runtime::{Device, Tensor};

fn gpuscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(args)
        .env_remove("GPUSCOPE_ALLOC_CONF")
        .output()
        .expect("gpuscope runs")
}

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(rel)
}

fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view-cli");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every PyTorch snapshot pickle in tests/data/pytorch-snapshots (synthetic ones, and
/// real ones recorded on a GPU).
fn pytorch_snapshots() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data("pytorch-snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "pkl"))
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

fn view_ok(input: &Path, name: &str) -> String {
    let out = out_dir().join(name);
    let o = gpuscope(&["view", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(" events, ") && stdout.contains(name),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(!html.contains("https://") && !html.contains("http://"));
    html
}

#[test]
fn every_pytorch_snapshot_becomes_a_page() {
    for p in pytorch_snapshots() {
        let name = format!("{}.html", p.file_stem().unwrap().to_string_lossy());
        let html = view_ok(&p, &name);
        assert!(html.contains("(PyTorch snapshot)"), "{}", p.display());
    }
}

#[test]
fn the_synthetic_snapshot_keeps_its_sites_and_segments() {
    let html = view_ok(
        &data("pytorch-snapshots/synthetic_training.pickle"),
        "synthetic.html",
    );
    // The innermost frame outside torch/ names the site.
    assert!(html.contains("/home/user/model.py:88 (mlp)"));
    assert!(html.contains("/home/user/train.py:41 (forward)"));
    assert!(!html.contains("torch/nn/functional.py:2380"));
}

#[test]
fn an_allocation_trace_becomes_a_page() {
    let o = gpuscope(&[
        "view",
        data("traces/prefetch_train.csv").to_str().unwrap(),
        "-o",
        out_dir().join("trace.html").to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("(allocation trace): "), "{stdout}");
    assert!(
        stderr.contains("note: ") && stderr.contains("no creating sites"),
        "{stderr}"
    );
}

#[test]
fn a_gpuscope_snapshot_becomes_a_page_with_its_tensors() {
    set_tracking(true);
    let dev = Device::host().unwrap();
    memory::record_history(&dev, 10_000);
    let mut kept = Vec::new();
    {
        let _s = ScopeGuard::enter(ScopeOptions::new("cli_step").leaks(LeakPolicy::Warn));
        kept.push(Tensor::zeros(&[48, 48], &dev).unwrap());
    }
    let path = out_dir().join("gpuscope.json");
    memory::write_json(&memory::snapshot(&dev), &path).unwrap();
    let html = view_ok(&path, "gpuscope.html");
    assert!(html.contains(r#""leakedFrom":{"name":"cli_step""#));
    assert!(html.contains(&format!("{}:", file!())));
    drop(kept);
}

fn view_err(input: &Path) -> String {
    let o = gpuscope(&[
        "view",
        input.to_str().unwrap(),
        "-o",
        out_dir().join("never.html").to_str().unwrap(),
    ]);
    let (_, stderr) = text(&o);
    assert!(!o.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let name = input.display().to_string();
    assert!(
        stderr.starts_with(&format!("error: {name}: ")),
        "the error names the file: {stderr}"
    );
    stderr
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let p = out_dir().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_truncated_pickle_is_an_error_that_says_so() {
    let full = std::fs::read(data("pytorch-snapshots/synthetic_training.pickle")).unwrap();
    for cut in [1, 2, 100, full.len() / 2, full.len() - 1] {
        let p = write("truncated.pickle", &full[..cut]);
        let e = view_err(&p);
        assert!(
            e.contains("ends early") && e.contains("truncated"),
            "{cut}: {e}"
        );
    }
}

#[test]
fn a_pickle_that_is_not_a_snapshot_is_an_error() {
    let e = view_err(&data("pytorch-snapshots/bad/not_a_snapshot.pickle"));
    assert!(
        e.contains("not a PyTorch memory snapshot: it holds a list"),
        "{e}"
    );
    // A pickle of Python objects is refused before anything is built.
    let e = view_err(&write(
        "object.pickle",
        b"\x80\x04\x95\x0e\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93.",
    ));
    assert!(e.contains("holds Python objects"), "{e}");
}

#[test]
fn a_malformed_field_is_named_with_its_path() {
    let e = view_err(&data("pytorch-snapshots/bad/bad_size.pickle"));
    assert!(
        e.contains("`device_traces[0][3].size`: expected an integer, found a string"),
        "{e}"
    );
}

#[test]
fn unknown_fields_are_ignored_and_named() {
    let input = data("pytorch-snapshots/bad/unknown_fields.pickle");
    let o = gpuscope(&[
        "view",
        input.to_str().unwrap(),
        "-o",
        out_dir().join("unknown.html").to_str().unwrap(),
    ]);
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("block.new_block_field, event.new_event_field, snapshot.new_top_level_field"),
        "{stderr}"
    );
}

#[test]
fn an_empty_history_is_an_error() {
    let e = view_err(&data("pytorch-snapshots/bad/empty.pickle"));
    assert!(
        e.contains("nothing to show") && e.contains("_record_memory_history"),
        "{e}"
    );
    let json = br#"{"format":"gpuscope-memory/1","device":"host:0 (host)","allocated":0,"reserved":0,"segments":[],"history":{"max_entries":10,"dropped":0,"base_allocated":0,"base_reserved":0,"sites":[],"events":[]}}"#;
    let e = view_err(&write("empty.json", json));
    assert!(e.contains("nothing to show"), "{e}");
    let e = view_err(&write("empty.csv", b"op,id,size,stream\n"));
    assert!(e.contains("the trace has no operations"), "{e}");
}

#[test]
fn a_1_gb_file_is_refused_before_it_is_read() {
    let p = out_dir().join("huge.pickle");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: takes no disk
    let started = std::time::Instant::now();
    let e = view_err(&p);
    assert!(started.elapsed().as_secs() < 5);
    assert!(
        e.contains("the file is 1.00 GiB") && e.contains("--max-input-mib 1024"),
        "{e}"
    );
    std::fs::remove_file(&p).ok();
}

#[test]
fn other_bad_inputs_are_clear_errors() {
    let e = view_err(&write("random.bin", &[0x13, 0x37, 0x00, 0xff, 0x42]));
    assert!(
        e.contains("not a gpuscope snapshot (JSON), an allocation trace"),
        "{e}"
    );
    let e = view_err(&write("nothing.json", b""));
    assert!(e.contains("the file is empty"), "{e}");
    let e = view_err(&write(
        "cut.json",
        br#"{"format":"gpuscope-memory/1","device":"#,
    ));
    assert!(
        e.contains("not a gpuscope memory snapshot: the JSON ends early"),
        "{e}"
    );
    let e = view_err(&write("bad.csv", b"op,id,size,stream\na,1,12,0\nf,2,0,0\n"));
    assert!(e.contains("line 3: free of id 2"), "{e}");
    let e = view_err(&out_dir().join("does-not-exist.pickle"));
    assert!(e.contains("No such file"), "{e}");
}

#[test]
fn replay_reads_pytorch_snapshots() {
    for p in pytorch_snapshots() {
        let o = gpuscope(&[
            "replay",
            "--backend",
            "sim",
            "--format",
            "json",
            "--warm-passes",
            "1",
            p.to_str().unwrap(),
        ]);
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{}: {stderr}", p.display());
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert!(v["ops"].as_u64().unwrap() > 0, "{stdout}");
        // A real snapshot of four streams: the frees PyTorch deferred for other streams
        // replay as record_streams (said on stderr), so warm passes query those streams.
        if p.ends_with("branch_streams.pickle") {
            assert!(
                stderr.contains("10 frees waited for other streams' work"),
                "{stderr}"
            );
            assert!(
                v["pass_calls"][1]["stream_queries"].as_u64().unwrap() > 0,
                "{stdout}"
            );
        }
        assert!(
            v["peak_reserved"].as_u64() >= v["peak_allocated"].as_u64(),
            "{stdout}"
        );
    }
    let e = text(&gpuscope(&[
        "replay",
        data("pytorch-snapshots/bad/not_a_snapshot.pickle")
            .to_str()
            .unwrap(),
    ]))
    .1;
    assert!(e.contains("not a PyTorch memory snapshot"), "{e}");
}

/// The payload of each device on a page: `(device, payload)`, in the page's order.
fn payloads(html: &str) -> Vec<(String, serde_json::Value)> {
    html.split(r#"<script type="application/json" id="gpuscope-data"#)
        .skip(1)
        .map(|rest| {
            let json = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            (v["device"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn a_pytorch_snapshot_of_two_gpus_shows_each_device() {
    let input = data("pytorch-snapshots/two_devices.pickle");
    let out = out_dir().join("two_devices.html");
    let o = gpuscope(&["view", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("(PyTorch snapshot, 2 devices) -> ")
            && stdout.contains("\n  cuda:0 (PyTorch snapshot): 22 events, 2 segments, ")
            && stdout.contains("\n  cuda:1 (PyTorch snapshot): 22 events, 2 segments, "),
        "{stdout}"
    );
    assert!(
        stderr.contains("the snapshot has devices 0, 1: the page shows each"),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains(r#"<select id="device"><option value="0">cuda:0 (PyTorch snapshot)</option><option value="1">cuda:1 (PyTorch snapshot)</option></select>"#));
    let p = payloads(&html);
    let names: Vec<&str> = p.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(
        names,
        ["cuda:0 (PyTorch snapshot)", "cuda:1 (PyTorch snapshot)"]
    );
    // Each device has its own segments, blocks and sites: nothing merged.
    let sites = |v: &serde_json::Value| -> Vec<String> {
        v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let (s0, s1) = (sites(&p[0].1), sites(&p[1].1));
    assert!(
        s0.iter().any(|s| s == "/home/user/model.py:88 (mlp)"),
        "{s0:?}"
    );
    assert!(s0.iter().all(|s| !s.contains("stage2.py")), "{s0:?}");
    assert!(
        s1.iter().any(|s| s == "/home/user/stage2.py:30 (forward)"),
        "{s1:?}"
    );
    assert!(
        s1.iter()
            .all(|s| !s.contains("model.py") && !s.contains("train.py")),
        "{s1:?}"
    );
    for (_, v) in &p {
        assert_eq!(v["segments"].as_array().unwrap().len(), 2);
        assert_eq!(v["history"]["k"].as_array().unwrap().len(), 22); // 31 entries, 9 of them free_requested
    }
    // --device shows one device, as a page of one device.
    let out1 = out_dir().join("two_devices_1.html");
    let o = gpuscope(&[
        "view",
        input.to_str().unwrap(),
        "--device",
        "1",
        "-o",
        out1.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains(" (PyTorch snapshot): 22 events, 2 segments, "),
        "{stdout}"
    );
    assert!(
        stderr.contains("the snapshot has devices 0, 1; showing device 1"),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&out1).unwrap();
    assert!(!html.contains("<select id=\"device\">"));
    let p1 = payloads(&html);
    assert_eq!(p1.len(), 1);
    assert_eq!(p1[0].0, "cuda:1 (PyTorch snapshot)");
    assert_eq!(sites(&p1[0].1), s1);
    // A device the snapshot does not have is an error naming those it has.
    let o = gpuscope(&[
        "view",
        input.to_str().unwrap(),
        "--device",
        "5",
        "-o",
        out1.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o)
            .1
            .contains("device 5 has no segments or events in this snapshot; it has device(s) 0, 1")
    );
}

#[test]
fn a_gpuscope_file_of_several_devices_shows_each_device() {
    set_tracking(true);
    let dev = |n| {
        let backend = gpuscope_runtime::backend::host::HostBackend::new().with_ordinal(n);
        Device::with_backend(
            std::sync::Arc::new(backend),
            gpuscope_runtime::alloc::AllocConfig::default(),
        )
        .unwrap()
    };
    let (a, b) = (dev(1), dev(2));
    memory::record_history(&b, 1000);
    let x = Tensor::zeros(&[40, 40], &a).unwrap(); // SITE a
    let y = Tensor::zeros(&[7, 7], &b).unwrap(); // SITE b
    let path = out_dir().join("devices.json");
    memory::write_json_all(&[memory::snapshot(&a), memory::snapshot(&b)], &path).unwrap();
    let out = out_dir().join("devices.html");
    let o = gpuscope(&["view", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("(gpuscope snapshot, 2 devices) -> ")
            && stdout.contains("\n  host:1 (host): 0 events, 1 segments, ")
            && stdout.contains("\n  host:2 (host): 2 events, 1 segments, "),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("https://") && !html.contains("http://"));
    assert!(html.contains(r#"<option value="1">host:2 (host)</option>"#));
    let p = payloads(&html);
    assert_eq!(p.len(), 2);
    let line = |needle: &str| {
        include_str!("view_cli.rs")
            .lines()
            .position(|l| l.contains(needle))
            .unwrap()
            + 1
    };
    let site = |needle| format!("{}:{}:", file!(), line(needle));
    let has = |v: &serde_json::Value, s: &str| {
        v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().starts_with(s))
    };
    assert!(has(&p[0].1, &site("// SITE a")) && !has(&p[0].1, &site("// SITE b")));
    assert!(has(&p[1].1, &site("// SITE b")) && !has(&p[1].1, &site("// SITE a")));
    assert!(p[0].1.get("history").is_none() && p[1].1.get("history").is_some());
    // A file of one device still makes the page it always did.
    let one = out_dir().join("one_device.json");
    memory::write_json(&memory::snapshot(&a), &one).unwrap();
    let html = view_ok(&one, "one_device.html");
    assert!(!html.contains("<select id=\"device\">") && html.contains(r#"id="gpuscope-data">"#));
    drop((x, y));
}

/// A PyTorch snapshot that a script wrote as JSON (`json.dump` of the unpickled dict),
/// or pickled with protocol 0, shows what the pickle shows.
#[test]
fn snapshots_in_json_and_protocol_0_show_as_their_pickles() {
    // "FILE (PyTorch snapshot): N events, N segments, N blocks (X reserved) -> ..."
    let summary = |input: &str| {
        let out = out_dir().join("encodings.html");
        let o = gpuscope(&[
            "view",
            data(&format!("pytorch-snapshots/{input}"))
                .to_str()
                .unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        let (stdout, stderr) = text(&o);
        assert!(o.status.success(), "{input}: {stdout}\n{stderr}");
        let at = stdout.find("(PyTorch snapshot): ").expect(&stdout);
        stdout[at..].split(" -> ").next().unwrap().to_string()
    };
    for (pickle, other) in [
        ("small_train.pickle", "other-encodings/small_train.json"),
        (
            "synthetic_training.pickle",
            "other-encodings/synthetic_training_protocol0.pickle",
        ),
    ] {
        let want = summary(pickle);
        assert!(want.contains(" events, "), "{want}");
        assert_eq!(summary(other), want, "{other}");
    }
}

/// A gzip-compressed PyTorch snapshot or trace shows what the file inside shows.
#[test]
fn gzip_compressed_inputs_show_as_the_file_inside() {
    use std::io::Write;
    let summary = |input: &Path, kind: &str| {
        let out = out_dir().join("gzip.html");
        let o = gpuscope(&["view", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let (stdout, stderr) = text(&o);
        assert!(
            o.status.success(),
            "{}: {stdout}\n{stderr}",
            input.display()
        );
        let at = stdout.find(kind).expect(&stdout);
        stdout[at..].split(" -> ").next().unwrap().to_string()
    };
    for (file, kind) in [
        (
            "pytorch-snapshots/small_train.pickle",
            "(PyTorch snapshot): ",
        ),
        ("traces/wgan_gp_train.csv", " events, "),
    ] {
        let plain = data(file);
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&std::fs::read(&plain).unwrap()).unwrap();
        let gz = write("compressed.gz", &e.finish().unwrap());
        let want = summary(&plain, kind);
        assert!(want.contains(" events, "), "{want}");
        assert_eq!(summary(&gz, kind), want, "{file}");
    }
    let e = view_err(&write("snapshot.pickle.xz", b"\xfd7zXZ\x00rest"));
    assert!(
        e.contains("xz-compressed") && e.contains("`xz -dk FILE`"),
        "{e}"
    );
}

/// `gpuscope view -` reads the snapshot from standard input.
#[test]
fn a_snapshot_on_standard_input_becomes_a_page() {
    let out = out_dir().join("stdin.html");
    let o = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["view", "-", "-o", out.to_str().unwrap()])
        .stdin(std::fs::File::open(data("pytorch-snapshots/small_train.pickle")).unwrap())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("<stdin> (PyTorch snapshot): "),
        "{stdout}"
    );
    let html = std::fs::read_to_string(&out).unwrap();
    // The title, escaped for HTML.
    assert!(html.contains("gpuscope memory: &lt;stdin&gt;"), "no title");
}
