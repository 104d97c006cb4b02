// ---- subgroup reduction (docs/kernels.md "Subgroup reduction"): appended to a matmul family's
// ---- source only on a device created with wgpu's SUBGROUP feature (`Gpu::subgroups`). Lane l's
// ---- partial p_l is the LANES-wide entry points' (`lane_partial`, `lane_partial4` of the body);
// ---- then each subgroup adds its lanes' partials with `subgroupAdd` (the
// ---- device's own order), and lane 0 adds the subgroups' sums in subgroup order. The order
// ---- depends only on K and the device, never on which rows a dispatch covers, so a row-tiled
// ---- (streamed) dispatch and a whole-matrix (resident) one give the same bits; it is not the
// ---- LANES fold's order, so the bits are not `matvec`'s (the CPU reference bounds them).

var<workgroup> subgroup1: array<f32, 64>;

@compute @workgroup_size(64)
fn matvec_sg(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    @builtin(subgroup_invocation_id) sl: u32,
    @builtin(subgroup_id) sid: u32,
    @builtin(num_subgroups) ns: u32,
) {
    let r = wg.x + wg.y * p.groups_x;
    if (r >= p.rows) {
        return;
    }
    let s = subgroupAdd(lane_partial(r, lane));
    if (sl == 0u) {
        subgroup1[sid] = s;
    }
    workgroupBarrier();
    if (lane == 0u) {
        var total = subgroup1[0];
        for (var i = 1u; i < ns; i++) {
            total = total + subgroup1[i];
        }
        store(p.y_offset + r, total);
    }
}
