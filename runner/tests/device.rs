//! The device said out loud (docs/runner.md "Device and backend"): a run names its adapter, type
//! and backend on stderr and in `--json`; without a Vulkan driver (the ICD hidden) `minirun-run`
//! and `minirun-serve` exit 1 in seconds naming what to install; a backend wgpu does not have
//! is a usage error; a headless run (no `XDG_RUNTIME_DIR`) prints no driver noise.

#![allow(clippy::panic, clippy::unwrap_used)]

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

/// A command that sees no Vulkan driver (what a fresh cloud VM or CI image has) and asks for no
/// backend.
fn without_vulkan(bin: &str) -> Command {
    let mut c = Command::new(bin);
    let none = "/nonexistent/minirun-no-vulkan-icd.json";
    c.env("VK_ICD_FILENAMES", none)
        .env("VK_DRIVER_FILES", none)
        .env_remove("WGPU_BACKEND");
    c
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn without_a_vulkan_driver_a_run_is_refused_in_seconds_naming_what_to_install() {
    let t0 = Instant::now();
    // The device is opened before the model: the file need not exist for this refusal.
    let out = without_vulkan(env!("CARGO_BIN_EXE_minirun-run"))
        .args(["--model", "/nonexistent/m.gguf", "-p", "x"])
        .output()
        .unwrap();
    let err = said(&out);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: cannot open a wgpu device"), "{err}");
    assert!(
        err.contains("apt-get install mesa-vulkan-drivers") && err.contains("--backend gl"),
        "names the package and the slow way out: {err}"
    );
    assert!(err.contains("(the default backends)"), "{err}");
    // Asked for explicitly, the refusal says where the choice came from.
    let out = without_vulkan(env!("CARGO_BIN_EXE_minirun-run"))
        .args([
            "--model",
            "/nonexistent/m.gguf",
            "-p",
            "x",
            "--backend",
            "vulkan",
        ])
        .output()
        .unwrap();
    assert!(
        said(&out).contains("asked for with --backend"),
        "{}",
        said(&out)
    );
}

#[test]
fn a_backend_wgpu_does_not_have_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .args([
            "--model",
            "/nonexistent/m.gguf",
            "-p",
            "x",
            "--backend",
            "vulkan,cuda",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", said(&out));
    assert!(said(&out).contains("`cuda`"), "{}", said(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-serve"))
        .args(["--model", "/nonexistent/m.gguf", "--backend", "opengl2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", said(&out));
    // From the environment it is the environment that is wrong: exit 1, naming the variable.
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .args(["--model", "/nonexistent/m.gguf", "-p", "x"])
        .env("WGPU_BACKEND", "cuda")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("WGPU_BACKEND"), "{}", said(&out));
}

#[test]
fn a_run_names_its_adapter_and_a_headless_one_prints_no_driver_noise() {
    let test = "a_run_names_its_adapter_and_a_headless_one_prints_no_driver_noise";
    let Some(model) = common::model_path(test) else {
        return;
    };
    if common::engine(test).is_none() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_minirun-run"))
        .arg("--model")
        .arg(&model)
        .args(["-p", "Hi", "-n", "1", "--json"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .output()
        .unwrap();
    let err = said(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "driver noise: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("device: "))
        .unwrap_or_else(|| panic!("no adapter line: {err}"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &v["adapter"];
    let name = a["name"].as_str().unwrap();
    let backend = a["backend"].as_str().unwrap();
    let kind = a["device_type"].as_str().unwrap();
    assert!(line.contains(name), "{line} / {a}");
    assert!(
        line.contains(&format!("{kind} adapter, {backend} backend")),
        "{line}"
    );
    assert_ne!(backend, "gl", "OpenGL only when asked: {line}");
    assert!(v["shaders"]["pipelines"].as_u64().unwrap() > 0, "{v}");
    assert!(v["shaders"]["seconds"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn without_a_vulkan_driver_the_server_exits_instead_of_serving() {
    let test = "without_a_vulkan_driver_the_server_exits_instead_of_serving";
    let Some(model) = common::model_path(test) else {
        return;
    };
    let t0 = Instant::now();
    let out = without_vulkan(env!("CARGO_BIN_EXE_minirun-serve"))
        .arg("--model")
        .arg(&model)
        .args(["--port", "0"])
        .output()
        .unwrap();
    let err = said(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("mesa-vulkan-drivers"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}
