//! The registry API end to end with a test-local adapter: a "bigram" model over the artifact's
//! plain BF16 `embed.weight` and `head.weight` (logits = head · embed[id], on the CPU), run
//! through `minirun-run`'s one open path (`run::run_with`) resident and streamed. It shows
//! what a family adapter plugs into and that the greedy loop, EOS handling, logits dump and
//! per-forward loads behave; the DeepSeek V4 adapter replaces it for `deepseek-v4`.

use clap::Parser;
use runner::adapter::{Model, ModelOptions, Residency};
use runner::artifact::{tokenizer_of, OpenOptions, VerifiedArtifact};
use runner::error::RunError;
use runner::llama::Logits;
use runner::registry::Entry;
use runner::run::run_with;
use runner::run::RunArgs;
use runner::sequence::{Feed, Sequence, Slots, StateKind};

use super::{engine, fixture};

fn bf16s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(2)
        .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
        .collect()
}

struct Bigram<'a> {
    art: &'a VerifiedArtifact,
    /// (embed, head) kept when resident; loaded again every forward when streamed.
    weights: Option<(Vec<f32>, Vec<f32>)>,
    hidden: usize,
    vocab: usize,
    capacity: usize,
    pos: usize,
    slots: Slots,
}

fn load(a: &VerifiedArtifact) -> Result<(Vec<f32>, Vec<f32>), RunError> {
    let e = bf16s(&a.load_plain("embed.weight")?.read()?);
    let h = bf16s(&a.load_plain("head.weight")?.read()?);
    Ok((e, h))
}

fn logits(embed: &[f32], head: &[f32], hidden: usize, id: u32) -> Vec<f32> {
    let x = &embed[id as usize * hidden..][..hidden];
    head.chunks_exact(hidden)
        .map(|row| row.iter().zip(x).map(|(w, v)| w * v).sum())
        .collect()
}

impl Model for Bigram<'_> {
    fn vocab(&self) -> usize {
        self.vocab
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    /// A bigram keeps nothing of a position but its count: any prefix is kept.
    fn state_kind(&self) -> StateKind {
        StateKind::Positions
    }
    fn begin(&mut self) -> Result<Sequence, RunError> {
        self.pos = 0;
        self.slots.begin()
    }
    fn end(&mut self, seq: Sequence) {
        self.slots.end(seq)
    }
    fn step(&mut self, feeds: &[Feed<'_>], which: Logits) -> Result<Vec<Vec<f32>>, RunError> {
        let (_, f) = self.slots.one(feeds)?;
        let mut buf = [0u32; 1];
        let ids = f.input.ids(&mut buf);
        let fresh;
        let (e, h) = match &self.weights {
            Some((e, h)) => (e, h),
            None => {
                fresh = load(self.art)?;
                (&fresh.0, &fresh.1)
            }
        };
        let rows = match which {
            Logits::Last => &ids[ids.len().saturating_sub(1)..],
            Logits::All => ids,
        };
        self.pos += ids.len();
        Ok(vec![rows
            .iter()
            .flat_map(|&id| logits(e, h, self.hidden, id))
            .collect()])
    }
    fn position(&self, seq: &Sequence) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        Ok(self.pos)
    }
    fn rewind(&mut self, seq: &Sequence, n: usize) -> Result<usize, RunError> {
        self.slots.slot(seq)?;
        self.pos = self.pos.min(n);
        Ok(self.pos)
    }
    fn savable(&self, _seq: &Sequence, n: usize) -> usize {
        n.min(self.pos)
    }
}

fn open_bigram<'a>(
    a: &'a VerifiedArtifact,
    o: &ModelOptions<'a>,
) -> Result<Box<dyn Model + 'a>, RunError> {
    let hidden = a.config()["hidden_size"].as_u64().unwrap_or(0) as usize;
    let vocab = a.vocab_size() as usize;
    let weights = match o.residency {
        Residency::Resident => Some(load(a)?),
        Residency::Streamed => None,
    };
    Ok(Box::new(Bigram {
        art: a,
        weights,
        hidden,
        vocab,
        capacity: o.capacity,
        pos: 0,
        slots: Slots::new(1),
    }))
}

pub static TOY: [Entry; 1] = [Entry {
    family: "deepseek-v4",
    open: open_bigram,
    tokenizer: tokenizer_of,
    chat: runner::deepseek::entry::chat,
}];

#[test]
fn a_registered_adapter_runs_through_the_artifact_path() {
    if engine("a_registered_adapter_runs_through_the_artifact_path").is_none() {
        return;
    }
    let fx = fixture();
    let dir = fx.consumer.to_str().unwrap();
    let npy = tempfile::tempdir().unwrap();
    let dump = npy.path().join("l.npy");
    let args = |mode: &str| {
        RunArgs::try_parse_from([
            "minirun-run",
            "--artifact",
            dir,
            "--prompt-ids",
            "2,17,300",
            "-n",
            "5",
            "--ignore-eos",
            mode,
            "--dump-logits",
            dump.to_str().unwrap(),
        ])
        .unwrap()
    };
    // A family with no registered runner: verified, reported as not chat-capable, never guessed.
    let err = run_with(&args("--resident"), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("is verified, not chat-capable: no runner is registered for its family"),
        "{err}"
    );
    let resident = run_with(&args("--resident"), &TOY).unwrap();
    let streamed = run_with(&args("--stream"), &TOY).unwrap();
    // An independent greedy chain over the same bytes.
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    let (e, h) = load(&a).unwrap();
    let mut id = 300;
    let mut want = Vec::new();
    for _ in 0..5 {
        let l = logits(&e, &h, 256, id);
        id = kernels::reference::argmax(&l, l.len())[0];
        want.push(id);
    }
    assert_eq!(resident.tokens, want);
    assert_eq!(streamed.tokens, want);
    assert_eq!(resident.prompt_ids, vec![2, 17, 300]);
    assert_eq!(resident.logits.len(), 5);
    assert!(resident.logits.iter().all(|r| r.len() == 512));
    for (x, y) in resident.logits.iter().zip(&streamed.logits) {
        assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()));
    }
    // A text prompt goes through the verified tokenizer.json.
    let tok = tokenizer_of(&a).unwrap();
    assert_eq!((tok.bos, tok.eos), (Some(0), Some(1)));
    assert!(!tok.encode("<｜User｜>hello").unwrap().is_empty());
}

/// `--chat` on an artifact: the family's chat format (DeepSeek V4's encoding for the generated
/// V4 artifact, which carries no template) renders the system and user messages, and the
/// rendered text's BOS is the only one (the family prepends BOS to plain prompts).
#[test]
fn chat_renders_the_family_format_with_one_bos() {
    if engine("chat_renders_the_family_format_with_one_bos").is_none() {
        return;
    }
    let fx = fixture();
    let dir = fx.consumer.to_str().unwrap();
    let args = RunArgs::try_parse_from([
        "minirun-run",
        "--artifact",
        dir,
        "--chat",
        "--system",
        "Be brief.",
        "-p",
        "hello",
        "-n",
        "2",
        "--ignore-eos",
    ])
    .unwrap();
    let out = run_with(&args, &TOY).unwrap();
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    let format = runner::deepseek::entry::chat(&a).unwrap();
    assert!(matches!(
        format,
        runner::chat::ChatFormat::Encoder(_, runner::chat::Mode::Chat)
    ));
    assert_eq!(
        format.describe(),
        "DeepSeek V4's chat encoding (deepseek-recipe, chat mode)"
    );
    let text = format
        .render(
            &[
                runner::chat::Message::new("system", "Be brief."),
                runner::chat::Message::new("user", "hello"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(
        text,
        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>hello<｜Assistant｜></think>"
    );
    let mut tok = tokenizer_of(&a).unwrap();
    tok.add_bos = true;
    let ids = tok.encode(&text).unwrap();
    assert_eq!(out.prompt_ids, ids);
    assert_eq!(ids.iter().filter(|&&i| i == 0).count(), 1, "{ids:?}");
    // the markers are the tokenizer's special tokens, not spelled out
    assert!(
        ids.contains(&2) && ids.contains(&3) && ids.contains(&5),
        "{ids:?}"
    );
    assert_eq!(out.tokens.len(), 2);
}

/// `minirun-run -i --artifact` (issue 17 item 4 for artifacts): a session over an artifact
/// adapter in the family's chat format. An adapter that can only rewind to the start is fed the
/// whole conversation again on the next turn; one that can rewind reuses the previous turns from
/// its cache (the V4 adapter's snapshots: `prompt_cache.rs`).
/// A model that can only start again: the conversation is fed whole each turn.
pub(super) struct StartOnly<'a>(pub(super) Box<dyn Model + 'a>);

impl Model for StartOnly<'_> {
    fn vocab(&self) -> usize {
        self.0.vocab()
    }
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    fn state_kind(&self) -> StateKind {
        StateKind::Snapshots
    }
    fn begin(&mut self) -> Result<Sequence, RunError> {
        self.0.begin()
    }
    fn end(&mut self, seq: Sequence) {
        self.0.end(seq)
    }
    fn step(&mut self, feeds: &[Feed<'_>], which: Logits) -> Result<Vec<Vec<f32>>, RunError> {
        self.0.step(feeds, which)
    }
    fn position(&self, seq: &Sequence) -> Result<usize, RunError> {
        self.0.position(seq)
    }
    fn rewind(&mut self, seq: &Sequence, _n: usize) -> Result<usize, RunError> {
        self.0.rewind(seq, 0)
    }
    fn savable(&self, _seq: &Sequence, _n: usize) -> usize {
        0
    }
}

#[test]
fn an_artifact_session_talks_in_the_family_format() {
    use runner::session::Session;
    if engine("an_artifact_session_talks_in_the_family_format").is_none() {
        return;
    }
    let fx = fixture();
    let a = VerifiedArtifact::open(&fx.consumer, &OpenOptions::default()).unwrap();
    let engine = runner::engine::Engine::new().unwrap();
    let opts = ModelOptions::from_flags(&engine, false, 256, 0);
    assert_eq!(opts.residency, Residency::Resident);
    let mut tok = tokenizer_of(&a).unwrap();
    tok.add_bos = true;
    let greedy = || {
        runner::sample::Sampler::new(runner::sample::SamplingParams {
            temperature: 0.0,
            ..Default::default()
        })
    };
    for start_only in [false, true] {
        let inner = open_bigram(&a, &opts).unwrap();
        let mut d: Box<dyn Model> = if start_only {
            Box::new(StartOnly(inner))
        } else {
            inner
        };
        let seq = d.begin().unwrap();
        let format = runner::deepseek::entry::chat(&a).unwrap();
        let mut s = Session::new(
            d.as_mut(),
            seq,
            &tok,
            format,
            greedy(),
            Some("Be brief.".into()),
            256,
            3,
        )
        .unwrap();
        let mut first = String::new();
        let t1 = s.turn("hello", &mut |p| first.push_str(p)).unwrap();
        assert_eq!((t1.reused, t1.generated), (0, 3));
        let t2 = s.turn("again", &mut |_| {}).unwrap();
        // the rendered conversation: system, two user turns, the first answer closed by EOS
        let text = runner::deepseek::chat::render(
            &[
                runner::chat::Message::new("system", "Be brief."),
                runner::chat::Message::new("user", "hello"),
                runner::chat::Message::new("assistant", &first),
                runner::chat::Message::new("user", "again"),
            ],
            true,
        )
        .unwrap();
        let ids = tok.encode(&text).unwrap();
        assert_eq!(t2.reused + t2.fed, ids.len(), "start_only {start_only}");
        if start_only {
            assert_eq!(t2.reused, 0, "a start-only adapter is fed everything again");
        } else {
            assert!(t2.reused > t1.fed / 2, "{t1:?} {t2:?}");
        }
    }
}
