//! Stacked containers (`plans/README.md` §"Stacks", docs/plans.md): a container rule with
//! `stack = "experts.{E}"` gathers the matrices that differ only in the member index `E` (one
//! layer's routed experts of one projection) into one container, members in ascending `E`, each
//! starting on a tile boundary. The container is a reordering of the members' own packed and
//! scale streams, concatenated in member order; which rows are which member is recorded in the
//! unit's `tensors.json` (`rows`).

use serde::Serialize;

use super::resolve::{ContainerPlacement, Geometry, UpstreamTensor};

/// A rule's `stack = "PREFIX.{VAR}"`: the name segment `PREFIX.<decimal>` marks a member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackPattern {
    /// The literal before the member index (`experts`).
    pub prefix: String,
    /// The variable's name in the plan (`E`), for messages.
    pub var: String,
}

impl StackPattern {
    /// Parse `PREFIX.{VAR}`: a literal prefix without globs or braces, then one variable.
    pub fn parse(s: &str) -> Result<StackPattern, String> {
        let bad = || {
            format!("`{s}` is not `PREFIX.{{VAR}}` (e.g. `experts.{{E}}`: the name segment before the member index, then the index's variable)")
        };
        let (prefix, var) = s.rsplit_once(".{").ok_or_else(bad)?;
        let var = var.strip_suffix('}').ok_or_else(bad)?;
        let ident = |v: &str| {
            !v.is_empty()
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !v.starts_with(|c: char| c.is_ascii_digit())
        };
        if prefix.is_empty()
            || prefix.contains(['{', '}', '*', '?'])
            || prefix.starts_with('.')
            || !ident(var)
        {
            return Err(bad());
        }
        Ok(StackPattern {
            prefix: prefix.to_owned(),
            var: var.to_owned(),
        })
    }

    /// The stack a tensor `name` belongs to and its member index: the one occurrence of
    /// `PREFIX.<decimal>` as whole `.`-separated segments, removed of its `.<decimal>`
    /// (`layers.3.ffn.experts.17.w1.weight` → `layers.3.ffn.experts.w1.weight`, 17). `Err` when
    /// there is no such occurrence or more than one.
    pub fn member(&self, name: &str) -> Result<(String, u64), String> {
        let mut found = None;
        let mut from = 0;
        while let Some(at) = name.get(from..).and_then(|s| s.find(&self.prefix)) {
            let start = from + at;
            from = start + 1;
            let before_ok = start == 0 || name.as_bytes().get(start - 1) == Some(&b'.');
            let rest = name.get(start + self.prefix.len()..).unwrap_or("");
            let Some(digits_on) = rest.strip_prefix('.') else {
                continue;
            };
            let n = digits_on.bytes().take_while(u8::is_ascii_digit).count();
            let after = digits_on.as_bytes().get(n);
            if !before_ok || n == 0 || !(after.is_none() || after == Some(&b'.')) {
                continue;
            }
            let digits = digits_on.get(..n).unwrap_or("");
            if n > 1 && digits.starts_with('0') {
                return Err(format!(
                    "member index `{digits}` has a leading zero; indexes are plain decimals"
                ));
            }
            if found.is_some() {
                return Err(format!(
                    "names `{}.<index>` more than once; the stack cannot tell which is the member index",
                    self.prefix
                ));
            }
            let index: u64 = digits
                .parse()
                .map_err(|_| format!("member index `{digits}` is too large"))?;
            let cut = start + self.prefix.len();
            let stack = format!("{}{}", &name[..cut], &name[cut + 1 + n..]);
            found = Some((stack, index));
        }
        found.ok_or_else(|| {
            format!(
                "has no `{}.{{{}}}` segment (a decimal after `{}.`); the rule's `stack` cannot place it",
                self.prefix, self.var, self.prefix
            )
        })
    }
}

/// One stacked container: its members in index order (0, 1, …), each a container placement of
/// one matrix, and the geometry of the whole stack.
#[derive(Debug, Clone, Serialize)]
pub struct StackPlacement {
    /// The stack's name (a member's name without its index), which names the container.
    pub name: String,
    /// Member 0's weight (what the placement reports as its primary tensor).
    pub lead: UpstreamTensor,
    /// Members in ascending index; member `m` holds rows `[m·R, (m+1)·R)` of the container.
    pub members: Vec<ContainerPlacement>,
    /// The whole container: `rows` = members × R, `tile_rows` dividing R.
    pub geometry: Geometry,
    /// Index of the rule in `plan.rules`.
    pub rule: usize,
}

impl StackPlacement {
    /// Rows of one member (R).
    pub fn member_rows(&self) -> u64 {
        self.members.first().map_or(0, |m| m.geometry.rows)
    }

    /// The rows member `m` occupies in the container.
    pub fn rows_of(&self, m: usize) -> [u64; 2] {
        let r = self.member_rows();
        [m as u64 * r, (m as u64 + 1) * r]
    }
}

/// What grouping the stacked containers of a binding gives.
#[derive(Debug, Default)]
pub(super) struct Grouped {
    /// Each stack by the tensor index of its member 0's weight.
    pub stacks: Vec<(usize, StackPlacement)>,
    /// Tensor indexes of every stacked weight (member 0's included).
    pub members: Vec<usize>,
    /// Weights that could not be stacked, with why (tensor index, reason).
    pub refused: Vec<(usize, String)>,
}

/// Group the containers of stacking rules, `(tensor index, unit index, pattern, placement)`,
/// into stacks: one per (unit, rule, stack name), members by ascending index, which must be
/// 0, 1, … with one shape, dtype and geometry.
pub(super) fn group(items: Vec<(usize, usize, &StackPattern, ContainerPlacement)>) -> Grouped {
    use std::collections::BTreeMap;
    type Key = (usize, usize, String);
    let mut by_stack: BTreeMap<Key, Vec<(u64, usize, ContainerPlacement)>> = BTreeMap::new();
    let mut out = Grouped::default();
    for (ti, unit, pattern, c) in items {
        match pattern.member(&c.weight.name) {
            Ok((name, index)) => by_stack
                .entry((unit, c.rule, name))
                .or_default()
                .push((index, ti, c)),
            Err(why) => out.refused.push((ti, why)),
        }
    }
    for ((_, rule, name), mut members) in by_stack {
        members.sort_by_key(|(index, _, _)| *index);
        match check_members(&members) {
            Ok(()) => {}
            Err((ti, why)) => {
                out.refused.push((ti, why));
                continue;
            }
        }
        let Some((_, lead_ti, lead)) = members.first() else {
            continue;
        };
        let subs = if lead.bias.is_some() { 2 } else { 1 };
        let geometry = match stack_geometry(&lead.geometry, members.len() as u64, subs) {
            Ok(g) => g,
            Err(why) => {
                out.refused.push((*lead_ti, why));
                continue;
            }
        };
        let lead_ti = *lead_ti;
        out.members.extend(members.iter().map(|(_, ti, _)| *ti));
        let members: Vec<ContainerPlacement> = members.into_iter().map(|(_, _, c)| c).collect();
        let lead = members.first().map(|m| m.weight.clone());
        if let Some(lead) = lead {
            out.stacks.push((
                lead_ti,
                StackPlacement {
                    name,
                    lead,
                    members,
                    geometry,
                    rule,
                },
            ));
        }
    }
    out
}

/// Members (sorted) are 0, 1, … and alike: same weight dtype and shape, same geometry.
fn check_members(members: &[(u64, usize, ContainerPlacement)]) -> Result<(), (usize, String)> {
    let Some((_, _, first)) = members.first() else {
        return Ok(());
    };
    for (pos, (index, ti, c)) in members.iter().enumerate() {
        if *index != pos as u64 {
            let why = if *index < pos as u64 {
                format!("is member {index} of its stack twice")
            } else {
                format!("is member {index} of its stack, but member {pos} is missing (members are 0, 1, … without gaps)")
            };
            return Err((*ti, why));
        }
        if c.weight.dtype != first.weight.dtype
            || c.weight.shape != first.weight.shape
            || c.geometry != first.geometry
        {
            return Err((
                *ti,
                format!(
                    "is {} {:?} but member 0 `{}` is {} {:?}; a stack's members have one shape",
                    c.weight.dtype,
                    c.weight.shape,
                    first.weight.name,
                    first.weight.dtype,
                    first.weight.shape
                ),
            ));
        }
    }
    Ok(())
}

/// The stack geometry of `n` members of geometry `g` with `subs` scale-shaped sub-regions a tile
/// (1, or 2 with affine biases): `n·R` rows, and tile rows lowered (from the member's, which
/// already fit the budget) to the largest multiple of the scale-block rows that divides R, so
/// every member starts on a tile boundary.
pub(super) fn stack_geometry(g: &Geometry, n: u64, subs: u64) -> Result<Geometry, String> {
    let (r, rps) = (g.rows, g.rows_per_scale.max(1));
    if r % rps != 0 {
        return Err(format!(
            "members of {r} rows do not end on a {rps}-row scale block, so they cannot start on tile boundaries"
        ));
    }
    let mut tile_rows = g.tile_rows - g.tile_rows % rps;
    while tile_rows > 0 && r % tile_rows != 0 {
        tile_rows -= rps;
    }
    if tile_rows == 0 {
        return Err(format!(
            "no tile height of whole {rps}-row scale blocks divides the members' {r} rows"
        ));
    }
    let rows = r
        .checked_mul(n)
        .ok_or_else(|| format!("{n} members of {r} rows overflow"))?;
    let align = |x: u64| x.div_ceil(super::TILE_ALIGN) * super::TILE_ALIGN;
    let slot = align(tile_rows * g.packed_row_bytes)
        + subs * align(tile_rows.div_ceil(rps) * g.scale_row_bytes);
    Ok(Geometry {
        rows,
        scale_rows: g.scale_rows * n,
        tile_rows,
        tile_slot_bytes: slot,
        ..*g
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_a_prefix_then_one_variable() {
        let p = StackPattern::parse("experts.{E}").unwrap();
        assert_eq!((p.prefix.as_str(), p.var.as_str()), ("experts", "E"));
        let p = StackPattern::parse("block_sparse_moe.experts.{e}").unwrap();
        assert_eq!(p.prefix, "block_sparse_moe.experts");
        for bad in [
            "{E}",
            "experts",
            "experts.{}",
            "experts.{E}.w",
            "ex*.{E}",
            "experts.{1E}",
            ".x.{E}",
        ] {
            assert!(StackPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_member_is_the_one_prefix_segment_followed_by_a_decimal() {
        let p = StackPattern::parse("experts.{E}").unwrap();
        assert_eq!(
            p.member("layers.3.ffn.experts.17.w1.weight").unwrap(),
            ("layers.3.ffn.experts.w1.weight".to_owned(), 17)
        );
        assert_eq!(
            p.member("mtp.0.ffn.experts.0.w2.scale").unwrap(),
            ("mtp.0.ffn.experts.w2.scale".to_owned(), 0)
        );
        assert_eq!(p.member("experts.5").unwrap(), ("experts".to_owned(), 5));
        // not whole segments, no decimal, a leading zero, twice
        for bad in [
            "layers.3.ffn.shared_experts.w1.weight",
            "layers.3.ffn.myexperts.1.w1.weight",
            "layers.3.ffn.experts.1a.w1.weight",
            "layers.3.ffn.experts.w1.weight",
            "layers.3.ffn.experts.01.w1.weight",
            "experts.1.experts.2.w",
        ] {
            assert!(p.member(bad).is_err(), "{bad}");
        }
    }

    fn g(rows: u64, rps: u64, tile_rows: u64) -> Geometry {
        Geometry {
            rows,
            cols: 256,
            packed_row_bytes: 128,
            scale_rows: rows.div_ceil(rps),
            scale_cols: 8,
            scale_row_bytes: 8,
            rows_per_scale: rps,
            cols_per_scale: 32,
            tile_rows,
            tile_slot_bytes: 0,
        }
    }

    #[test]
    fn stack_tiles_divide_the_member_rows() {
        let s = stack_geometry(&g(512, 1, 512), 256, 1).unwrap();
        assert_eq!((s.rows, s.tile_rows, s.scale_rows), (131_072, 512, 131_072));
        assert_eq!(
            stack_geometry(&g(4096, 1, 2048), 3, 1).unwrap().tile_rows,
            2048
        );
        assert_eq!(
            stack_geometry(&g(3000, 1, 1024), 2, 1).unwrap().tile_rows,
            1000
        );
        assert_eq!(
            stack_geometry(&g(384, 128, 256), 2, 1).unwrap().tile_rows,
            128
        );
        assert!(stack_geometry(&g(300, 128, 256), 2, 1).is_err());
        let s = stack_geometry(&g(512, 1, 512), 4, 2).unwrap();
        assert_eq!(s.tile_slot_bytes, 65_536 + 2 * 16_384);
    }
}
