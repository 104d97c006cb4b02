//! Chains of products (docs/runner-deepseek-v4.md "Chained products"): products whose input is
//! the output of earlier products of the same chain, concatenated (`wo_a`'s groups into `wo_b`)
//! or through the clamped SwiGLU (an MLP's gate and up products into its down product). A
//! backend may run a whole chain in one device round trip ([`Linears::linear_chain`]); here is
//! the evaluation every backend can fall back to: level by level, each level's products as one
//! [`Linears::linear_batch`], the derived inputs made on the host (SwiGLU by the backend's
//! [`Linears::swiglu`], so that a backend computes it one way whichever path a chain takes).

use std::ops::Range;

use super::error::V4Error;
use super::linear::{Linears, Product};

/// Where a link's input comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Input<'a> {
    /// `tokens` row-major inputs given by the caller.
    Host(&'a [f32]),
    /// Per token, the outputs of these earlier links, concatenated in this order.
    Concat(Vec<usize>),
    /// SwiGLU of two earlier links' outputs (equal lengths), clamped at `limit`
    /// ([`Linears::swiglu`]).
    SwiGlu { gate: usize, up: usize, limit: f64 },
    /// Per token, the RMSNorm of an earlier link's output with `weight` (as long as that
    /// output) and `eps` ([`Linears::rmsnorm`]).
    RmsNorm {
        of: usize,
        weight: &'a [f32],
        eps: f64,
    },
    /// One token's normalised block input where the backend's device-resident residual holds it
    /// (the last [`super::residual::Residual::mix`]).
    Block,
    /// Channels `range` of one token's attention output where the backend's device attention
    /// wrote it (the last [`super::residual::Residual::attend`]).
    Heads(Range<usize>),
}

/// One product of a chain: rows `rows` of weight `stem` times `tokens` inputs from `input`.
#[derive(Debug, Clone)]
pub struct Link<'a> {
    pub stem: String,
    pub rows: Range<usize>,
    pub input: Input<'a>,
    pub tokens: usize,
    /// Whether the caller wants this output back (a link only other links read is not read
    /// back; its place in the result is empty).
    pub read: bool,
}

impl<'a> Link<'a> {
    /// Every one of the `rows` rows of `stem`, read back.
    pub fn new(stem: String, rows: usize, input: Input<'a>, tokens: usize) -> Self {
        Self {
            stem,
            rows: 0..rows,
            input,
            tokens,
            read: true,
        }
    }

    /// The same link, its output only read by later links.
    pub fn internal(self) -> Self {
        Self {
            read: false,
            ..self
        }
    }

    /// The links this one reads.
    pub fn reads(&self) -> Vec<usize> {
        match &self.input {
            Input::Host(_) | Input::Block | Input::Heads(_) => Vec::new(),
            Input::Concat(v) => v.clone(),
            Input::SwiGlu { gate, up, .. } => vec![*gate, *up],
            Input::RmsNorm { of, .. } => vec![*of],
        }
    }
}

/// Each link's level: 0 for a host input, else one more than the deepest link it reads, which
/// must come before it and have the same token count.
pub fn levels(links: &[Link<'_>]) -> Result<Vec<usize>, V4Error> {
    let mut level = Vec::with_capacity(links.len());
    for (i, l) in links.iter().enumerate() {
        let mut lv = 0;
        for r in l.reads() {
            let read = links.get(r).filter(|_| r < i).ok_or_else(|| {
                V4Error::Input(format!(
                    "chained product {i} ({}) reads link {r}, which does not come before it",
                    l.stem
                ))
            })?;
            if read.tokens != l.tokens {
                return Err(V4Error::Input(format!(
                    "chained product {i} ({}) reads link {r} ({}) of another token count",
                    l.stem, read.stem
                )));
            }
            lv = lv.max(level[r] + 1);
        }
        level.push(lv);
    }
    Ok(level)
}

/// Runs `links` level by level through `l.linear_batch`, the derived inputs made on the host.
pub fn on_host<L: Linears + ?Sized>(
    l: &mut L,
    links: &[Link<'_>],
) -> Result<Vec<Vec<f32>>, V4Error> {
    let level = levels(links)?;
    let mut outs: Vec<Option<Vec<f32>>> = vec![None; links.len()];
    for lv in 0..=level.iter().copied().max().unwrap_or(0) {
        let at: Vec<usize> = (0..links.len()).filter(|&i| level[i] == lv).collect();
        let mut derived = swiglus(l, links, &at, &outs)?;
        // a derived input equal to an earlier one of the level is that one (made once, and one
        // slice: products of one matrix over it run once, `linear_batch`)
        let first: Vec<usize> = at
            .iter()
            .enumerate()
            .map(|(j, &i)| {
                let same = |&k: &usize| links[at[k]].input == links[i].input;
                (0..j).find(same).unwrap_or(j)
            })
            .collect();
        for (j, &i) in at.iter().enumerate() {
            if first[j] != j {
                continue;
            }
            if derived[j].is_none() {
                derived[j] = concat(links, i, &outs)?;
            }
            if links[i].input == Input::Block {
                let residual = l.residual().ok_or_else(|| {
                    V4Error::Input(format!(
                        "{} reads the device's block input, and this backend keeps none",
                        links[i].stem
                    ))
                })?;
                derived[j] = Some(residual.read_block()?);
            }
            if let Input::Heads(r) = &links[i].input {
                let residual = l.residual().ok_or_else(|| {
                    V4Error::Input(format!(
                        "{} reads the device's attention output, and this backend keeps none",
                        links[i].stem
                    ))
                })?;
                let heads = residual.read_heads()?;
                let part = heads.get(r.clone()).ok_or_else(|| {
                    V4Error::Input(format!("{}: channels {r:?} of the heads", links[i].stem))
                })?;
                derived[j] = Some(part.to_vec());
            }
            if let Input::RmsNorm { of, weight, eps } = links[i].input {
                derived[j] = Some(l.rmsnorm(output(&outs, of)?, weight, eps)?);
            }
        }
        let products: Vec<Product<'_>> = at
            .iter()
            .zip(&first)
            .map(|(&i, &f)| Product {
                stem: links[i].stem.clone(),
                rows: links[i].rows.clone(),
                x: match (&links[i].input, &derived[f]) {
                    (Input::Host(x), _) => x,
                    (_, Some(d)) => d.as_slice(),
                    (_, None) => &[],
                },
                tokens: links[i].tokens,
            })
            .collect();
        for (&i, y) in at.iter().zip(l.linear_batch(&products)?) {
            outs[i] = Some(y);
        }
    }
    Ok(outs
        .into_iter()
        .zip(links)
        .map(|(o, link)| {
            if link.read {
                o.unwrap_or_default()
            } else {
                Vec::new()
            }
        })
        .collect())
}

/// An earlier link's output.
fn output(outs: &[Option<Vec<f32>>], r: usize) -> Result<&[f32], V4Error> {
    outs.get(r)
        .and_then(Option::as_deref)
        .ok_or_else(|| V4Error::Input(format!("chained product {r} has no output yet")))
}

/// Link `i`'s input where it is a concatenation of earlier outputs (`None` otherwise).
fn concat(
    links: &[Link<'_>],
    i: usize,
    outs: &[Option<Vec<f32>>],
) -> Result<Option<Vec<f32>>, V4Error> {
    let Input::Concat(reads) = &links[i].input else {
        return Ok(None);
    };
    let mut x = Vec::new();
    for t in 0..links[i].tokens {
        for &r in reads {
            let n = links[r].rows.len();
            x.extend_from_slice(output(outs, r)?.get(t * n..(t + 1) * n).unwrap_or_default());
        }
    }
    Ok(Some(x))
}

/// The SwiGLU inputs of the links `at` (in their places; `None` for the others): one
/// [`Linears::swiglu`] per limit over every pair's values side by side — the operation is
/// element-wise, so the values are those of one call a pair, in one device round trip.
fn swiglus<L: Linears + ?Sized>(
    l: &mut L,
    links: &[Link<'_>],
    at: &[usize],
    outs: &[Option<Vec<f32>>],
) -> Result<Vec<Option<Vec<f32>>>, V4Error> {
    let mut derived: Vec<Option<Vec<f32>>> = vec![None; at.len()];
    let mut limits: Vec<f64> = Vec::new();
    for &i in at {
        if let Input::SwiGlu { limit, .. } = links[i].input {
            if !limits.contains(&limit) {
                limits.push(limit);
            }
        }
    }
    for limit in limits {
        let (mut gates, mut ups, mut members) = (Vec::new(), Vec::new(), Vec::new());
        for (j, &i) in at.iter().enumerate() {
            if let Input::SwiGlu { gate, up, limit: l } = links[i].input {
                if l == limit {
                    let (g, u) = (output(outs, gate)?, output(outs, up)?);
                    if g.len() != u.len() {
                        return Err(V4Error::Input(format!(
                            "chained product {i} ({}): SwiGLU of {} gate and {} up values",
                            links[i].stem,
                            g.len(),
                            u.len()
                        )));
                    }
                    gates.extend_from_slice(g);
                    ups.extend_from_slice(u);
                    members.push((j, g.len()));
                }
            }
        }
        let act = l.swiglu(&gates, &ups, limit)?;
        let mut rest = act.as_slice();
        for (j, n) in members {
            let (a, tail) = rest.split_at(n.min(rest.len()));
            derived[j] = Some(a.to_vec());
            rest = tail;
        }
    }
    Ok(derived)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(input: Input<'_>) -> Link<'_> {
        Link::new("w".into(), 2, input, 1)
    }

    #[test]
    fn levels_follow_what_each_link_reads() {
        let x = [1.0f32, 2.0];
        let links = [
            link(Input::Host(&x)),
            link(Input::Host(&x)),
            link(Input::SwiGlu {
                gate: 0,
                up: 1,
                limit: 10.0,
            }),
            link(Input::Concat(vec![0, 2])),
        ];
        assert_eq!(levels(&links).expect("a chain"), [0, 0, 1, 2]);
    }

    /// y[t, r] = (r + 1) · factor(stem) · Σ x[t]; counts the SwiGLU calls.
    struct Toy {
        swiglus: usize,
    }

    fn factor(stem: &str) -> f32 {
        stem.bytes().map(f32::from).sum::<f32>() / 1000.0
    }

    impl Linears for Toy {
        fn declare(&mut self, _: &str, _: usize, _: usize, _: bool) -> Result<(), V4Error> {
            Ok(())
        }
        fn linear_rows(
            &mut self,
            stem: &str,
            rows: Range<usize>,
            x: &[f32],
            tokens: usize,
        ) -> Result<Vec<f32>, V4Error> {
            let k = x.len() / tokens;
            Ok((0..tokens)
                .flat_map(|t| {
                    let sum: f32 = x[t * k..(t + 1) * k].iter().sum();
                    rows.clone()
                        .map(move |r| (r + 1) as f32 * factor(stem) * sum)
                })
                .collect())
        }
        fn swiglu(&mut self, g: &[f32], u: &[f32], limit: f64) -> Result<Vec<f32>, V4Error> {
            self.swiglus += 1;
            Ok(super::super::moe::swiglu(g, u, limit))
        }
    }

    #[test]
    fn a_chain_on_the_host_is_its_products_one_by_one_with_one_swiglu_a_level() {
        let x = [0.5f32, -1.0, 2.0, 0.25, 1.0, -0.5]; // two tokens of 3
        let mut links = Vec::new();
        for m in ["a", "b"] {
            let g = links.len();
            links.push(Link::new(format!("{m}.w1"), 4, Input::Host(&x), 2).internal());
            links.push(Link::new(format!("{m}.w3"), 4, Input::Host(&x), 2).internal());
            let act = Input::SwiGlu {
                gate: g,
                up: g + 1,
                limit: 1.5,
            };
            links.push(Link::new(format!("{m}.w2"), 3, act, 2));
        }
        links.push(Link::new("o".into(), 2, Input::Concat(vec![2, 5]), 2));
        let mut toy = Toy { swiglus: 0 };
        let got = on_host(&mut toy, &links).expect("runs");
        assert_eq!(toy.swiglus, 1, "both MLPs' SwiGLU in one call");
        let mut by_hand = Toy { swiglus: 0 };
        let mut down = Vec::new();
        for m in ["a", "b"] {
            let gate = by_hand
                .linear_rows(&format!("{m}.w1"), 0..4, &x, 2)
                .unwrap();
            let up = by_hand
                .linear_rows(&format!("{m}.w3"), 0..4, &x, 2)
                .unwrap();
            let act = super::super::moe::swiglu(&gate, &up, 1.5);
            down.push(
                by_hand
                    .linear_rows(&format!("{m}.w2"), 0..3, &act, 2)
                    .unwrap(),
            );
        }
        assert_eq!(got[2], down[0]);
        assert_eq!(got[5], down[1]);
        assert!(
            got[0].is_empty() && got[1].is_empty(),
            "internal links are not returned"
        );
        // per token: a's three outputs, then b's
        let cat: Vec<f32> = (0..2)
            .flat_map(|t| [&down[0][t * 3..t * 3 + 3], &down[1][t * 3..t * 3 + 3]].concat())
            .collect();
        assert_eq!(got[6], by_hand.linear_rows("o", 0..2, &cat, 2).unwrap());
    }

    #[test]
    fn a_link_may_only_read_earlier_links_of_its_token_count() {
        let x = [1.0f32, 2.0];
        let ahead = [link(Input::Concat(vec![1])), link(Input::Host(&x))];
        assert!(levels(&ahead).is_err());
        let mut two = link(Input::Host(&x));
        two.tokens = 2;
        assert!(levels(&[two, link(Input::Concat(vec![0]))]).is_err());
    }
}
