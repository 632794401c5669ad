//! Property tests of reference §2 persistence: random valid logs, written with random whitespace,
//! key orders, number spellings and string escapes, load and save byte for byte; appending
//! after loading writes the loaded lines verbatim and the new lines compactly; a cut inside
//! the last line is a torn tail.

mod support;

use std::fs;

use mektpoy::{
    Config, Event, Message, Session,
    event::{Reason, RequestHeader},
};
use proptest::prelude::*;
use support::{header, tool, user};

/// A JSON value whose text is chosen at render time (spacing, key order, escapes). Numbers
/// keep their spelling.
#[derive(Clone, Debug)]
enum J {
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn s(v: &str) -> J {
    J::Str(v.to_owned())
}

fn int(n: usize) -> J {
    J::Num(n.to_string())
}

fn obj(fields: Vec<(&str, J)>) -> J {
    J::Obj(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Spellings serde_json reads (none overflows `f64`).
const NUMBERS: [&str; 16] = [
    "0",
    "-0",
    "1",
    "1.0",
    "1.50",
    "1.0e2",
    "1E5",
    "1e+2",
    "100",
    "-3",
    "2.5e-3",
    "0.1",
    "-0.0",
    "7E-1",
    "12345678901234567890",
    "123456789012345678901234",
];

/// Deterministic choices for one rendering (xorshift64*).
struct Style(u64);

impl Style {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len())]
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn ws(&mut self, out: &mut String) {
        out.push_str(self.pick(&["", "", "", "", "", " ", "  ", "\t", "\r", " \t\r "]));
    }

    fn number(&mut self) -> J {
        J::Num(self.pick(&NUMBERS).to_owned())
    }
}

fn render(j: &J, st: &mut Style, out: &mut String) {
    match j {
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(v) => render_str(v, st, out),
        J::Arr(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                st.ws(out);
                if i > 0 {
                    out.push(',');
                    st.ws(out);
                }
                render(x, st, out);
            }
            st.ws(out);
            out.push(']');
        }
        J::Obj(fields) => {
            let mut order: Vec<&(String, J)> = fields.iter().collect();
            if st.one_in(3) {
                for i in (1..order.len()).rev() {
                    let k = st.below(i + 1);
                    order.swap(i, k);
                }
            }
            out.push('{');
            for (i, (k, v)) in order.into_iter().enumerate() {
                st.ws(out);
                if i > 0 {
                    out.push(',');
                    st.ws(out);
                }
                render_str(k, st, out);
                st.ws(out);
                out.push(':');
                st.ws(out);
                render(v, st, out);
            }
            st.ws(out);
            out.push('}');
        }
    }
}

fn render_str(v: &str, st: &mut Style, out: &mut String) {
    out.push('"');
    for c in v.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '\r' => Some("\\r"),
            _ => None,
        };
        let must_escape = matches!(c, '"' | '\\') || (c as u32) < 0x20;
        if !must_escape && !st.one_in(6) {
            out.push(c);
        } else if let (Some(e), false) = (short, st.one_in(3)) {
            out.push_str(e);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                if st.one_in(2) {
                    out.push_str(&format!("\\u{u:04x}"));
                } else {
                    out.push_str(&format!("\\u{u:04X}"));
                }
            }
        }
    }
    out.push('"');
}

/// The tools a header may hold; descriptions and ids carry characters worth escaping.
const TOOL_NAMES: [&str; 4] = ["read", "write/all", "grép", "bash"];

/// A surface node of the generator's model: neither a call nor a result.
const OTHER: u8 = 0;
/// An assistant message holding the call `c1`.
const CALL: u8 = 1;
/// A tool result for `c1`.
const RESULT: u8 = 2;

/// Generates valid event lines from random choices, tracking what validity depends on.
struct Gen {
    st: Style,
    lines: Vec<String>,
    /// The surface, one [`OTHER`], [`CALL`] or [`RESULT`] per node.
    surface: Vec<u8>,
    /// Each header's `Seq` and tool names.
    headers: Vec<(usize, Vec<&'static str>)>,
}

impl Gen {
    fn push(&mut self, j: J) {
        let mut line = String::new();
        if self.st.one_in(8) {
            self.st.ws(&mut line);
        }
        render(&j, &mut self.st, &mut line);
        if self.st.one_in(8) {
            self.st.ws(&mut line);
        }
        self.lines.push(line);
    }

    fn tool(&mut self, name: &str) -> J {
        let mut fields = vec![
            ("name", s(name)),
            ("description", s(&format!("{name}: \"quoted\" / é 😀\n"))),
            (
                "parameters",
                obj(vec![
                    ("type", s("object")),
                    ("maximum", self.st.number()),
                    ("items", J::Arr(vec![self.st.number(), self.st.number()])),
                ]),
            ),
        ];
        if self.st.one_in(3) {
            fields.push(("deferLoading", J::Bool(self.st.one_in(2))));
        }
        if self.st.one_in(3) {
            fields.push(("annotations", obj(vec![("weight", self.st.number())])));
        }
        obj(fields)
    }

    /// Chooses the surface op of an event whose node is `node` ([`OTHER`], [`CALL`]: an
    /// assistant message holding call `c1`, [`RESULT`]: a result for `c1`), applies it to the
    /// model and renders it. An op that would leave a result without an earlier call (which
    /// `append` refuses) becomes an append, or no op when that would too.
    fn place(&mut self, choice: u8, a: u8, b: u8, node: u8) -> Option<J> {
        let op = match choice % 3 {
            0 => Some(None),
            1 => None,
            _ if self.surface.is_empty() => Some(None),
            _ => {
                let start = a as usize % self.surface.len();
                let end = start + b as usize % (self.surface.len() - start);
                Some(Some((start, end)))
            }
        };
        let after = |op: Option<(usize, usize)>| {
            let mut nodes = self.surface.clone();
            match op {
                None => nodes.push(node),
                Some((start, end)) => {
                    nodes.splice(start..=end, [node]);
                }
            }
            nodes
        };
        let answered = |nodes: &[u8]| {
            nodes
                .iter()
                .enumerate()
                .all(|(q, n)| *n != RESULT || nodes[..q].contains(&CALL))
        };
        let op = match op {
            Some(op) if answered(&after(op)) => Some(op),
            Some(_) if answered(&after(None)) => Some(None),
            _ => None,
        };
        let op = op?;
        self.surface = after(op);
        Some(match op {
            None => s("append"),
            Some((start, end)) => obj(vec![
                ("op", s("replace")),
                ("start", int(start)),
                ("end", int(end)),
            ]),
        })
    }

    fn event(&mut self, kind: u8, a: u8, b: u8, flag: bool) {
        let seq = self.lines.len();
        let id = format!("m{seq}/é");
        let mut envelope = vec![];
        match kind % 7 {
            0 => {
                let names: Vec<&'static str> = TOOL_NAMES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| a & (1 << i) != 0)
                    .map(|(_, n)| *n)
                    .collect();
                let mut config = vec![("provider", s("p/é")), ("model", s("m"))];
                if flag {
                    config.push(("max_tokens", self.st.number()));
                }
                let mut head = vec![("config", obj(config))];
                if !names.is_empty() || self.st.one_in(2) {
                    let tools = names.iter().map(|n| self.tool(n)).collect();
                    head.push(("tools", J::Arr(tools)));
                }
                if self.st.one_in(4) {
                    head.push(("x-extra", self.st.number()));
                }
                let reason = ["initial", "resume", "change", "series"][b as usize % 4];
                let mut data = vec![("header", obj(head)), ("reason", s(reason))];
                if b & 4 != 0 {
                    data.push(("startsSeries", J::Bool(b & 8 != 0)));
                }
                envelope.push(("type", s("request/header")));
                envelope.push(("data", obj(data)));
                self.headers.push((seq, names));
            }
            6 => {
                envelope.push(("type", s(&format!("x/{}", a % 5))));
                if flag {
                    envelope.push(("data", obj(vec![("v", self.st.number())])));
                }
                if let Some(op) = self.place(b, a, b / 3, OTHER) {
                    envelope.push(("surfaceOp", op));
                }
            }
            k => {
                let role = ["user", "assistant", "tool", "developer", "system"][k as usize - 1];
                let text = obj(vec![("type", s("text")), ("text", s("a \"b\"\n/ é 😀"))]);
                let mut header_seq = None;
                let (content, source) = match role {
                    "user" => (
                        vec![
                            text,
                            obj(vec![
                                ("type", s("image")),
                                ("url", s("http://x/y")),
                                ("size", self.st.number()),
                            ]),
                        ],
                        obj(vec![("kind", s("user"))]),
                    ),
                    "assistant" => (
                        vec![
                            obj(vec![
                                ("type", s("reasoning")),
                                ("text", s("hm")),
                                ("signature", s("c2ln")),
                            ]),
                            obj(vec![
                                ("type", s("tool-call")),
                                ("id", s("c1")),
                                ("name", s("read")),
                                ("arguments", s("{\"n\": 1.0e2}")),
                                ("cache", J::Bool(true)),
                            ]),
                        ],
                        obj(vec![
                            ("kind", s("model")),
                            ("provider", s("p")),
                            ("model", s("m")),
                        ]),
                    ),
                    "tool" => (
                        vec![text],
                        obj(vec![("kind", s("tool")), ("callId", s("c1"))]),
                    ),
                    "developer" => {
                        let mut blocks = Vec::new();
                        if let Some((hseq, names)) = self
                            .headers
                            .get(b as usize % self.headers.len().max(1))
                            .cloned()
                        {
                            for (i, n) in names.iter().enumerate() {
                                if a & (1 << i) != 0 {
                                    blocks.push(obj(vec![
                                        ("type", s("tool-addition")),
                                        ("toolName", s(n)),
                                    ]));
                                }
                            }
                            if !blocks.is_empty() || flag {
                                header_seq = Some(hseq);
                            }
                        }
                        for (i, n) in TOOL_NAMES.iter().enumerate() {
                            if a & (16 << i) != 0 {
                                blocks.push(obj(vec![
                                    ("type", s("tool-removal")),
                                    ("toolName", s(n)),
                                ]));
                            }
                        }
                        blocks.push(text);
                        (blocks, obj(vec![("kind", s("tool-registry"))]))
                    }
                    _ => (
                        vec![text],
                        if flag {
                            obj(vec![("kind", s("plugin")), ("n", self.st.number())])
                        } else {
                            obj(vec![("kind", s("system-prompt"))])
                        },
                    ),
                };
                let mut message = vec![
                    ("id", s(&id)),
                    ("role", s(role)),
                    ("content", J::Arr(content)),
                    ("source", source),
                ];
                if role == "tool" {
                    message.push(("isError", J::Bool(flag)));
                }
                if self.st.one_in(4) {
                    message.push(("meta", obj(vec![("n", self.st.number())])));
                }
                let mut data = Vec::new();
                if self.st.one_in(2) {
                    data.push(("turn", int(a as usize)));
                }
                data.push(("message", obj(message)));
                if let Some(h) = header_seq {
                    data.push(("headerSeq", int(h)));
                }
                envelope.push(("type", s(event_type(role))));
                envelope.push(("data", obj(data)));
                let node = match role {
                    "assistant" => CALL,
                    "tool" => RESULT,
                    _ => OTHER,
                };
                if let Some(op) = self.place(b, a, b / 3, node) {
                    envelope.push(("surfaceOp", op));
                }
            }
        }
        if self.st.one_in(5) {
            envelope.push(("ts", self.st.number()));
        }
        self.push(obj(envelope));
    }
}

fn event_type(role: &str) -> &'static str {
    support::event_type(role)
}

/// A random valid log: its text and its event lines.
fn log_text(seed: u64, specs: &[(u8, u8, u8, bool)], terminated: bool) -> (String, Vec<String>) {
    let mut g = Gen {
        st: Style(seed | 1),
        lines: Vec::new(),
        surface: Vec::new(),
        headers: Vec::new(),
    };
    for &(kind, a, b, flag) in specs {
        g.event(kind, a, b, flag);
    }
    let mut first = String::new();
    let mut fields = vec![
        ("type", s("session")),
        ("version", J::Num("0".into())),
        ("id", s("sess/é")),
    ];
    if seed.is_multiple_of(3) {
        fields.push(("app", obj(vec![("v", J::Num("1.50".into()))])));
    }
    render(&obj(fields), &mut g.st, &mut first);
    let mut text = first;
    for l in &g.lines {
        text.push('\n');
        text.push_str(l);
    }
    if terminated {
        text.push('\n');
    }
    (text, g.lines)
}

fn specs() -> impl Strategy<Value = Vec<(u8, u8, u8, bool)>> {
    prop::collection::vec((0u8..7, any::<u8>(), any::<u8>(), any::<bool>()), 0..24)
}

/// Events created in this process, and their compact lines written by hand.
fn new_events() -> Vec<(Event, String)> {
    vec![
        (
            Event::append(Message::user("new-1", "text of new-1")),
            user("new-1"),
        ),
        (
            Event::header(
                RequestHeader::new(Config::new("p", "m"), vec![tool("A"), tool("Bd")]),
                Reason::Change,
            ),
            header(&["A", "Bd"], "change"),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn load_save_is_byte_identical(seed in any::<u64>(), specs in specs(), terminated in any::<bool>()) {
        let (text, lines) = log_text(seed, &specs, terminated);

        // Every line is a valid event for append_json, and loading reads the same events.
        let appended = Session::new("x");
        for l in &lines {
            appended.append_json(l).unwrap_or_else(|e| panic!("{e}\n{l}"));
        }
        let loaded = Session::load_bytes(text.as_bytes()).unwrap();
        prop_assert_eq!(loaded.torn_tail, None);
        prop_assert_eq!(loaded.unterminated, !terminated);
        let session = loaded.session;
        prop_assert_eq!(session.events(), appended.events());

        prop_assert_eq!(session.to_jsonl(), text.clone());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        session.save(&path).unwrap();
        prop_assert_eq!(fs::read(&path).unwrap(), text.as_bytes());

        // Appending after loading: loaded lines verbatim, then the new lines compactly.
        let mut expected = text.clone();
        if !terminated {
            expected.push('\n');
        }
        for (event, line) in new_events() {
            session.append(event).unwrap();
            expected.push_str(&line);
            expected.push('\n');
        }
        prop_assert_eq!(session.to_jsonl(), expected.clone());

        // The same through a persisting session: open repairs the end, appends write lines.
        let path = dir.path().join("open.jsonl");
        fs::write(&path, &text).unwrap();
        let opened = Session::open(&path).unwrap().session;
        for (event, _) in new_events() {
            opened.append(event).unwrap();
        }
        prop_assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    }

    #[test]
    fn a_cut_inside_the_last_line_is_torn(
        seed in any::<u64>(),
        specs in specs(),
        cut in any::<prop::sample::Index>(),
    ) {
        let (text, lines) = log_text(seed, &specs, true);
        prop_assume!(!lines.is_empty());
        let last = lines.last().unwrap();
        let start = text.len() - last.len() - 1;
        let cut = cut.index(last.len()); // 0..len: at least one byte is lost
        let bytes = &text.as_bytes()[..start + cut];
        let loaded = Session::load_bytes(bytes).unwrap();
        // A cut that only loses trailing whitespace leaves a whole, valid line.
        let whole = content_len(&last.as_bytes()[..cut]) == content_len(last.as_bytes());
        let all = Session::load_bytes(text.as_bytes()).unwrap().session.events();
        if whole {
            prop_assert_eq!(loaded.torn_tail, None);
            prop_assert!(loaded.unterminated);
            prop_assert_eq!(loaded.session.events(), all);
        } else if cut == 0 {
            // Nothing of the last line is left: the file simply ends after the previous one.
            prop_assert_eq!(loaded.torn_tail, None);
            prop_assert_eq!(loaded.session.len(), lines.len() - 1);
        } else {
            prop_assert_eq!(support::torn(loaded.torn_tail), Some((start as u64, cut as u64, None)));
            prop_assert!(!loaded.unterminated);
            prop_assert_eq!(
                loaded.session.events().to_vec(),
                all.to_vec()[..lines.len() - 1].to_vec()
            );
        }
    }
}

/// Length without trailing JSON whitespace.
fn content_len(line: &[u8]) -> usize {
    line.iter()
        .rposition(|c| !matches!(c, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1)
}

#[test]
fn generated_logs_are_not_trivial() {
    // The generator must produce every event kind and odd spellings, or the properties
    // above prove little.
    let specs: Vec<_> = (0..7u8)
        .flat_map(|k| [(k, 0xff, 2, true), (k, 0x35, 7, false)])
        .collect();
    let (text, lines) = log_text(42, &specs, true);
    assert_eq!(lines.len(), 14);
    let loaded = Session::load_bytes(text.as_bytes()).unwrap().session;
    assert_eq!(loaded.len(), 14);
    assert_ne!(
        text,
        loaded_compact(&loaded),
        "the text is not the compact encoding"
    );
    assert!(text.contains("\\u") && text.contains('\t'), "{text}");
}

/// The log as if every event had been created in this process.
fn loaded_compact(s: &Session) -> String {
    let fresh = Session::new("sess/é");
    for e in s.events().iter() {
        fresh.append(e.clone()).unwrap();
    }
    fresh.to_jsonl()
}
