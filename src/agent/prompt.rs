//! System prompt in history ([reference
//! §4.1](crate::manual::reference#41-system-prompt-in-history)): which surface change, if any,
//! brings the rendered prompt onto the surface.
//!
//! Appending a new system node keeps every earlier byte of the request, so on routes that
//! take prompt updates in history a continuing request series never rewrites its prefix.

use crate::session::SurfaceNode;
use crate::vocab::Message;

/// What §4.1 does to the surface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PromptChange {
    /// Append a system node with this text.
    Append(String),
    /// Replace surface node `index` with a system node with this text (empty text = no
    /// blocks).
    Replace { index: usize, text: String },
}

/// The first and the latest prompt node of a surface's first `len` nodes.
#[derive(Clone, Debug, Default)]
pub(crate) struct PromptNodes {
    pub len: usize,
    pub first: Option<usize>,
    pub latest: Option<(usize, Message)>,
}

impl PromptNodes {
    /// `self` (of the surface's first `self.len` nodes, unchanged since) extended over the
    /// nodes after them: O(new nodes).
    pub(crate) fn extended(mut self, surface: &imbl::Vector<SurfaceNode>) -> PromptNodes {
        let from = self.len.min(surface.len());
        // `skip` on the vector, O(log n); on its iterator it would walk the first `from` nodes.
        for (i, node) in (from..).zip(surface.skip(from).iter()) {
            // A prompt node is a system message written as a prompt; other system-role
            // messages (a compaction summary, an application's note) are not prompts.
            if let SurfaceNode::Message(m) = node
                && m.is_prompt()
            {
                self.first.get_or_insert(i);
                self.latest = Some((i, m.clone()));
            }
        }
        self.len = surface.len();
        self
    }
}

/// [reference §4.1](crate::manual::reference#41-system-prompt-in-history) over the current surface.
/// O(surface).
#[cfg(test)]
pub(crate) fn prompt_change(
    surface: &imbl::Vector<SurfaceNode>,
    rendered: &str,
    in_history: bool,
    prompt_series: bool,
) -> Option<PromptChange> {
    let nodes = PromptNodes::default().extended(surface);
    prompt_change_at(&nodes, rendered, in_history, prompt_series)
}

/// [reference §4.1](crate::manual::reference#41-system-prompt-in-history) given the surface's
/// prompt nodes.
pub(crate) fn prompt_change_at(
    nodes: &PromptNodes,
    rendered: &str,
    in_history: bool,
    prompt_series: bool,
) -> Option<PromptChange> {
    let (Some(first), Some((latest, latest_msg))) = (nodes.first, nodes.latest.as_ref()) else {
        return (!rendered.is_empty()).then(|| PromptChange::Append(rendered.to_owned()));
    };
    if latest_msg.text() == rendered {
        return None;
    }
    let latest = *latest;
    let replace = |index| PromptChange::Replace {
        index,
        text: rendered.to_owned(),
    };
    Some(if !in_history || rendered.is_empty() {
        replace(latest)
    } else if !prompt_series {
        PromptChange::Append(rendered.to_owned())
    } else if latest == first {
        // Node 0 is the only live system node.
        replace(first)
    } else {
        // Later system nodes are live: a replace range cannot merge non-adjacent nodes.
        PromptChange::Append(rendered.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Message, MessageSource, Role};
    use PromptChange::*;

    fn surface(nodes: &[(&str, &str)]) -> imbl::Vector<SurfaceNode> {
        nodes
            .iter()
            .enumerate()
            .map(|(i, (role, text))| {
                let id = format!("m{i}");
                SurfaceNode::Message(match *role {
                    "s" => Message::system(id, *text),
                    _ => Message::user(id, *text),
                })
            })
            .collect()
    }

    /// Every row of the [reference §4.1](crate::manual::reference#41-system-prompt-in-history)
    /// table.
    #[test]
    fn spec_table() {
        let one = surface(&[("s", "P1"), ("u", "hi")]);
        let two = surface(&[("s", "P1"), ("u", "hi"), ("s", "P2"), ("u", "x")]);
        type Row<'a> = (
            &'a str,
            &'a imbl::Vector<SurfaceNode>,
            &'a str,
            bool,
            bool,
            Option<PromptChange>,
        );
        let rows: [Row<'_>; 11] = [
            (
                "no live node, non-empty",
                &surface(&[("u", "hi")]),
                "P",
                true,
                false,
                Some(Append("P".into())),
            ),
            (
                "no live node, empty",
                &surface(&[("u", "hi")]),
                "",
                true,
                true,
                None,
            ),
            ("rendered = effective", &two, "P2", true, true, None),
            (
                "rendered = node 0 but not effective",
                &two,
                "P1",
                true,
                false,
                Some(Append("P1".into())),
            ),
            (
                "no in-history: replace latest",
                &two,
                "P3",
                false,
                false,
                Some(Replace {
                    index: 2,
                    text: "P3".into(),
                }),
            ),
            (
                "no in-history, one node",
                &one,
                "P3",
                false,
                true,
                Some(Replace {
                    index: 0,
                    text: "P3".into(),
                }),
            ),
            (
                "in-history, empty",
                &two,
                "",
                true,
                false,
                Some(Replace {
                    index: 2,
                    text: String::new(),
                }),
            ),
            (
                "in-history, series continues",
                &one,
                "P2",
                true,
                false,
                Some(Append("P2".into())),
            ),
            (
                "in-history, new series, node 0 only",
                &one,
                "P2",
                true,
                true,
                Some(Replace {
                    index: 0,
                    text: "P2".into(),
                }),
            ),
            (
                "in-history, new series, later nodes live",
                &two,
                "P3",
                true,
                true,
                Some(Append("P3".into())),
            ),
            (
                "in-history, new series, empty",
                &one,
                "",
                true,
                true,
                Some(Replace {
                    index: 0,
                    text: String::new(),
                }),
            ),
        ];
        for (name, s, rendered, in_history, series, expect) in rows {
            assert_eq!(
                prompt_change(s, rendered, in_history, series),
                expect,
                "{name}"
            );
        }
    }

    #[test]
    fn system_messages_that_are_not_prompts_are_never_replaced() {
        let summary = Message::new(
            "sum",
            Role::System,
            vec![crate::vocab::ContentBlock::text("summary of turns 1-9")],
            MessageSource::other(serde_json::json!({"kind": "compaction"})).unwrap(),
        );
        let s: imbl::Vector<SurfaceNode> = [SurfaceNode::Message(summary)].into_iter().collect();
        // No prompt node is live: the prompt is appended, the summary stays.
        assert_eq!(prompt_change(&s, "P", true, true), Some(Append("P".into())));
        assert_eq!(
            prompt_change(&s, "P", false, true),
            Some(Append("P".into()))
        );
    }

    #[test]
    fn opaque_nodes_are_not_system_nodes() {
        let mut s = surface(&[("s", "P1")]);
        s.push_back(SurfaceNode::Opaque(crate::vocab::Seq(3)));
        assert_eq!(
            prompt_change(&s, "P2", true, true),
            Some(Replace {
                index: 0,
                text: "P2".into()
            })
        );
    }
}
