//! `minirun-hub` through the real binary: import then serve answers, and every refusal is exit 1
//! with a message naming the argument (64 for usage errors).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

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

#[test]
fn import_serve_and_refusals() {
    let d = tempfile::tempdir().unwrap();
    let (src, root) = (d.path().join("src"), d.path().join("hub"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("config.json"), b"{\"a\": 1}\n").unwrap();
    let (root_s, src_s) = (root.to_str().unwrap(), src.to_str().unwrap());
    let import = [
        "import",
        "--root",
        root_s,
        "--repo",
        "o/n",
        "--revision",
        REV,
        src_s,
    ];
    let (code, out, err) = run(&import);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("imported 1 files (0 LFS) as o/n@{REV}")),
        "{out}"
    );
    let (code, out, _) = run(&import);
    assert_eq!(code, Some(0));
    assert!(out.contains("(unchanged)"), "{out}");

    // Serve: the first line names the address; the file resolves at the pinned revision.
    let mut child = Command::new(BIN)
        .args(["serve", "--root", root_s, "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let addr = url.strip_prefix("http://").unwrap().to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /o/n/resolve/{REV}/config.json HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    let body = resp
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or("")
        .as_bytes()
        .to_vec();
    assert_eq!(&body[..], b"{\"a\": 1}\n");

    let cases: [(&[&str], &str); 4] = [
        (
            &["serve", "--root", root_s, "--addr", "10.1.2.3:0"],
            "refusing to bind non-loopback `10.1.2.3:0` without --allow-remote",
        ),
        (
            &["serve", "--root", root_s, "--faults", "bogus:1"],
            "`--faults`",
        ),
        (
            &[
                "import",
                "--root",
                root_s,
                "--repo",
                "no-slash",
                "--revision",
                REV,
                src_s,
            ],
            "`--repo`",
        ),
        (
            &[
                "import",
                "--root",
                root_s,
                "--repo",
                "o/n",
                "--revision",
                "main",
                src_s,
            ],
            "main",
        ),
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
}
