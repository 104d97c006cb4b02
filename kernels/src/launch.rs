//! How a dispatch covers its rows: the matmul kernels' row mapping ([`MatvecShape`]), the entry
//! point it selects, and the grids of the matmul and element-wise kernels (re-exported by
//! [`crate::gpu`], which compiles and dispatches with them).

use crate::Kernel;

/// How the dequantize-and-multiply kernels map rows onto invocations. Both perform exactly the
/// same arithmetic in the same order (docs/kernels.md, accumulation-order invariant), so their
/// outputs are bit-identical; they differ only in speed on a given adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatvecShape {
    /// One workgroup of `LANES` invocations per row, one barrier, lane 0 folds the partials
    /// (entry points `matvec` and, for several tokens, the tiled module's `matmul_tiled`: 8 rows a
    /// workgroup): what a GPU with wide memory transactions wants.
    Lanes,
    /// One invocation per row, folding the same `LANES` partials itself (entry points
    /// `matvec_row` / `matmul_row`): no barrier and no workgroup memory, what a CPU adapter
    /// (lavapipe, where each workgroup is a loop on one core and a barrier is costly) wants.
    Rows,
}

impl MatvecShape {
    /// The shape for an adapter of `device_type`: `Rows` on a CPU adapter, `Lanes` elsewhere.
    pub fn for_device_type(device_type: wgpu::DeviceType) -> Self {
        match device_type {
            wgpu::DeviceType::Cpu => MatvecShape::Rows,
            _ => MatvecShape::Lanes,
        }
    }
}

/// The entry point of `kernel` for `shape` (only the matmul families have a `Rows` form).
pub fn entry_point(kernel: Kernel, shape: MatvecShape) -> &'static str {
    match (shape, kernel.entry_point()) {
        (MatvecShape::Rows, "matvec") => "matvec_row",
        (MatvecShape::Rows, "matmul") => "matmul_row",
        (_, entry) => entry,
    }
}

/// The grid of a matvec / matmul over `params.rows` rows for `shape`, with `params.groups_x` set
/// to match (the kernels recover the row from it).
pub fn matmul_launch(
    shape: MatvecShape,
    kernel: Kernel,
    params: &mut crate::MatmulParams,
) -> (u32, u32, u32) {
    match shape {
        MatvecShape::Lanes => {
            let groups = matmul_groups(kernel, params.rows, params.tokens);
            params.groups_x = groups.0;
            groups
        }
        MatvecShape::Rows => {
            let (gx, gy) = crate::grid_2d(params.rows.div_ceil(crate::LANES));
            params.groups_x = gx;
            let gz = match kernel.entry_point() {
                "matmul" => params.tokens.div_ceil(crate::TOKEN_TILE).max(1),
                _ => 1,
            };
            (gx, gy, gz)
        }
    }
}

/// The grid for a matvec (`tokens = 1`) or matmul over `rows` rows in the `Lanes` shape: a row
/// (a matvec) or a tile of [`TILE_ROWS`] rows (the tiled matmul) a workgroup on x/y, token tiles
/// on z.
pub fn matmul_groups(kernel: Kernel, rows: u32, tokens: u32) -> (u32, u32, u32) {
    match kernel.entry_point() {
        "matmul" => {
            let (gx, gy) = crate::grid_2d(rows.div_ceil(TILE_ROWS));
            (gx, gy, tokens.div_ceil(crate::TOKEN_TILE).max(1))
        }
        _ => {
            let (gx, gy) = crate::grid_2d(rows);
            (gx, gy, 1)
        }
    }
}

/// Rows a workgroup of the tiled matmul computes (`TILE_ROWS` of `wgsl/matmul_tiled.wgsl`).
pub const TILE_ROWS: u32 = 8;

/// The grid for an element-wise kernel over `n` invocations of `ELEMENTWISE_WORKGROUP`-sized groups.
pub fn elementwise_groups(n: u32) -> (u32, u32, u32) {
    let (gx, gy) = crate::grid_2d(n.div_ceil(crate::ELEMENTWISE_WORKGROUP));
    (gx, gy, 1)
}
