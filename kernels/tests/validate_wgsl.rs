//! Parses and validates every `.wgsl` file under `kernels/wgsl/` with naga (no GPU needed), and
//! checks that the kernel table covers every file and names entry points that exist.

#![allow(clippy::panic)] // a test reports failure by panicking

use std::collections::BTreeSet;
use std::path::Path;

use kernels::Kernel;

fn wgsl_files() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("kernels/wgsl is readable") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "wgsl") {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("utf-8 file name")
                .to_string();
            let source = std::fs::read_to_string(&path).expect("wgsl file is utf-8");
            files.push((name, source));
        }
    }
    files.sort();
    files
}

fn validate(name: &str, source: &str) -> naga::Module {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name}: parse error:\n{}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{name}: validation error:\n{}", e.emit_to_string(source)));
    module
}

#[test]
fn every_wgsl_file_parses_and_validates() {
    let files = wgsl_files();
    assert!(
        files.len() >= 13,
        "expected the 13 kernel families, found {}",
        files.len()
    );
    for (name, source) in &files {
        validate(name, source);
        assert!(
            source.starts_with("//"),
            "{name}: must open with a comment documenting the layout it reads"
        );
    }
}

#[test]
fn kernel_table_matches_the_files() {
    let files = wgsl_files();
    let on_disk: BTreeSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let used: BTreeSet<&str> = Kernel::ALL.iter().map(|k| k.file()).collect();
    assert_eq!(
        on_disk, used,
        "every .wgsl file is a kernel family and vice versa"
    );
    for kernel in Kernel::ALL {
        let (_, disk) = files
            .iter()
            .find(|(n, _)| n == kernel.file())
            .expect("file exists");
        assert_eq!(
            disk,
            kernel.source(),
            "{}: include_str! is stale",
            kernel.name()
        );
        let module = validate(kernel.file(), kernel.source());
        let entry = module
            .entry_points
            .iter()
            .find(|e| e.name == kernel.entry_point())
            .unwrap_or_else(|| {
                panic!("{}: no entry point {}", kernel.file(), kernel.entry_point())
            });
        assert_eq!(entry.stage, naga::ShaderStage::Compute);
    }
}

/// The shared multiply body must be the same text in every `matmul_*.wgsl`: the streamed/resident
/// identity and the CPU reference both rely on one accumulation order.
#[test]
fn matmul_families_share_one_body() {
    let marker = "// ---- shared by every dequantize-and-multiply family";
    let bodies: Vec<(String, String)> = wgsl_files()
        .into_iter()
        .filter(|(n, _)| n.starts_with("matmul_"))
        .map(|(n, s)| {
            let at = s
                .find(marker)
                .unwrap_or_else(|| panic!("{n}: shared body marker missing"));
            (n, s[at..].to_string())
        })
        .collect();
    assert_eq!(bodies.len(), 6);
    for (name, body) in &bodies {
        assert_eq!(body, &bodies[0].1, "{name} diverges from {}", bodies[0].0);
    }
}
