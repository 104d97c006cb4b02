//! `minirun-hub` through the real binary: import then serve answers, and every refusal is exit 1
//! with a message naming the argument (64 for usage errors).

#![allow(clippy::unwrap_used, clippy::panic)]

use crate::pipeline_v4::common as v4;

use std::io::{Read, Write};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_minirun-hub");
const REV: &str = "60d8d70770c6776ff598c94bb586a859a38244f1";

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `import --root ROOT --repo REPO --revision REV SRC`.
fn import<'a>(root: &'a str, repo: &'a str, rev: &'a str, src: &'a str) -> [&'a str; 8] {
    [
        "import",
        "--root",
        root,
        "--repo",
        repo,
        "--revision",
        rev,
        src,
    ]
}

#[test]
fn import_serve_and_refusals() {
    let d = tempfile::tempdir().unwrap();
    let (src, root) = (d.path().join("src"), d.path().join("hub"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("config.json"), b"{\"a\": 1}\n").unwrap();
    let (root_s, src_s) = (root.to_str().unwrap(), src.to_str().unwrap());
    let (code, out, err) = run(&import(root_s, "o/n", REV, src_s));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("imported 1 files (0 LFS) as o/n@{REV}")),
        "{out}"
    );
    let (code, out, _) = run(&import(root_s, "o/n", REV, src_s));
    assert_eq!(code, Some(0));
    assert!(out.contains("(unchanged)"), "{out}");

    // Serve (the shared test hub runs `minirun-hub serve`): the file resolves at the revision.
    let hub = v4::Hub::start(&root, "");
    let addr = hub.url.strip_prefix("http://").unwrap().to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /o/n/resolve/{REV}/config.json HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    drop(hub);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert_eq!(resp.split("\r\n\r\n").nth(1), Some("{\"a\": 1}\n"));

    let remote = ["serve", "--root", root_s, "--addr", "10.1.2.3:0"];
    let faults = ["serve", "--root", root_s, "--faults", "bogus:1"];
    let cases: [(&[&str], &str); 4] = [
        (
            &remote,
            "refusing to bind non-loopback `10.1.2.3:0` without --allow-remote",
        ),
        (&faults, "`--faults`"),
        (&import(root_s, "no-slash", REV, src_s), "`--repo`"),
        (&import(root_s, "o/n", "main", src_s), "main"),
    ];
    for (args, want) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        run(&["serve"]).0,
        Some(64),
        "missing --root is a usage error"
    );
    assert_eq!(run(&[]).0, Some(64), "no subcommand is a usage error");
    for bin in [
        env!("CARGO_BIN_EXE_minirun-gguf"),
        env!("CARGO_BIN_EXE_minirun-mega"),
    ] {
        let o = Command::new(bin).output().unwrap();
        assert_eq!(o.status.code(), Some(64), "{bin} with no subcommand");
        let o = Command::new(bin).arg("--help").output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{bin} --help");
    }
    // A root that does not exist is refused (a typo must not serve an empty hub), unless --init.
    let missing = d.path().join("no-such-store");
    let m = missing.to_str().unwrap();
    let (code, _, err) = run(&["serve", "--root", m]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not exist; pass --init"), "{err}");
    assert!(!missing.exists(), "nothing is created without --init");
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (code, _, err) = run(&["serve", "--root", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is not a directory"), "{err}");
}

/// `--man` is a man page of the binary, `--completions bash` a script bash loads that completes
/// it, and an unknown shell is a usage error (docs/install.md).
fn generated_docs_hold(name: &str, bin: &str) {
    let gen = |args: &[&str]| Command::new(bin).args(args).output().unwrap();
    let man = gen(&["--man"]);
    assert_eq!(man.status.code(), Some(0), "{name} --man");
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(page.contains(&format!(".TH {name} 1")), "{name}: {page}");
    assert!(
        page.contains("Environment"),
        "{name}: the man page lists no environment"
    );
    let bash = gen(&["--completions", "bash"]);
    assert_eq!(bash.status.code(), Some(0), "{name} --completions bash");
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &bash.stdout).unwrap();
    let check = Command::new("bash")
        .arg("-c")
        .arg(format!(
            ". '{}' && complete -p {name}",
            script.path().display()
        ))
        .output()
        .unwrap();
    assert!(
        check.status.success() && String::from_utf8_lossy(&check.stdout).contains(name),
        "{name}: the bash completion does not load: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let tcsh = gen(&["--completions", "tcsh"]);
    assert_eq!(tcsh.status.code(), Some(64), "{name} --completions tcsh");
}

/// The one CLI contract, walked over every binary of this package (minirun-run and -serve are
/// checked by the runner's own CLI tests): `--version` prints the name and exits 0, `--help`
/// exits 0 and lists the environment variables read, an unknown flag is a usage error (64).
#[test]
fn every_binary_follows_the_cli_contract() {
    let bins = [
        (
            "minirun-candidate-upload",
            env!("CARGO_BIN_EXE_minirun-candidate-upload"),
        ),
        ("minirun-demo", env!("CARGO_BIN_EXE_minirun-demo")),
        ("minirun-fetch", env!("CARGO_BIN_EXE_minirun-fetch")),
        ("minirun-gate", env!("CARGO_BIN_EXE_minirun-gate")),
        ("minirun-gguf", env!("CARGO_BIN_EXE_minirun-gguf")),
        ("minirun-hub", env!("CARGO_BIN_EXE_minirun-hub")),
        ("minirun-inspect", env!("CARGO_BIN_EXE_minirun-inspect")),
        ("minirun-mega", env!("CARGO_BIN_EXE_minirun-mega")),
        ("minirun-plan", env!("CARGO_BIN_EXE_minirun-plan")),
        ("minirun-promote", env!("CARGO_BIN_EXE_minirun-promote")),
        ("minirun-repack", env!("CARGO_BIN_EXE_minirun-repack")),
        ("minirun-stage", env!("CARGO_BIN_EXE_minirun-stage")),
        ("minirun-synth", env!("CARGO_BIN_EXE_minirun-synth")),
        ("minirun-verify", env!("CARGO_BIN_EXE_minirun-verify")),
    ];
    for (name, bin) in bins {
        let o = Command::new(bin).arg("--version").output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{name} --version");
        assert!(
            String::from_utf8_lossy(&o.stdout).starts_with(name),
            "{name} --version"
        );
        let o = Command::new(bin).arg("--help").output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{name} --help");
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(
            help.contains("Environment:"),
            "{name} --help lists no environment: {help}"
        );
        let o = Command::new(bin).arg("--no-such-flag").output().unwrap();
        assert_eq!(o.status.code(), Some(64), "{name} --no-such-flag");
        assert!(
            String::from_utf8_lossy(&o.stderr).starts_with("error: "),
            "{name}: errors start with `error: `"
        );
        generated_docs_hold(name, bin);
    }
    let fetch = Command::new(env!("CARGO_BIN_EXE_minirun-fetch"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&fetch.stdout);
    for var in ["HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME"] {
        assert!(
            help.contains(var),
            "minirun-fetch --help does not list {var}"
        );
    }
}
