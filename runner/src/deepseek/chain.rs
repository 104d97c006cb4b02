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
            Input::Host(_) => Vec::new(),
            Input::Concat(v) => v.clone(),
            Input::SwiGlu { gate, up, .. } => vec![*gate, *up],
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
        let mut derived = Vec::with_capacity(at.len());
        for &i in &at {
            derived.push(derive(l, links, i, &outs)?);
        }
        let products: Vec<Product<'_>> = at
            .iter()
            .zip(&derived)
            .map(|(&i, d)| Product {
                stem: links[i].stem.clone(),
                rows: links[i].rows.clone(),
                x: match (&links[i].input, d) {
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

/// Link `i`'s input where it is derived from earlier outputs (`None` for a host input).
fn derive<L: Linears + ?Sized>(
    l: &mut L,
    links: &[Link<'_>],
    i: usize,
    outs: &[Option<Vec<f32>>],
) -> Result<Option<Vec<f32>>, V4Error> {
    let out = |r: usize| {
        outs.get(r)
            .and_then(Option::as_deref)
            .ok_or_else(|| V4Error::Input(format!("chained product {r} has no output yet")))
    };
    let tokens = links[i].tokens;
    Ok(match &links[i].input {
        Input::Host(_) => None,
        Input::Concat(reads) => {
            let mut x = Vec::new();
            for t in 0..tokens {
                for &r in reads {
                    let n = links[r].rows.len();
                    let y = out(r)?;
                    x.extend_from_slice(y.get(t * n..(t + 1) * n).unwrap_or_default());
                }
            }
            Some(x)
        }
        Input::SwiGlu { gate, up, limit } => Some(l.swiglu(out(*gate)?, out(*up)?, *limit)?),
    })
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
