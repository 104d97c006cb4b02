"""Interop: the real huggingface_hub client (2.x and 0.36.x) against `minirun-hub serve`.

Run by ci/checks.d/40-hub-interop.sh with HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_DISABLE_XET=1 set
in the environment before this module imports huggingface_hub (HF_ENDPOINT is read at import time).
Every downloaded byte is compared with what was uploaded.
"""

import hashlib
import os
import random

import pytest

assert os.environ.get("HF_HUB_DISABLE_XET") == "1", "run with HF_HUB_DISABLE_XET=1"
assert os.environ.get("HF_ENDPOINT"), "HF_ENDPOINT must be set before importing huggingface_hub"

import huggingface_hub  # noqa: E402
from huggingface_hub import (  # noqa: E402
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    HfApi,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError  # noqa: E402

ENDPOINT = os.environ["HF_ENDPOINT"]
OWNER = "interop"
TAG = os.environ.get("INTEROP_TAG", "t")
api = HfApi(endpoint=ENDPOINT, token=os.environ["HF_TOKEN"])


def rnd(n, seed):
    r = random.Random(seed)
    return bytes(r.getrandbits(8) for _ in range(n)) if n < 4096 else r.randbytes(n)


def sha256(b):
    return hashlib.sha256(b).hexdigest()


FILES = {
    "README.md": b"# interop\n\nA test repo.\n",
    "config.json": b'{"hidden": 16}\n',
    "sub/notes.txt": b"hello\n",
    "weights/small.safetensors": rnd(300_000, 1),  # LFS, single part
    "weights/big.bin": rnd(2_600_000, 2),  # LFS, multipart (server chunk size 1 MiB)
    "tokenizer/tok.json": b"{}\n",
    "tokenizer/extra.txt": b"x\n",
}
LFS = {"weights/small.safetensors", "weights/big.bin"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo_id = f"{OWNER}/{TAG}-main-minirun"
    url = api.create_repo(repo_id)
    assert str(url).rstrip("/").endswith(repo_id)
    again = api.create_repo(repo_id, exist_ok=True)  # 409 with `url` in the body
    assert str(again).rstrip("/").endswith(repo_id)
    with pytest.raises(HfHubHTTPError) as e:
        api.create_repo(repo_id)
    assert e.value.response.status_code == 409
    folder = tmp_path_factory.mktemp("upload")
    for p, data in FILES.items():
        (folder / p).parent.mkdir(parents=True, exist_ok=True)
        (folder / p).write_bytes(data)
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="upload folder")
    return repo_id


def test_model_info_files_metadata(repo):
    info = api.model_info(repo, files_metadata=True)
    assert len(info.sha) == 40
    sib = {s.rfilename: s for s in info.siblings}
    assert set(sib) == set(FILES) | {".gitattributes"}
    for p, data in FILES.items():
        assert sib[p].size == len(data), p
        if p in LFS:
            assert sib[p].lfs is not None and sib[p].lfs.sha256 == sha256(data), p
            assert sib[p].lfs.size == len(data)
        else:
            assert sib[p].lfs is None, p
            assert sib[p].blob_id == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_hf_hub_download_every_file(repo, tmp_path):
    for p, data in FILES.items():
        local = hf_hub_download(repo, p, cache_dir=tmp_path, endpoint=ENDPOINT)
        with open(local, "rb") as f:
            assert f.read() == data, p


def test_snapshot_download(repo, tmp_path):
    d = snapshot_download(repo, cache_dir=tmp_path, endpoint=ENDPOINT)
    got = {}
    for root, _, names in os.walk(d):
        for n in names:
            full = os.path.join(root, n)
            got[os.path.relpath(full, d).replace(os.sep, "/")] = open(full, "rb").read()
    assert set(got) == set(FILES) | {".gitattributes"}
    for p, data in FILES.items():
        assert got[p] == data, p


def test_create_commit_parent_commit_and_412(repo):
    head = api.model_info(repo).sha
    ci = api.create_commit(
        repo, operations=[CommitOperationAdd("p1.txt", b"one\n")], commit_message="guarded", parent_commit=head
    )
    assert len(ci.oid) == 40 and ci.oid != head
    with pytest.raises(HfHubHTTPError) as e:
        api.create_commit(
            repo, operations=[CommitOperationAdd("p2.txt", b"two\n")], commit_message="stale", parent_commit=head
        )
    assert e.value.response.status_code == 412
    assert api.model_info(repo).sha == ci.oid
    assert not api.file_exists(repo, "p2.txt")


def test_copy_and_delete_file_and_folder(repo, tmp_path):
    ops = [
        CommitOperationCopy(src_path_in_repo="weights/big.bin", path_in_repo="copies/big.bin"),
        CommitOperationCopy(src_path_in_repo="config.json", path_in_repo="copies/config.json"),
        CommitOperationDelete(path_in_repo="sub/notes.txt"),
        CommitOperationDelete(path_in_repo="tokenizer/"),
    ]
    ci = api.create_commit(repo, operations=ops, commit_message="copy and delete")
    paths = {f.path for f in api.list_repo_tree(repo, recursive=True, revision=ci.oid) if hasattr(f, "size") and not hasattr(f, "tree_id")}
    assert {"copies/big.bin", "copies/config.json"} <= paths
    assert "sub/notes.txt" not in paths
    assert not any(p.startswith("tokenizer/") for p in paths)
    for src, dst in [("weights/big.bin", "copies/big.bin"), ("config.json", "copies/config.json")]:
        local = hf_hub_download(repo, dst, revision=ci.oid, cache_dir=tmp_path, endpoint=ENDPOINT)
        assert open(local, "rb").read() == FILES[src]


def test_branches_and_refs(repo, tmp_path):
    api.create_branch(repo, branch="cand-1")
    api.create_branch(repo, branch="cand-1", exist_ok=True)
    refs = api.list_repo_refs(repo)
    names = {b.name: b.target_commit for b in refs.branches}
    assert names["cand-1"] == names["main"]
    data = rnd(50_000, 7)
    api.upload_file(path_or_fileobj=data, path_in_repo="branch-only.bin", repo_id=repo, revision="cand-1")
    local = hf_hub_download(repo, "branch-only.bin", revision="cand-1", cache_dir=tmp_path, endpoint=ENDPOINT)
    assert open(local, "rb").read() == data
    assert not api.file_exists(repo, "branch-only.bin")
    api.delete_branch(repo, branch="cand-1")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(repo, revision="cand-1")


def test_create_pr(repo, tmp_path):
    ci = api.create_commit(repo, operations=[CommitOperationAdd("pr.txt", b"pr\n")], commit_message="pr", create_pr=True)
    assert ci.pr_revision and ci.pr_revision.startswith("refs/pr/")
    local = hf_hub_download(repo, "pr.txt", revision=ci.pr_revision, cache_dir=tmp_path, endpoint=ENDPOINT)
    assert open(local, "rb").read() == b"pr\n"
    assert not api.file_exists(repo, "pr.txt")


def test_list_repo_tree_over_1000_files(tmp_path):
    repo_id = f"{OWNER}/{TAG}-many-minirun"
    api.create_repo(repo_id)
    want = {f"many/d{i % 4}/f{i:04d}.txt": f"file {i}\n".encode() for i in range(1105)}
    api.create_commit(repo_id, operations=[CommitOperationAdd(p, d) for p, d in want.items()], commit_message="many")
    entries = list(api.list_repo_tree(repo_id, recursive=True))
    files = {e.path: e for e in entries if not hasattr(e, "tree_id")}
    assert set(files) == set(want) | {".gitattributes"}
    for p, d in want.items():
        assert files[p].size == len(d)
        assert files[p].blob_id == hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest()
    # spot-check bytes of a few files from the far end of the listing
    for p in ["many/d0/f0000.txt", "many/d3/f1103.txt", "many/d0/f1104.txt"]:
        local = hf_hub_download(repo_id, p, cache_dir=tmp_path, endpoint=ENDPOINT)
        assert open(local, "rb").read() == want[p]


def test_list_models_author_and_search():
    for n in ["alpha-minirun", "beta-minirun", "gamma-other"]:
        api.create_repo(f"{OWNER}/{TAG}-{n}", exist_ok=True)
    api.create_repo(f"someoneelse/{TAG}-delta-minirun", exist_ok=True)
    ids = sorted(m.id for m in api.list_models(author=OWNER, search=f"{TAG}-"))
    assert f"{OWNER}/{TAG}-alpha-minirun" in ids and f"{OWNER}/{TAG}-gamma-other" in ids
    assert all(i.startswith(f"{OWNER}/") for i in ids)
    ids = sorted(m.id for m in api.list_models(author=OWNER, search="-minirun"))
    assert f"{OWNER}/{TAG}-alpha-minirun" in ids and f"{OWNER}/{TAG}-beta-minirun" in ids
    assert f"{OWNER}/{TAG}-gamma-other" not in ids
    assert all(i.endswith("-minirun") for i in ids)
    assert len(ids) >= 3  # the server pages at 2 per page: this followed Link headers


def test_client_version_is_the_pinned_one():
    v = huggingface_hub.__version__
    assert v.startswith(os.environ.get("EXPECT_HF_VERSION", v)), v
