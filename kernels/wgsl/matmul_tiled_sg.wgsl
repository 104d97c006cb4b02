// ---- the tiled matmul with the subgroup reduction (docs/kernels.md "Subgroup reduction"):
// ---- appended after wgsl/matmul_tiled.wgsl only on a device with wgpu's SUBGROUP feature. Each
// ---- row's lane partials are added by `subgroupAdd`, then the subgroups' sums in subgroup
// ---- order by one lane: the order of `matvec_sg` / `matmul_sg`, so the same bits.

@compute @workgroup_size(64)
fn matmul_tiled_sg(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    @builtin(subgroup_invocation_id) sl: u32,
    @builtin(subgroup_id) sid: u32,
    @builtin(num_subgroups) ns: u32,
) {
    let r0 = (wg.x + wg.y * p.groups_x) * TILE_ROWS;
    let t0 = wg.z * TOKEN_TILE;
    let acc = tile_partials(r0, t0, lane);
    for (var j = 0u; j < TILE_ROWS; j++) {
        let s = subgroupAdd(acc[j]);
        if (sl == 0u) {
            tiled[j * LANES + sid] = s;
        }
    }
    workgroupBarrier();
    let r = r0 + lane;
    if (lane < TILE_ROWS && r < p.rows && t0 < p.tokens) {
        var out = tiled[lane * LANES];
        for (var i = 1u; i < ns; i++) {
            out = out + tiled[lane * LANES + i];
        }
        store_tile(r, t0, out);
    }
}
