"""Verify a fixture manifest: every entry's file exists with the recorded bytes and sha256.
Usage: python check_fixture.py MANIFEST.json  (exit 0 verified, 1 a finding)."""
import hashlib, json, os, sys
m = sys.argv[1]
base = os.path.dirname(os.path.abspath(m))
ok = True
for e in json.load(open(m))["entries"]:
    p = os.path.join(base, e["path"])
    if not os.path.exists(p):
        print(f"fixture {p}: missing"); ok = False; continue
    b = open(p, "rb").read()
    d = hashlib.sha256(b).hexdigest()
    if len(b) != e["bytes"] or d != e["sha256"]:
        print(f"fixture {p}: {len(b)} bytes sha256 {d}, recorded {e['bytes']} bytes {e['sha256']}"); ok = False
    else:
        print(f"fixture {p}: verified ({e['compiler']}; {e['flags']})")
sys.exit(0 if ok else 1)
