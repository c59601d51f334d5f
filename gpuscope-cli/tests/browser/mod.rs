//! A headless Chromium for tests, driven through ChromeDriver's WebDriver protocol
//! (HTTP on localhost): install (Debian's packages, `install.sh`), start, navigate,
//! run a script, move the mouse, read the console, take a screenshot.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// Chromium's flags on this kind of machine: headless, no sandbox (root), and nothing
/// that reaches the network.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1100",
];

/// Installs Chromium and ChromeDriver if they are missing; the reason when they cannot
/// be had.
pub fn ensure_installed() -> Result<(), String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/install.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    _profile: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Browser {
    /// Starts ChromeDriver on a free port and opens a session with a fresh profile.
    pub fn start() -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(120)))
            .http_status_as_error(false)
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if let Ok(mut r) = agent.get(&format!("{base}/status")).call() {
                let v: Value =
                    serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default())
                        .unwrap_or_default();
                if v["value"]["ready"] == true {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile =
            std::env::temp_dir().join(format!("gpuscope-chromium-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&profile).unwrap();
        let mut args: Vec<String> = FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut b = Browser {
            driver,
            base,
            session: String::new(),
            agent,
            _profile: TempDir(profile),
        };
        let v = b.call(
            "POST",
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
                "goog:loggingPrefs": {"browser": "ALL"}
            }}}),
        );
        b.session = v["sessionId"].as_str().expect("a session").to_string();
        b
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let resp = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            _ => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.to_string()),
        };
        let mut resp = resp.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_string()
            .unwrap();
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        if let Some(err) = v["value"]["error"].as_str() {
            panic!("{method} {path}: {err}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Opens `file`; returns how long the navigation took (until the load event).
    pub fn open(&self, file: &Path) -> Duration {
        let url = format!("file://{}", file.canonicalize().unwrap().display());
        let t = Instant::now();
        self.call("POST", &self.session_path("/url"), json!({ "url": url }));
        t.elapsed()
    }

    /// Runs `script` (a function body) and returns its value.
    pub fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            &self.session_path("/execute/sync"),
            json!({"script": script, "args": []}),
        )
    }

    /// Waits until `script` returns true.
    pub fn wait_for(&self, script: &str, timeout: Duration) {
        let t = Instant::now();
        while self.eval(script) != Value::Bool(true) {
            assert!(t.elapsed() < timeout, "timed out waiting for `{script}`");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Moves the mouse to viewport point (x, y), as a user would.
    pub fn hover(&self, x: f64, y: f64) {
        self.call(
            "POST",
            &self.session_path("/actions"),
            json!({"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                "actions": [{"type": "pointerMove", "duration": 0, "origin": "viewport",
                             "x": x.round() as i64, "y": y.round() as i64}]}]}),
        );
    }

    /// The browser's console messages since the last call: (level, message).
    pub fn console(&self) -> Vec<(String, String)> {
        let v = self.call(
            "POST",
            &self.session_path("/se/log"),
            json!({"type": "browser"}),
        );
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["level"].as_str().unwrap_or("").to_string(),
                            e["message"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Saves a PNG screenshot of the viewport to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self.call("GET", &self.session_path("/screenshot"), Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64"))
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self
                .agent
                .delete(&format!("{}/session/{}", self.base, self.session))
                .call()
                .map(|mut r| {
                    let mut s = String::new();
                    let _ = r.body_mut().as_reader().read_to_string(&mut s);
                });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
