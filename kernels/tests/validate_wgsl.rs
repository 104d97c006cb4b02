//! Parses and validates every `.wgsl` module under `kernels/wgsl/` with naga (no GPU needed): each
//! `matmul_*.wgsl` format prefix with the shared `matmul_common.wgsl` and `matmul_body.wgsl`
//! appended (as the kernel table builds it), every other file as it is, and the unrolled matvec
//! modules generated from them; and checks that the kernel table covers every file and names entry
//! points that exist.

#![allow(clippy::panic)] // a test reports failure by panicking

use std::collections::BTreeSet;
use std::path::Path;

use kernels::Kernel;

/// The multiply body every `matmul_*.wgsl` prefix is completed with.
const BODY: &str = "matmul_body.wgsl";
/// The parameters, bindings and helpers between a prefix and the body.
const COMMON: &str = "matmul_common.wgsl";
/// The 8-weight chunk interface appended to the prefixes that define `chunk_weights` only.
const CHUNK8: &str = "matmul_chunk8.wgsl";
/// The subgroup-reduction entry points appended on a device with subgroups.
const SUBGROUP: &str = "matmul_subgroup.wgsl";
/// The shared-memory tiled matmul (and its subgroup reduction) appended to a matmul family.
const TILED: &str = "matmul_tiled.wgsl";
const TILED_SG: &str = "matmul_tiled_sg.wgsl";

/// Shared parts, not kernels of their own.
fn is_shared(name: &str) -> bool {
    [BODY, CHUNK8, COMMON, SUBGROUP, TILED, TILED_SG].contains(&name)
}

fn shared_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("wgsl")
        .join(name);
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The complete module a file is part of: a matmul prefix with the body appended (and the chunk
/// interface between them when the prefix defines only `chunk_weights`), else the file.
fn module_source(name: &str, source: &str, body: &str) -> String {
    if name.starts_with("matmul_") && !is_shared(name) {
        let mid = if source.contains("fn chunk_weights(") && !source.contains("fn chunk_dot(") {
            shared_text(CHUNK8)
        } else {
            String::new()
        };
        let common = shared_text(COMMON);
        format!("{source}{mid}{common}{body}")
    } else {
        source.to_string()
    }
}

fn body_text(files: &[(String, String)]) -> String {
    files
        .iter()
        .find(|(n, _)| n == BODY)
        .map(|(_, s)| s.clone())
        .expect("matmul_body.wgsl exists")
}

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
    let body = body_text(&files);
    for (name, source) in files.iter().filter(|(n, _)| !is_shared(n)) {
        validate(name, &module_source(name, source, &body));
        assert!(
            source.starts_with("//"),
            "{name}: must open with a comment documenting the layout it reads"
        );
    }
}

#[test]
fn kernel_table_matches_the_files() {
    let files = wgsl_files();
    let body = body_text(&files);
    let on_disk: BTreeSet<&str> = files
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !is_shared(n))
        .collect();
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
            module_source(kernel.file(), disk, &body),
            kernel.source(),
            "{}: include_str! is stale",
            kernel.name()
        );
        let module = validate(kernel.file(), kernel.source());
        // (the `Lanes` mapping's matmul is the tiled module's: `tiled_modules_validate`)
        let want = match kernel.entry_point() {
            "matmul" => "matmul_row",
            e => e,
        };
        let entry = module
            .entry_points
            .iter()
            .find(|e| e.name == want)
            .unwrap_or_else(|| panic!("{}: no entry point {want}", kernel.file()));
        assert_eq!(entry.stage, naga::ShaderStage::Compute);
    }
}

/// The uniform-x form of every matmul module (binding 1 a 64 KiB uniform block) is valid WGSL and
/// differs from the storage form only in that declaration; other kernels have none.
#[test]
fn uniform_x_modules_validate() {
    for kernel in Kernel::ALL {
        match kernel.uniform_x_source() {
            Some(source) => {
                assert!(kernel.is_matmul(), "{}", kernel.name());
                assert_eq!(
                    source.replacen(kernels::X_UNIFORM, kernels::X_STORAGE, 1),
                    kernel.source()
                );
                validate(kernel.file(), &source);
            }
            None => assert!(!kernel.is_matmul(), "{}: no uniform-x form", kernel.name()),
        }
    }
}

/// The subgroup form of every matmul module (`matvec_sg` appended; the tiled matmul has its own,
/// `tiled_modules_validate`) validates, has the entry point, and starts with the storage form; other kernels have none.
#[test]
fn subgroup_modules_validate() {
    for kernel in Kernel::ALL {
        match kernel.subgroup_source() {
            Some(source) => {
                assert!(kernel.is_matmul(), "{}", kernel.name());
                assert!(source.starts_with(kernel.source()), "{}", kernel.name());
                assert!(
                    source.ends_with(&shared_text(SUBGROUP)),
                    "{}",
                    kernel.name()
                );
                let module = validate(kernel.file(), &source);
                assert!(
                    module.entry_points.iter().any(|e| e.name == "matvec_sg"),
                    "{}: no matvec_sg",
                    kernel.name()
                );
            }
            None => assert!(!kernel.is_matmul(), "{}: no subgroup form", kernel.name()),
        }
    }
}

/// Every kernel with the `matmul` entry point has the tiled form, with the LANES fold and with
/// the subgroup reduction (the `Lanes` mapping dispatches nothing else for several tokens, with
/// the tiled grid): it validates, has its entry point, and its `xv` reads the workgroup tile.
#[test]
fn tiled_modules_validate() {
    for kernel in Kernel::ALL {
        let has_matmul = kernel.is_matmul() && kernel.entry_point() == "matmul";
        for sg in [false, true] {
            let Some(source) = kernel.tiled_source(sg) else {
                assert!(!has_matmul, "{}: no tiled form", kernel.name());
                continue;
            };
            assert!(has_matmul, "{}", kernel.name());
            assert!(source.contains("return xs[i];"), "{}", kernel.name());
            let module = validate(kernel.file(), &source);
            let entry = if sg {
                "matmul_tiled_sg"
            } else {
                "matmul_tiled"
            };
            assert!(
                module.entry_points.iter().any(|e| e.name == entry),
                "{}: no {entry}",
                kernel.name()
            );
        }
    }
}

/// The unrolled matvec module of every matvec kernel (kernels::unrolled) validates at the K values
/// of the real models (SmolLM2: 576, 1536; DeepSeek V4-shaped: 4096, 7168) and a small one.
#[test]
fn unrolled_modules_validate() {
    let mut made = 0;
    for kernel in Kernel::ALL.iter().filter(|k| k.is_matmul()) {
        let layouts = [
            kernels::unrolled::Layout::Rows,
            kernels::unrolled::Layout::Interleaved,
        ];
        for (k, layout) in [256, 576, 1536, 4096, 7168]
            .into_iter()
            .flat_map(|k| layouts.map(|l| (k, l)))
        {
            match kernels::unrolled::source(*kernel, k, 576, layout) {
                Some(g) => {
                    assert_eq!(kernel.entry_point(), "matvec", "{}", kernel.name());
                    let module = validate(kernel.file(), &g.source);
                    assert!(module
                        .entry_points
                        .iter()
                        .any(|e| e.name == kernels::unrolled::ENTRY));
                    made += 1;
                }
                None => assert!(
                    kernel.entry_point() != "matvec"
                        || !kernel.source().contains("fn block_dot(")
                        || k > kernels::unrolled::max_k(*kernel),
                    "{} K={k}: no unrolled form",
                    kernel.name()
                ),
            }
        }
    }
    // Q4_1 and Q8_0 (SmolLM2's formats) at every K, in both layouts; mxfp4 at every K and
    // fp8-e4m3-block up to 2048 too
    assert!(made >= 2 * 5 * 2 + 5 * 2 + 2 * 2, "{made} modules");
    // f16 and bf16, whose form the kernel alone does not say (the dtype is a module constant)
    for dtype in [kernels::Dtype::F16, kernels::Dtype::Bf16] {
        let format = kernels::WeightFormat::Plain(dtype);
        for k in [256, 576, 1536] {
            let g = kernels::unrolled::source_for(format, k, 576, kernels::unrolled::Layout::Rows)
                .expect("a module");
            assert!(g
                .source
                .contains(&format!("UNROLLED_DTYPE: u32 = {}u", dtype.code())));
            validate(Kernel::MatvecPlain.file(), &g.source);
        }
    }
    let f32_plain = kernels::WeightFormat::Plain(kernels::Dtype::F32);
    assert!(
        kernels::unrolled::source_for(f32_plain, 576, 576, kernels::unrolled::Layout::Rows)
            .is_none()
    );
}

/// One multiply body for every dequantize-and-multiply family: the streamed/resident identity and
/// the CPU reference both rely on one accumulation order, so no prefix may carry a copy of it and
/// every matmul kernel's module ends with exactly the shared body.
#[test]
fn matmul_families_share_one_body() {
    let files = wgsl_files();
    let body = body_text(&files);
    assert!(
        body.contains("@compute"),
        "the shared body holds the entry points"
    );
    let mut families = 0;
    for (name, source) in files
        .iter()
        .filter(|(n, _)| n.starts_with("matmul_") && !is_shared(n))
    {
        assert!(
            !source.contains("@compute"),
            "{name}: a format prefix must not define entry points"
        );
        families += 1;
    }
    assert_eq!(families, 12);
    for kernel in Kernel::ALL
        .iter()
        .filter(|k| k.file().starts_with("matmul_"))
    {
        assert!(
            kernel.source().ends_with(body.as_str()) && kernel.matmul_parts().is_some(),
            "{}: module does not end with the shared body",
            kernel.name()
        );
    }
}
