//! The `flip-*` faults (docs/hub.md §5): one bit inverted in one request kind's answer or upload
//! body, as a link, proxy or mirror without end-to-end integrity would. Which kind a request is
//! comes from its method and route; what a rule's `@param` names is the bit of the *file* for
//! ranged file answers (so a test can aim at one byte of one header) and of the *body* otherwise;
//! without it a bit is drawn at random where the fault fires.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};

use super::faults::{FaultMode, FlipKind, RANDOM_BIT};
use super::routes_read::Source;
use super::AppState;

/// Largest answer body a flip buffers (JSON answers are far smaller).
const MAX_ANSWER: usize = 64 << 20;

/// The headers of a `HEAD /resolve` answer a `flip-resolve` fault may corrupt, in bit order.
const RESOLVE_HEADERS: [&str; 5] = [
    "x-repo-commit",
    "etag",
    "x-linked-etag",
    "x-linked-size",
    "location",
];

/// The upload kind whose request body a flip corrupts, if `method segs` is one.
pub(crate) fn request_kind(method: &Method, segs: &[String]) -> Option<FlipKind> {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match (method.as_str(), s.as_slice()) {
        ("PUT" | "POST", ["lfs-upload", ..]) => Some(FlipKind::Put),
        ("POST", ["lfs-verify", ..]) => Some(FlipKind::Verify),
        ("POST", ["api", _, _, _, "preupload", ..]) => Some(FlipKind::Preupload),
        ("POST", ["api", _, _, _, "commit", ..]) => Some(FlipKind::Commit),
        ("POST", [.., "info", "lfs", "objects", "batch"]) => Some(FlipKind::LfsBatch),
        _ => None,
    }
}

/// The read kind whose answer (JSON body, or `HEAD /resolve` headers) a flip corrupts.
pub(crate) fn answer_kind(method: &Method, segs: &[String]) -> Option<FlipKind> {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match (method.as_str(), s.as_slice()) {
        ("GET", ["api", _, _, _]) | ("GET", ["api", _, _, _, "revision", ..]) => {
            Some(FlipKind::Revision)
        }
        ("GET", ["api", _, _, _, "tree", ..]) => Some(FlipKind::Tree),
        ("POST", ["api", _, _, _, "paths-info", ..]) => Some(FlipKind::PathsInfo),
        ("HEAD", [_, _, "resolve", ..])
        | ("HEAD", ["datasets" | "spaces", _, _, "resolve", ..]) => Some(FlipKind::Resolve),
        _ => None,
    }
}

/// `body` with one bit inverted when a `flip-<kind>` rule fires for this request.
pub(crate) fn request_body(
    st: &AppState,
    kind: FlipKind,
    path: &str,
    headers: &HeaderMap,
    body: Body,
) -> Body {
    let mode = FaultMode::Flip(kind);
    if !st.faults.armed(mode) {
        return body;
    }
    // Without a length (a chunked body) a random bit lands in the first 64 bytes.
    let bits = content_length(headers).unwrap_or(64).saturating_mul(8);
    match st
        .faults
        .fire_where(mode, path, |b| b == RANDOM_BIT || b < bits)
    {
        Some(p) if bits > 0 => {
            let bit = pick(p, bits);
            log_flip(kind, "request body", bit, path);
            Body::from_stream(flip_stream(body.into_data_stream(), bit))
        }
        _ => body,
    }
}

/// `r` with one bit of its JSON body (or, for `HEAD /resolve`, of one header value) inverted
/// when a `flip-<kind>` rule fires for this request. Error answers are left alone.
pub(crate) async fn answer(st: &AppState, kind: FlipKind, path: &str, r: Response) -> Response {
    let mode = FaultMode::Flip(kind);
    if !st.faults.armed(mode) || !r.status().is_success() {
        return r;
    }
    if kind == FlipKind::Resolve {
        return resolve_headers(st, path, r);
    }
    let (parts, body) = r.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let bits = bytes.len() as u64 * 8;
    let body = match st
        .faults
        .fire_where(mode, path, |b| b == RANDOM_BIT || b < bits)
    {
        Some(p) if bits > 0 => {
            let mut v = bytes.to_vec();
            let bit = pick(p, bits);
            log_flip(kind, "answer body", bit, path);
            flip_bit(&mut v, bit);
            Bytes::from(v)
        }
        _ => bytes,
    };
    Response::from_parts(parts, Body::from(body))
}

/// One bit of one of [`RESOLVE_HEADERS`] inverted (a bit whose flip would make the value
/// unsendable moves on to the next bit).
fn resolve_headers(st: &AppState, path: &str, mut r: Response) -> Response {
    let h = r.headers_mut();
    let values: Vec<(&str, Vec<u8>)> = RESOLVE_HEADERS
        .iter()
        .filter_map(|k| h.get(*k).map(|v| (*k, v.as_bytes().to_vec())))
        .collect();
    let bits: u64 = values.iter().map(|(_, v)| v.len() as u64 * 8).sum();
    let Some(p) = st
        .faults
        .fire_where(FaultMode::Flip(FlipKind::Resolve), path, |b| {
            b == RANDOM_BIT || b < bits
        })
    else {
        return r;
    };
    if bits == 0 {
        return r;
    }
    let start = pick(p, bits);
    for step in 0..bits {
        let mut bit = (start + step) % bits;
        for (name, value) in &values {
            let n = value.len() as u64 * 8;
            if bit >= n {
                bit -= n;
                continue;
            }
            let mut v = value.clone();
            flip_bit(&mut v, bit);
            if let Ok(hv) = HeaderValue::from_bytes(&v) {
                log_flip(FlipKind::Resolve, name, bit, path);
                h.insert(*name, hv);
                return r;
            }
            break;
        }
    }
    r
}

/// Which file-answer kind a GET of `src` (of `size` bytes) for the closed `range` (inclusive)
/// is: a range inside a safetensors header `[0, 8+N)` is a header read, any other a payload read,
/// and no closed range (none, or `bytes=A-`) a whole-file read.
pub(crate) async fn file_kind(
    st: &AppState,
    src: &Source,
    size: u64,
    range: Option<(u64, u64)>,
) -> Option<FlipKind> {
    let Some((_, last)) = range else {
        return st
            .faults
            .armed(FaultMode::Flip(FlipKind::Root))
            .then_some(FlipKind::Root);
    };
    let header = st.faults.armed(FaultMode::Flip(FlipKind::Header));
    let payload = st.faults.armed(FaultMode::Flip(FlipKind::Payload));
    if !header && !payload {
        return None;
    }
    let end = safetensors_header_end(src, size).await.unwrap_or(0);
    Some(if last < end {
        FlipKind::Header
    } else {
        FlipKind::Payload
    })
}

/// A file answer's body: `stream` as it is, or through [`file_body`] when `kind` is armed.
pub(crate) fn maybe<S, E>(
    st: &AppState,
    kind: Option<FlipKind>,
    path: &str,
    span: (u64, u64),
    stream: S,
) -> Body
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<axum::BoxError> + 'static,
{
    match kind {
        Some(k) => file_body(st, k, path, span, stream),
        None => Body::from_stream(stream),
    }
}

/// A file answer's body stream with one file bit inverted when a `flip-<kind>` rule fires: the
/// answer carries file bytes `[start, start + len)`.
pub(crate) fn file_body<S, E>(
    st: &AppState,
    kind: FlipKind,
    path: &str,
    (start, len): (u64, u64),
    stream: S,
) -> Body
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<axum::BoxError> + 'static,
{
    let inside = |b: u64| b / 8 >= start && b / 8 < start + len;
    match st.faults.fire_where(FaultMode::Flip(kind), path, |b| {
        b == RANDOM_BIT || inside(b)
    }) {
        Some(p) if len > 0 => {
            let bit = if p == RANDOM_BIT {
                pick(p, len * 8)
            } else {
                p - start * 8
            };
            log_flip(kind, "file", start * 8 + bit, path);
            Body::from_stream(flip_stream(stream, bit))
        }
        _ => Body::from_stream(stream),
    }
}

/// `8 + N` of a safetensors file (its length prefix and JSON header), when `src` is one.
async fn safetensors_header_end(src: &Source, size: u64) -> Option<u64> {
    let head: Vec<u8> = match src {
        Source::Mem(b) => b.get(..9)?.to_vec(),
        Source::File(p) => {
            use tokio::io::AsyncReadExt as _;
            let mut f = tokio::fs::File::open(p).await.ok()?;
            let mut buf = vec![0u8; 9];
            f.read_exact(&mut buf).await.ok()?;
            buf
        }
    };
    let n = u64::from_le_bytes(head.get(..8)?.try_into().ok()?);
    let end = n.checked_add(8)?;
    (end <= size && head.get(8) == Some(&b'{')).then_some(end)
}

/// One line per fired flip, at info level (what the tests and a campaign's log read).
fn log_flip(kind: FlipKind, what: &str, bit: u64, path: &str) {
    tracing::info!(
        "injected fault: flip-{} inverted bit {bit} of the {what} of {path}",
        kind.name()
    );
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The bit a fired rule names, or one drawn at random below `bits`.
fn pick(param: u64, bits: u64) -> u64 {
    if param == RANDOM_BIT {
        rand::random::<u64>() % bits
    } else {
        param
    }
}

fn flip_bit(v: &mut [u8], bit: u64) {
    if let Some(b) = usize::try_from(bit / 8).ok().and_then(|i| v.get_mut(i)) {
        *b ^= 1 << (bit % 8);
    }
}

/// `s` with bit `bit` of its concatenated bytes inverted.
fn flip_stream<S, E>(s: S, bit: u64) -> impl Stream<Item = Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    let byte = bit / 8;
    let mut pos = 0u64;
    s.map(move |item| {
        item.map(|chunk| {
            let start = pos;
            pos += chunk.len() as u64;
            if (start..pos).contains(&byte) {
                let mut v = chunk.to_vec();
                flip_bit(&mut v, (byte - start) * 8 + bit % 8);
                Bytes::from(v)
            } else {
                chunk
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<String> {
        p.split('/').skip(1).map(str::to_owned).collect()
    }

    #[test]
    fn kinds_follow_the_routes() {
        let g = Method::GET;
        let p = Method::POST;
        assert_eq!(
            answer_kind(&g, &segs("/api/models/o/n")),
            Some(FlipKind::Revision)
        );
        assert_eq!(
            answer_kind(&g, &segs("/api/models/o/n/revision/main")),
            Some(FlipKind::Revision)
        );
        assert_eq!(
            answer_kind(&g, &segs("/api/models/o/n/tree/main")),
            Some(FlipKind::Tree)
        );
        assert_eq!(
            answer_kind(&p, &segs("/api/models/o/n/paths-info/main")),
            Some(FlipKind::PathsInfo)
        );
        assert_eq!(
            answer_kind(&Method::HEAD, &segs("/o/n/resolve/main/a.bin")),
            Some(FlipKind::Resolve)
        );
        assert_eq!(answer_kind(&g, &segs("/o/n/resolve/main/a.bin")), None);
        assert_eq!(
            request_kind(&Method::PUT, &segs("/lfs-upload/x")),
            Some(FlipKind::Put)
        );
        assert_eq!(
            request_kind(&p, &segs("/lfs-verify/x")),
            Some(FlipKind::Verify)
        );
        assert_eq!(
            request_kind(&p, &segs("/api/models/o/n/preupload/main")),
            Some(FlipKind::Preupload)
        );
        assert_eq!(
            request_kind(&p, &segs("/api/models/o/n/commit/main")),
            Some(FlipKind::Commit)
        );
        assert_eq!(
            request_kind(&p, &segs("/o/n.git/info/lfs/objects/batch")),
            Some(FlipKind::LfsBatch)
        );
        assert_eq!(request_kind(&g, &segs("/api/models/o/n/commit/main")), None);
    }

    #[test]
    fn the_stream_flip_lands_on_one_bit_across_chunk_boundaries() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for bit in 0..48u64 {
            let items = [&b"abc"[..], &b"def"[..]]
                .map(|c| Ok::<_, std::io::Error>(Bytes::copy_from_slice(c)));
            let out: Vec<u8> = rt.block_on(
                flip_stream(futures_util::stream::iter(items), bit)
                    .map(|c| c.unwrap().to_vec())
                    .concat(),
            );
            let mut want = b"abcdef".to_vec();
            want[(bit / 8) as usize] ^= 1 << (bit % 8);
            assert_eq!(out, want, "bit {bit}");
        }
    }
}
