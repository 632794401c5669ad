//! Localized notices for tool changes ([reference §8](crate::manual::reference#8-notices)), for
//! chat and trajectory views.
//!
//! A view shows a developer message as a context node; when that message only adds, removes
//! and redefines tools, [`notice`] gives it a short title: the tool's name for a single change, a count and an
//! expandable list of names for several. The strings are fixed per [`Locale`]; "Tools updated"
//! is sentence case on purpose.

use std::fmt;

use crate::vocab::{ContentBlock, Message, Role};

/// The language of a [`Notice`].
///
/// ```
/// use mektpoy::notice::Locale;
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.set_tools([ToolSchema::no_input("grep", "Search")])?;
/// let request = agent.user_turn([Message::user("u2", "go on")])?;
/// assert_eq!(request.notice(Locale::En).unwrap().title, "Tool added: grep");
/// assert_eq!(request.notice(Locale::Zh).unwrap().title, "已添加工具：grep");
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Locale {
    /// English.
    En,
    /// Simplified Chinese.
    Zh,
}

/// What a view shows for a tool-change developer message.
///
/// One change: a `title` naming the tool, no `summary`, no `details`. Several: the title
/// "Tools updated", a `summary` counting additions, removals and redefinitions (in that
/// order, kinds without a change left out), and one `details` line per kind listing the
/// names in block order. `Display` writes `title · summary`.
///
/// ```
/// use mektpoy::notice::Locale;
/// use mektpoy::{AgentLoop, ContentBlock, Message, Session, ToolSchema, route_for};
/// let tool = |name: &str| ToolSchema::no_input(name, "");
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .build()?;
/// agent.user_turn([Message::user("u1", "hi")])?;
/// agent.append(agent.assistant("a1", [ContentBlock::text("ok")]))?;
/// agent.set_tools([tool("read"), tool("grep")])?; // an MCP server connects
/// let notice = agent.user_turn([Message::user("u2", "go on")])?.notice(Locale::En).unwrap();
/// assert_eq!(notice.to_string(), "Tools updated · 2 added");
/// assert_eq!(notice.details, ["Added: read, grep"]);
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Notice {
    /// One line: `Tool added: read`, `Tools updated`.
    pub title: String,
    /// With several changes: `2 added`, `1 added, 1 removed`.
    pub summary: Option<String>,
    /// With several changes: `Added: a, b`, then `Removed: c`; kinds without a change are left
    /// out.
    pub details: Vec<String>,
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.title)?;
        if let Some(summary) = &self.summary {
            write!(f, " · {summary}")?;
        }
        Ok(())
    }
}

/// Whether `message` is a *tool notice*: a developer message that has blocks, every one of them
/// a tool addition, removal or redefinition.
///
/// ```
/// use mektpoy::{ContentBlock, Message, notice::is_tool_notice};
/// let change = Message::developer("d1", vec![ContentBlock::addition("read").unwrap()]);
/// assert!(is_tool_notice(&change));
/// let mixed = Message::developer("d2", vec![ContentBlock::addition("read").unwrap(), ContentBlock::text("x")]);
/// assert!(!is_tool_notice(&mixed));
/// ```
#[must_use]
pub fn is_tool_notice(message: &Message) -> bool {
    message.role() == Role::Developer
        && !message.content().is_empty()
        && message.content().iter().all(ContentBlock::is_tool_change)
}

/// The notice for `message` in `locale`, or `None` when it is not a tool notice
/// ([`is_tool_notice`]). Costs O(blocks).
///
/// ```
/// use mektpoy::{ContentBlock, Message, notice::{Locale, notice}};
/// let m = Message::developer("d1", vec![ContentBlock::addition("a").unwrap(), ContentBlock::removal("b").unwrap()]);
/// let n = notice(&m, Locale::En).unwrap();
/// assert_eq!(n.to_string(), "Tools updated · 1 added, 1 removed");
/// assert_eq!(n.details, ["Added: a", "Removed: b"]);
/// assert_eq!(notice(&m, Locale::Zh).unwrap().to_string(), "工具已更新 · 新增 1 个，移除 1 个");
/// ```
#[must_use]
pub fn notice(message: &Message, locale: Locale) -> Option<Notice> {
    if !is_tool_notice(message) {
        return None;
    }
    let s = Strings::of(locale);
    // Kind of each block: 0 added, 1 removed, 2 updated (redefined).
    let kind = |b: &ContentBlock| match b {
        ContentBlock::ToolAddition(_) | ContentBlock::InlineAddition(_) => 0,
        ContentBlock::ToolRemoval(_) => 1,
        _ => 2,
    };
    if let [only] = message.content() {
        let name = only.tool_change_name()?;
        let prefix = [s.added_one, s.removed_one, s.updated_one][kind(only)];
        return Some(Notice {
            title: format!("{prefix}{name}"),
            summary: None,
            details: Vec::new(),
        });
    }
    let mut names: [Vec<&str>; 3] = Default::default();
    for block in message.content() {
        names[kind(block)].push(block.tool_change_name()?);
    }
    let counts: Vec<String> = names
        .iter()
        .zip(s.counts)
        .filter(|(n, _)| !n.is_empty())
        .map(|(n, count)| count(n.len()))
        .collect();
    let details = names
        .iter()
        .zip(s.lists)
        .filter(|(n, _)| !n.is_empty())
        .map(|(n, list)| format!("{list}{}", n.join(", ")))
        .collect();
    Some(Notice {
        title: s.updated.to_owned(),
        summary: Some(counts.join(s.separator)),
        details,
    })
}

/// The fixed strings of one locale.
struct Strings {
    added_one: &'static str,
    removed_one: &'static str,
    updated_one: &'static str,
    updated: &'static str,
    /// `N added`, `N removed`, `N updated`.
    counts: [fn(usize) -> String; 3],
    separator: &'static str,
    /// `Added: `, `Removed: `, `Updated: `.
    lists: [&'static str; 3],
}

impl Strings {
    fn of(locale: Locale) -> Strings {
        match locale {
            Locale::En => Strings {
                added_one: "Tool added: ",
                removed_one: "Tool removed: ",
                updated_one: "Tool updated: ",
                updated: "Tools updated",
                counts: [
                    |n| format!("{n} added"),
                    |n| format!("{n} removed"),
                    |n| format!("{n} updated"),
                ],
                separator: ", ",
                lists: ["Added: ", "Removed: ", "Updated: "],
            },
            Locale::Zh => Strings {
                added_one: "已添加工具：",
                removed_one: "已移除工具：",
                updated_one: "已更新工具：",
                updated: "工具已更新",
                counts: [
                    |n| format!("新增 {n} 个"),
                    |n| format!("移除 {n} 个"),
                    |n| format!("更新 {n} 个"),
                ],
                separator: "，",
                lists: ["新增：", "移除：", "更新："],
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::MessageSource;
    use serde_json::json;

    fn dev(blocks: &[&str]) -> Message {
        let content = blocks
            .iter()
            .map(|b| match b.split_at(1) {
                ("+", name) => ContentBlock::addition(name).unwrap(),
                ("-", name) => ContentBlock::removal(name).unwrap(),
                ("~", name) => ContentBlock::redefinition(name).unwrap(),
                _ => ContentBlock::text(*b),
            })
            .collect();
        Message::developer("d1", content)
    }

    /// `(title, summary, details)` or `None`, for one table row.
    fn shown(m: &Message, locale: Locale) -> Option<(String, Option<String>, Vec<String>)> {
        notice(m, locale).map(|n| (n.title, n.summary, n.details))
    }

    fn row(
        title: &str,
        summary: Option<&str>,
        details: &[&str],
    ) -> Option<(String, Option<String>, Vec<String>)> {
        Some((
            title.to_owned(),
            summary.map(str::to_owned),
            details.iter().map(|d| (*d).to_owned()).collect(),
        ))
    }

    #[test]
    fn examples_n1_to_n4_and_more_in_both_languages() {
        let cases = [
            // N1
            (
                vec!["+read"],
                row("Tool added: read", None, &[]),
                row("已添加工具：read", None, &[]),
            ),
            (
                vec!["-fetch"],
                row("Tool removed: fetch", None, &[]),
                row("已移除工具：fetch", None, &[]),
            ),
            // N2
            (
                vec!["+a", "+b"],
                row("Tools updated", Some("2 added"), &["Added: a, b"]),
                row("工具已更新", Some("新增 2 个"), &["新增：a, b"]),
            ),
            (
                vec!["-a", "-b", "-c"],
                row("Tools updated", Some("3 removed"), &["Removed: a, b, c"]),
                row("工具已更新", Some("移除 3 个"), &["移除：a, b, c"]),
            ),
            // N3
            (
                vec!["+a", "-b"],
                row(
                    "Tools updated",
                    Some("1 added, 1 removed"),
                    &["Added: a", "Removed: b"],
                ),
                row(
                    "工具已更新",
                    Some("新增 1 个，移除 1 个"),
                    &["新增：a", "移除：b"],
                ),
            ),
            // Interleaved: names listed per kind in block order, additions first.
            (
                vec!["-x", "+c", "-y", "+d", "+e"],
                row(
                    "Tools updated",
                    Some("3 added, 2 removed"),
                    &["Added: c, d, e", "Removed: x, y"],
                ),
                row(
                    "工具已更新",
                    Some("新增 3 个，移除 2 个"),
                    &["新增：c, d, e", "移除：x, y"],
                ),
            ),
            // N5
            (
                vec!["~a"],
                row("Tool updated: a", None, &[]),
                row("已更新工具：a", None, &[]),
            ),
            // N6
            (
                vec!["+a", "~b"],
                row(
                    "Tools updated",
                    Some("1 added, 1 updated"),
                    &["Added: a", "Updated: b"],
                ),
                row(
                    "工具已更新",
                    Some("新增 1 个，更新 1 个"),
                    &["新增：a", "更新：b"],
                ),
            ),
            // All three kinds, in the fixed order added, removed, updated.
            (
                vec!["~c", "-b", "+a"],
                row(
                    "Tools updated",
                    Some("1 added, 1 removed, 1 updated"),
                    &["Added: a", "Removed: b", "Updated: c"],
                ),
                row(
                    "工具已更新",
                    Some("新增 1 个，移除 1 个，更新 1 个"),
                    &["新增：a", "移除：b", "更新：c"],
                ),
            ),
            // N4
            (vec!["+a", "x"], None, None),
            (vec!["note"], None, None),
            (vec![], None, None),
        ];
        for (blocks, en, zh) in cases {
            let m = dev(&blocks);
            assert_eq!(shown(&m, Locale::En), en, "{blocks:?} en");
            assert_eq!(shown(&m, Locale::Zh), zh, "{blocks:?} zh");
            assert_eq!(is_tool_notice(&m), en.is_some(), "{blocks:?}");
        }
    }

    #[test]
    fn display_joins_title_and_summary() {
        let one = notice(&dev(&["+read"]), Locale::En).unwrap();
        assert_eq!(one.to_string(), "Tool added: read");
        let two = notice(&dev(&["+a", "+b"]), Locale::En).unwrap();
        assert_eq!(two.to_string(), "Tools updated · 2 added");
        let zh = notice(&dev(&["+a", "-b"]), Locale::Zh).unwrap();
        assert_eq!(zh.to_string(), "工具已更新 · 新增 1 个，移除 1 个");
    }

    #[test]
    fn only_developer_messages_with_only_tool_changes_are_notices() {
        let other = ContentBlock::other(json!({"type": "image", "url": "x"})).unwrap();
        let not_notices = [
            Message::developer(
                "d",
                vec![ContentBlock::addition("a").unwrap(), other.clone()],
            ),
            Message::developer("d", vec![other]),
            // A non-developer role never is, whatever its blocks (validation refuses such a
            // message at append; a hand-built one must still not read as a notice).
            Message::new(
                "u",
                Role::User,
                vec![ContentBlock::addition("a").unwrap()],
                MessageSource::User,
            ),
            Message::user("u", "Tool added: a"),
        ];
        for m in not_notices {
            assert!(!is_tool_notice(&m), "{m:?}");
            assert_eq!(notice(&m, Locale::En), None, "{m:?}");
            assert_eq!(notice(&m, Locale::Zh), None, "{m:?}");
        }
    }
}
