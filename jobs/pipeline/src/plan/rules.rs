//! Validation of `[[rules]]` and their `container` tables (`plans/README.md` §"Rules"): exactly
//! one of `container` / `plain = true`, the keys each container mode takes and needs, scale
//! dtypes, companion-name templates over `{name}`/`{stem}`, mxfp4's fixed group 32, affine's
//! power-of-two group and MLX widths, and fp8 tile rows that never split a scale block.

use super::names::Dtype;
use super::pattern::{has_glob, Template};
use super::raw::{RawContainer, RawMode, RawNibbleOrder, RawRule};
use super::validate::{MAX_ROWS_PER_TILE, R, V};
use super::{
    ContainerMode, ContainerSpec, NibbleOrder, Rule, RuleAction, StackPattern, TileSettings,
};
use toml::Spanned;

impl V<'_> {
    pub(super) fn rules(
        &self,
        rules: &Spanned<Vec<Spanned<RawRule>>>,
        multi: bool,
        sources: &[&str],
        tiles: &TileSettings,
    ) -> R<Vec<Rule>> {
        if rules.get_ref().is_empty() {
            return self.err(
                rules.span(),
                "rules",
                "declare at least one `[[rules]]` (e.g. a last `match = \"*\"`, `plain = true`)",
            );
        }
        let mut out = Vec::new();
        for (i, rs) in rules.get_ref().iter().enumerate() {
            let key = format!("rules[{i}]");
            let r = rs.get_ref();
            if r.pattern.get_ref().is_empty() || r.pattern.get_ref().contains(['{', '}']) {
                return self.err(
                    r.pattern.span(),
                    format!("{key}.match"),
                    "give a non-empty glob over tensor names (`*`, `?`; no `{}`)",
                );
            }
            let source = match &r.source {
                None => None,
                Some(_) => {
                    Some(self.source_ref(r.source.as_ref(), &key, rs.span(), multi, sources)?)
                }
            };
            let action = match (&r.container, &r.plain) {
                (Some(_), Some(p)) => {
                    return self.err(
                        p.span(),
                        format!("{key}.plain"),
                        "a rule is either `container = {…}` or `plain = true`, not both",
                    )
                }
                (None, None) => {
                    return self.err(
                        rs.span(),
                        key,
                        "say what the rule does: `container = { mode = … }` or `plain = true`",
                    )
                }
                (None, Some(p)) if !*p.get_ref() => {
                    return self.err(
                        p.span(),
                        format!("{key}.plain"),
                        "`plain = false` means nothing; write `plain = true` or a `container`",
                    )
                }
                (None, Some(_)) => RuleAction::Plain,
                (Some(c), None) => RuleAction::Container(self.container(
                    c,
                    &format!("{key}.container"),
                    r.when_dtype.as_ref(),
                    tiles,
                )?),
            };
            let stack = match (&r.stack, &action) {
                (None, _) => None,
                (Some(st), RuleAction::Plain) => {
                    return self.err(
                        st.span(),
                        format!("{key}.stack"),
                        "only a `container` rule stacks its matrices; remove `stack` or make the rule a container",
                    )
                }
                (Some(st), RuleAction::Container(_)) => Some(
                    StackPattern::parse(st.get_ref())
                        .or_else(|e| self.err(st.span(), format!("{key}.stack"), e))?,
                ),
            };
            out.push(Rule {
                pattern: r.pattern.get_ref().clone(),
                source,
                when_dtype: r.when_dtype.as_ref().map(|d| d.get_ref().clone()),
                action,
                stack,
                line: self.loc.line(rs.get_ref().pattern.span().start),
                key,
            });
        }
        Ok(out)
    }

    fn container(
        &self,
        c: &Spanned<RawContainer>,
        key: &str,
        when: Option<&Spanned<Dtype>>,
        tiles: &TileSettings,
    ) -> R<ContainerSpec> {
        let r = c.get_ref();
        let mode = *r.mode.get_ref();
        let mname = match mode {
            RawMode::Fp8E4m3Block => "fp8-e4m3-block",
            RawMode::Mxfp4 => "mxfp4",
            RawMode::Affine => "affine",
        };
        let (takes, elem, scales): (&[&str], &[&str], &[&str]) = match mode {
            RawMode::Fp8E4m3Block => (&["scale", "block"], &["F8_E4M3"], &["F8_E8M0", "U8"]),
            RawMode::Mxfp4 => (
                &["scale", "group", "nibble_order"],
                &["I8", "U8"],
                &["F8_E8M0", "U8"],
            ),
            RawMode::Affine => (
                &["scales", "biases", "group", "bits"],
                &["U32"],
                &["BF16", "F16", "F32"],
            ),
        };
        self.container_keys(c, key, mname, takes)?;
        self.container_dtypes(c, key, when, mname, elem, scales)?;
        let mode = match mode {
            RawMode::Fp8E4m3Block => self.fp8_mode(c, key)?,
            RawMode::Mxfp4 => self.mxfp4_mode(c, key)?,
            RawMode::Affine => self.affine_mode(c, key)?,
        };
        let rows_per_tile = self.container_rows(c, key, &mode, tiles)?;
        Ok(ContainerSpec {
            mode,
            scale_dtype: r.scale_dtype.get_ref().clone(),
            rows_per_tile,
        })
    }

    /// The keys: the container has every key its mode takes and no other.
    fn container_keys(
        &self,
        c: &Spanned<RawContainer>,
        key: &str,
        mname: &str,
        takes: &[&str],
    ) -> R<()> {
        let r = c.get_ref();
        let present: [(&str, Option<std::ops::Range<usize>>); 7] = [
            ("scale", r.scale.as_ref().map(|x| x.span())),
            ("scales", r.scales.as_ref().map(|x| x.span())),
            ("biases", r.biases.as_ref().map(|x| x.span())),
            ("block", r.block.as_ref().map(|x| x.span())),
            ("group", r.group.as_ref().map(|x| x.span())),
            ("bits", r.bits.as_ref().map(|x| x.span())),
            ("nibble_order", r.nibble_order.as_ref().map(|x| x.span())),
        ];
        for (k, span) in &present {
            match (takes.contains(k), span) {
                (false, Some(span)) => {
                    return self.err(
                        span.clone(),
                        format!("{key}.{k}"),
                        format!(
                            "mode `{mname}` takes no `{k}` (it takes {})",
                            takes.join(", ")
                        ),
                    )
                }
                (true, None) => {
                    return self.err(
                        c.span(),
                        key,
                        format!("mode `{mname}` needs `{k}` (it takes {})", takes.join(", ")),
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The dtypes: the scale dtype the mode stores, and the weight dtype the rule selects.
    fn container_dtypes(
        &self,
        c: &Spanned<RawContainer>,
        key: &str,
        when: Option<&Spanned<Dtype>>,
        mname: &str,
        elem: &[&str],
        scales: &[&str],
    ) -> R<()> {
        let r = c.get_ref();
        if !scales.contains(&r.scale_dtype.get_ref().as_str()) {
            return self.err(
                r.scale_dtype.span(),
                format!("{key}.scale_dtype"),
                format!(
                    "mode `{mname}` stores scales as one of {}",
                    scales.join(", ")
                ),
            );
        }
        if let Some(w) = when {
            if !elem.contains(&w.get_ref().as_str()) {
                return self.err(
                    w.span(),
                    key.replace(".container", ".when_dtype"),
                    format!(
                        "a `{mname}` container holds {} weights, not `{}`",
                        elem.join(" or "),
                        w.get_ref()
                    ),
                );
            }
        }
        Ok(())
    }

    /// The fp8-e4m3-block mode: positive block sizes and its scale companion.
    fn fp8_mode(&self, c: &Spanned<RawContainer>, key: &str) -> R<ContainerMode> {
        let r = c.get_ref();
        let b = r
            .block
            .as_ref()
            .map(|b| (*b.get_ref(), b.span()))
            .unwrap_or(([0, 0], c.span()));
        if b.0[0] == 0 || b.0[1] == 0 {
            return self.err(
                b.1,
                format!("{key}.block"),
                "block sizes must be positive, e.g. `[128, 128]`",
            );
        }
        Ok(ContainerMode::Fp8E4m3Block {
            scale: self.companion(c, key, r.scale.as_ref(), "scale")?,
            block: b.0,
        })
    }

    /// The mxfp4 mode: OCP MX's fixed group of 32, the nibble order and its scale companion.
    fn mxfp4_mode(&self, c: &Spanned<RawContainer>, key: &str) -> R<ContainerMode> {
        let r = c.get_ref();
        let g = r.group.as_ref().map_or(0, |g| *g.get_ref());
        if g != 32 {
            return self.err(
                r.group.as_ref().map_or(c.span(), |g| g.span()),
                format!("{key}.group"),
                "OCP MX fixes the mxfp4 group at 32: write `group = 32`",
            );
        }
        let nibble_order = match r.nibble_order.as_ref().map(|n| *n.get_ref()) {
            Some(RawNibbleOrder::HighFirst) => NibbleOrder::HighFirst,
            _ => NibbleOrder::LowFirst,
        };
        Ok(ContainerMode::Mxfp4 {
            scale: self.companion(c, key, r.scale.as_ref(), "scale")?,
            group: 32,
            nibble_order,
        })
    }

    /// The affine mode: a power-of-two group, an MLX width, its scales and biases companions.
    fn affine_mode(&self, c: &Spanned<RawContainer>, key: &str) -> R<ContainerMode> {
        let r = c.get_ref();
        let g = r.group.as_ref().map_or(0, |g| *g.get_ref());
        if g < 2 || !g.is_power_of_two() {
            return self.err(
                r.group.as_ref().map_or(c.span(), |g| g.span()),
                format!("{key}.group"),
                format!("{g} is not a power of two >= 2 (MLX uses 32, 64 or 128)"),
            );
        }
        let bits = r.bits.as_ref().map_or(0, |b| *b.get_ref());
        if !(2..=8).contains(&bits) || bits == 7 {
            return self.err(
                r.bits.as_ref().map_or(c.span(), |b| b.span()),
                format!("{key}.bits"),
                format!("{bits} is not an MLX affine width; use 2, 3, 4, 5, 6 or 8"),
            );
        }
        Ok(ContainerMode::Affine {
            scales: self.companion(c, key, r.scales.as_ref(), "scales")?,
            biases: self.companion(c, key, r.biases.as_ref(), "biases")?,
            group: g,
            bits,
        })
    }

    /// A companion-name template (key `k`): over `{name}`/`{stem}` only, no globs.
    fn companion(
        &self,
        c: &Spanned<RawContainer>,
        key: &str,
        s: Option<&Spanned<String>>,
        k: &str,
    ) -> R<String> {
        let s = s.map_or_else(|| self.err(c.span(), key, format!("missing `{k}`")), Ok)?;
        let t = Template::parse(s.get_ref())
            .or_else(|e| self.err(s.span(), format!("{key}.{k}"), e))?;
        let vars = t.vars();
        if vars.is_empty()
            || vars.iter().any(|v| *v != "name" && *v != "stem")
            || has_glob(s.get_ref())
        {
            return self.err(s.span(), format!("{key}.{k}"), "a companion name is a template over `{name}` (the weight's name) or `{stem}` (its name up to the last `.`), e.g. `{stem}.scale`; no globs");
        }
        Ok(s.get_ref().clone())
    }

    /// The tile rows: in range, and for fp8 never splitting a scale block.
    fn container_rows(
        &self,
        c: &Spanned<RawContainer>,
        key: &str,
        mode: &ContainerMode,
        tiles: &TileSettings,
    ) -> R<Option<u32>> {
        let r = c.get_ref();
        let rows_per_tile = match &r.rows_per_tile {
            None => None,
            Some(v) if (1..=MAX_ROWS_PER_TILE).contains(v.get_ref()) => Some(*v.get_ref()),
            Some(v) => {
                return self.err(
                    v.span(),
                    format!("{key}.rows_per_tile"),
                    format!("use 1..={MAX_ROWS_PER_TILE}"),
                )
            }
        };
        if let ContainerMode::Fp8E4m3Block { block, .. } = mode {
            let eff = rows_per_tile.unwrap_or(tiles.rows_per_tile);
            if eff % block[0] != 0 {
                let span = r.rows_per_tile.as_ref().map_or(c.span(), |v| v.span());
                return self.err(span, format!("{key}.rows_per_tile"), format!("{eff} rows per tile split a {}-row scale block; use a multiple of {} (set `rows_per_tile` here or in `[tiles]`)", block[0], block[0]));
            }
        }
        Ok(rows_per_tile)
    }
}
