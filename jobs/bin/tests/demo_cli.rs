//! `minirun-demo` on a machine without a Vulkan driver (the ICD hidden): it exits 1 within
//! 10 s, before it publishes anything, naming what to install and `--generate 0`; a backend
//! wgpu does not have is a usage error (docs/runner.md "Device and backend").

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn without_a_vulkan_driver_the_demo_refuses_before_publishing() {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("demo");
    let none = "/nonexistent/minirun-no-vulkan-icd.json";
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-demo"))
        .arg("--work-dir")
        .arg(&work)
        .env("VK_ICD_FILENAMES", none)
        .env("VK_DRIVER_FILES", none)
        .env_remove("WGPU_BACKEND")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("apt-get install mesa-vulkan-drivers"), "{err}");
    assert!(err.contains("minirun-demo --generate 0"), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "driver noise: {err}");
    assert!(!work.exists(), "nothing published: {err}");

    let out = Command::new(env!("CARGO_BIN_EXE_minirun-demo"))
        .arg("--work-dir")
        .arg(&work)
        .args(["--backend", "directx9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`directx9`"));
}
