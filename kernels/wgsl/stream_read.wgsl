// A plain streaming read (`Kernel::StreamRead`): the adapter's own read-bandwidth ceiling, against
// which every dequantize-and-multiply kernel is reported (ci/bench/runner.sh, docs/bench/runner.md).
//
// Layout: binding 1 `src` u32 [words]; binding 2 `out` u32 [invocations]. Invocation i of N reads
// words i, i + N, i + 2N, … (neighbouring invocations read neighbouring words, so every load is a
// wide, coalesced one on a GPU and a vector load on a CPU adapter), xors them and writes the result
// so the reads cannot be elided. Nothing is computed.

struct Params {
    words: u32,
    invocations: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn stream_read(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.groups_x * 256u;
    if (i >= p.invocations) {
        return;
    }
    var acc = vec4<u32>(0u);
    let n = p.words / 4u;
    for (var w = i; w < n; w += p.invocations) {
        acc = acc ^ src[w];
    }
    out[i] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
