//! The code of the README's "Looking at memory", compiled and run.

use gpuscope::{Device, Tensor, memory};

#[test]
fn the_readme_memory_code_writes_a_page() -> Result<(), Box<dyn std::error::Error>> {
    gpuscope::scope::set_tracking(true);
    let dev = Device::host()?;
    memory::record_history(&dev, 100_000); // at most 100,000 events, oldest dropped
    let x = Tensor::randn(&[64, 64], &dev)?; // ... train ...
    let snap = memory::snapshot(&dev);
    let path = std::env::temp_dir().join(format!("gpuscope-readme-{}.html", std::process::id()));
    memory::viewer::write_page(&snap, &path, "my run")?;
    let html = std::fs::read_to_string(&path)?;
    assert!(html.contains("<title>my run</title>") && html.contains("readme_memory.rs:10:13"));
    // Every device opened, each with its own history.
    let all = memory::snapshot_all();
    assert!(
        all.iter()
            .any(|s| s.device == dev.description() && s.history.is_some())
    );
    memory::viewer::write_page_all(&all, &path, "my run")?;
    let html = std::fs::read_to_string(&path)?;
    assert!(html.contains("readme_memory.rs:10:13"));
    assert_eq!(html.contains(r#"<select id="device">"#), all.len() > 1);
    std::fs::remove_file(&path)?;
    drop(x);
    Ok(())
}
