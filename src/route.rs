//! Routes: what one provider endpoint and model accept (SPEC §6).
//!
//! A route only supplies capabilities; the configuration that is logged comes from the loop.
//! Every built-in entry carries the evidence its capabilities rest on, and the decision rule
//! in `docs/capability-rule.md` says which evidence buys which mode.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// How a route takes tool changes in history (SPEC §5). `None` where a route has no mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolUpdateMode {
    /// Additions of deferred declarations *and* removals are accepted in history and keep
    /// the cached prefix: removed definitions stay declared, removal blocks are sent.
    InHistory,
    /// Additions are accepted, removals are not: declarations of names that left the
    /// effective set are dropped, and so are removal blocks.
    AdditionOnly,
}

impl ToolUpdateMode {
    /// The JSON spelling (`"in-history"`, `"addition-only"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolUpdateMode::InHistory => "in-history",
            ToolUpdateMode::AdditionOnly => "addition-only",
        }
    }
}

/// The wire format a route speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireApi {
    /// The Messages API (DeepSeek's Anthropic-compatible endpoint, Anthropic).
    Messages,
    /// OpenAI-compatible chat completions.
    OpenAiChat,
}

/// What a route's capabilities rest on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// The vendor's documentation, read on a date.
    VendorDoc {
        /// Where.
        url: Cow<'static, str>,
        /// When it was read (ISO date).
        read_on: Cow<'static, str>,
    },
    /// An end-to-end test of this crate against the real endpoint.
    MeasuredE2e {
        /// The test that measures it.
        test: Cow<'static, str>,
    },
    /// The original system's default entry, not verified here.
    UpstreamDefault {
        /// Where the default is recorded.
        reference: Cow<'static, str>,
    },
    /// No evidence: the route gets no mode.
    None,
}

/// One provider endpoint and model, with its capabilities and their evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// Provider id, as in `Config::provider`.
    pub provider: Cow<'static, str>,
    /// Exact model id, or `"*"` for the generic entry of a provider.
    pub model: Cow<'static, str>,
    /// Wire format.
    pub api: WireApi,
    /// Tool-update mode; `None` = changes rewrite the declarations.
    pub tool_update: Option<ToolUpdateMode>,
    /// Whether prompt updates may be appended to history as system nodes (SPEC §4.1).
    pub system_prompt_in_history: bool,
    /// Whether the tool-change beta header goes on every request.
    pub beta_always: bool,
    /// Bytes the provider's deferred-tools section adds to the cached prefix (SPEC §9).
    pub deferred_section_bytes: u32,
    /// Whether the serializer appends the reserved deferred placeholder (SPEC §7).
    pub deferred_placeholder: bool,
    /// What the capabilities rest on.
    pub evidence: Evidence,
}

impl Route {
    /// A route with no mode, no prompts in history and no evidence: what an unknown model
    /// gets. The fallback is always correct, only dearer.
    /// `const`, for built-in tables; [`Route::new`] takes runtime strings.
    pub const fn plain(provider: &'static str, model: &'static str, api: WireApi) -> Self {
        Route {
            provider: Cow::Borrowed(provider),
            model: Cow::Borrowed(model),
            api,
            tool_update: None,
            system_prompt_in_history: false,
            beta_always: false,
            deferred_section_bytes: 0,
            deferred_placeholder: false,
            evidence: Evidence::None,
        }
    }
}

impl Route {
    /// A route with no mode, no prompts in history and no evidence, for a provider and model
    /// known only at run time (read from a configuration file, say). Set the capability fields
    /// afterwards, with the evidence they rest on.
    ///
    /// ```
    /// use mektpoy::{Evidence, Route, ToolUpdateMode, WireApi};
    /// let model = String::from("my-model");
    /// let mut route = Route::new("acme", model, WireApi::Messages);
    /// route.tool_update = Some(ToolUpdateMode::AdditionOnly);
    /// route.evidence = Evidence::MeasuredE2e { test: "acme_live::addition".into() };
    /// assert_eq!(route.model, "my-model");
    /// ```
    pub fn new(
        provider: impl Into<Cow<'static, str>>,
        model: impl Into<Cow<'static, str>>,
        api: WireApi,
    ) -> Self {
        Route {
            provider: provider.into(),
            model: model.into(),
            ..Route::plain("", "", api)
        }
    }
}

/// Where the Anthropic entries' capabilities are documented: the vendor's page on
/// mid-conversation system messages and tool changes, which lists the models the
/// `mid-conversation-tool-changes-2026-07-01` beta works on.
pub const ANTHROPIC_TOOL_CHANGES_DOC: &str =
    "https://platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages";

/// The date the Anthropic model list was read (see `docs/capability-rule.md`).
pub const ANTHROPIC_TOOL_CHANGES_READ_ON: &str = "2026-11-29";

/// An **estimate**, not a documented figure: bytes the deferred-tools part of an Anthropic
/// request adds to the cached prefix, for the meter (SPEC §9).
///
/// The vendor documents that deferred declarations stay out of the cached prefix until a
/// `tool_addition` surfaces them, but not the size of what the rendered prompt holds because
/// deferred declarations exist. 512 bytes (≈ 128 tokens at ⌈bytes / 4⌉) is the order of one
/// rendered paragraph; what matters to the meter is that it is non-zero, so that a section
/// appearing or disappearing counts as a rewrite. Replace it with a measured figure once a
/// live test measures one.
pub const ANTHROPIC_DEFERRED_SECTION_BYTES: u32 = 512;

/// The model id of a generic entry: what a provider's unknown models get.
pub const ANY_MODEL: &str = "*";

/// The provider id of the generic OpenAI-compatible chat route, which unknown providers get.
pub const OPENAI_COMPATIBLE: &str = "openai-compatible";

/// One Anthropic model of the vendor's list: in-history tool changes and prompts.
const fn anthropic(model: &'static str) -> Route {
    Route {
        provider: Cow::Borrowed("anthropic"),
        model: Cow::Borrowed(model),
        api: WireApi::Messages,
        tool_update: Some(ToolUpdateMode::InHistory),
        system_prompt_in_history: true,
        beta_always: true,
        deferred_section_bytes: ANTHROPIC_DEFERRED_SECTION_BYTES,
        deferred_placeholder: true,
        evidence: Evidence::VendorDoc {
            url: Cow::Borrowed(ANTHROPIC_TOOL_CHANGES_DOC),
            read_on: Cow::Borrowed(ANTHROPIC_TOOL_CHANGES_READ_ON),
        },
    }
}

static CATALOG: &[Route] = &[
    // The original system's default entry (deepseek-harness 0.1.7-rc.2). Its real-endpoint
    // test reportedly asserts an addition followed by a cache read; a later discussion
    // reportedly says its tool_addition path breaks sessions on the official endpoint. Both
    // are reported, neither is verified here.
    Route {
        provider: Cow::Borrowed("deepseek"),
        model: Cow::Borrowed("deepseek-flash"),
        api: WireApi::Messages,
        tool_update: Some(ToolUpdateMode::AdditionOnly),
        system_prompt_in_history: true,
        beta_always: false,
        deferred_section_bytes: 0,
        deferred_placeholder: false,
        evidence: Evidence::UpstreamDefault {
            reference: Cow::Borrowed(
                "deepseek-harness 0.1.7-rc.2, commit bc8c0dbf40 (PR #4844): default \
                        deepseek-flash catalog entry, addition-only (reported, not verified here)",
            ),
        },
    },
    Route::plain("deepseek", "deepseek-v4-pro", WireApi::Messages),
    // The models the vendor lists for mid-conversation tool changes, by exact API id.
    anthropic("claude-fable-5-1"),
    anthropic("claude-mythos-5-1"),
    anthropic("claude-fable-5"),
    anthropic("claude-mythos-5"),
    anthropic("claude-opus-5-5"),
    anthropic("claude-opus-4-8"),
    anthropic("claude-opus-5"),
    // Generic entries: what unknown models get. No evidence, no mode.
    Route::plain("deepseek", ANY_MODEL, WireApi::Messages),
    Route::plain("anthropic", ANY_MODEL, WireApi::Messages),
    Route::plain(OPENAI_COMPATIBLE, ANY_MODEL, WireApi::OpenAiChat),
];

/// The built-in routes (SPEC §6), each with the evidence its capabilities rest on.
///
/// Exact model entries first, then one generic entry (model [`ANY_MODEL`]) per provider and
/// the generic OpenAI-compatible chat route; generic entries have no mode. Which evidence buys
/// which mode is the decision rule of `docs/capability-rule.md`:
/// [`InHistory`](ToolUpdateMode::InHistory) only with vendor documentation or a measured
/// end-to-end test, [`AdditionOnly`](ToolUpdateMode::AdditionOnly) when additions are
/// evidenced and removals are not, no mode without evidence.
///
/// ```
/// use mektpoy::{catalog, ToolUpdateMode};
/// let flash = catalog().iter().find(|r| r.model == "deepseek-flash").unwrap();
/// assert_eq!(flash.tool_update, Some(ToolUpdateMode::AdditionOnly));
/// ```
pub fn catalog() -> &'static [Route] {
    CATALOG
}

/// The route for a provider and model: the catalog entry with this exact provider and model
/// id, else the provider's generic entry, else the generic OpenAI-compatible chat route.
///
/// **Ids are matched exactly** (a dated snapshot id or another spelling is an unknown
/// model): an unknown model gets no mode, which is always correct, only dearer. The returned
/// route names the entry that applies, so `provider` and `model` may be the generic ones;
/// the logged configuration comes from the loop, not from the route. O(catalog).
///
/// ```
/// use mektpoy::{route_for, ToolUpdateMode};
/// assert_eq!(route_for("anthropic", "claude-opus-5").tool_update, Some(ToolUpdateMode::InHistory));
/// assert_eq!(route_for("anthropic", "claude-sonnet-5").tool_update, None);
/// assert_eq!(route_for("acme", "acme-1").provider, "openai-compatible");
/// ```
pub fn route_for(provider: &str, model: &str) -> Route {
    let find = |p: &str, m: &str| CATALOG.iter().find(|r| r.provider == p && r.model == m);
    find(provider, model)
        .or_else(|| find(provider, ANY_MODEL))
        .or_else(|| find(OPENAI_COMPATIBLE, ANY_MODEL))
        .cloned()
        .unwrap_or(Route::plain(
            OPENAI_COMPATIBLE,
            ANY_MODEL,
            WireApi::OpenAiChat,
        ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn evidence_kind(e: &Evidence) -> &'static str {
        match e {
            Evidence::VendorDoc { .. } => "VendorDoc",
            Evidence::MeasuredE2e { .. } => "MeasuredE2e",
            Evidence::UpstreamDefault { .. } => "UpstreamDefault",
            Evidence::None => "None",
        }
    }

    /// The decision rule of `docs/capability-rule.md`, checked on every built-in entry.
    #[test]
    fn every_entry_follows_the_decision_rule() {
        for r in catalog() {
            let id = format!("{}/{}", r.provider, r.model);
            let evidenced = r.evidence != Evidence::None;
            match r.tool_update {
                Some(ToolUpdateMode::InHistory) => assert!(
                    matches!(
                        r.evidence,
                        Evidence::VendorDoc { .. } | Evidence::MeasuredE2e { .. }
                    ),
                    "{id}: in-history needs vendor documentation or a measured test"
                ),
                Some(ToolUpdateMode::AdditionOnly) => {
                    assert!(evidenced, "{id}: addition-only needs evidence")
                }
                None => {}
            }
            if r.system_prompt_in_history {
                assert!(evidenced, "{id}: prompts in history need evidence");
            }
            if r.beta_always || r.deferred_placeholder {
                assert!(
                    r.tool_update.is_some(),
                    "{id}: beta/placeholder without a mode"
                );
            }
            if r.deferred_placeholder {
                assert!(
                    r.deferred_section_bytes > 0,
                    "{id}: placeholder for no section"
                );
            }
            if r.model == ANY_MODEL {
                assert_eq!(r.tool_update, None, "{id}: a generic entry has no mode");
                assert!(!r.system_prompt_in_history, "{id}");
            }
            match &r.evidence {
                Evidence::VendorDoc { url, read_on } => {
                    assert!(url.starts_with("https://"), "{id}: {url}");
                    let date: Vec<_> = read_on.split('-').collect();
                    assert!(
                        date.len() == 3
                            && [4, 2, 2].iter().zip(&date).all(|(n, p)| {
                                p.len() == *n && p.bytes().all(|b| b.is_ascii_digit())
                            }),
                        "{id}: read_on {read_on} is not an ISO date"
                    );
                }
                Evidence::UpstreamDefault { reference } => {
                    assert!(reference.contains("reported, not verified here"), "{id}")
                }
                Evidence::MeasuredE2e { test } => assert!(!test.is_empty(), "{id}"),
                Evidence::None => {}
            }
        }
    }

    #[test]
    fn entries_are_unique_and_every_provider_has_a_generic_entry() {
        let mut seen = HashSet::new();
        for r in catalog() {
            assert!(
                seen.insert((&*r.provider, &*r.model)),
                "{}/{} twice",
                r.provider,
                r.model
            );
        }
        for r in catalog() {
            assert!(
                seen.contains(&(&*r.provider, ANY_MODEL)),
                "{} has no generic entry",
                r.provider
            );
        }
    }

    #[test]
    fn deepseek_entries() {
        let flash = route_for("deepseek", "deepseek-flash");
        assert_eq!(
            (flash.api, flash.tool_update, flash.system_prompt_in_history),
            (WireApi::Messages, Some(ToolUpdateMode::AdditionOnly), true)
        );
        assert_eq!(
            (flash.beta_always, flash.deferred_section_bytes),
            (false, 0)
        );
        let Evidence::UpstreamDefault { reference } = flash.evidence else {
            panic!("deepseek-flash rests on the upstream default");
        };
        for part in ["deepseek-harness", "0.1.7-rc.2", "bc8c0dbf40", "#4844"] {
            assert!(reference.contains(part), "{part}");
        }
        let pro = route_for("deepseek", "deepseek-v4-pro");
        assert_eq!(pro.model, "deepseek-v4-pro");
        assert_eq!(
            (pro.tool_update, pro.system_prompt_in_history),
            (None, false)
        );
    }

    /// The vendor's list for `mid-conversation-tool-changes-2026-07-01`, by exact id.
    #[test]
    fn anthropic_entries_are_the_vendor_list() {
        let listed: Vec<&str> = catalog()
            .iter()
            .filter(|r| r.provider == "anthropic" && r.model != ANY_MODEL)
            .map(|r| &*r.model)
            .collect();
        assert_eq!(
            listed,
            [
                "claude-fable-5-1",
                "claude-mythos-5-1",
                "claude-fable-5",
                "claude-mythos-5",
                "claude-opus-5-5",
                "claude-opus-4-8",
                "claude-opus-5",
            ]
        );
        for model in listed {
            let r = route_for("anthropic", model);
            assert_eq!(r.model, model);
            assert_eq!(r.api, WireApi::Messages);
            assert_eq!(r.tool_update, Some(ToolUpdateMode::InHistory), "{model}");
            assert!(r.system_prompt_in_history && r.beta_always, "{model}");
            assert!(r.deferred_section_bytes > 0, "{model}");
            assert_eq!(
                r.evidence,
                Evidence::VendorDoc {
                    url: ANTHROPIC_TOOL_CHANGES_DOC.into(),
                    read_on: ANTHROPIC_TOOL_CHANGES_READ_ON.into()
                }
            );
        }
    }

    #[test]
    fn unknown_models_get_no_mode() {
        for (provider, model, expect_provider, api) in [
            // Excluded by the vendor's page.
            (
                "anthropic",
                "claude-sonnet-5",
                "anthropic",
                WireApi::Messages,
            ),
            // Not on the vendor's list (third parties claim it; not evidence).
            (
                "anthropic",
                "claude-sonnet-5-5",
                "anthropic",
                WireApi::Messages,
            ),
            // Ids are exact: a dated snapshot or another spelling is unknown.
            (
                "anthropic",
                "claude-opus-5-20260724",
                "anthropic",
                WireApi::Messages,
            ),
            ("anthropic", "Claude-Opus-5", "anthropic", WireApi::Messages),
            (
                "deepseek",
                "deepseek-flash-2",
                "deepseek",
                WireApi::Messages,
            ),
            ("deepseek", "*", "deepseek", WireApi::Messages),
            ("acme", "acme-large", OPENAI_COMPATIBLE, WireApi::OpenAiChat),
            (
                "Anthropic",
                "claude-opus-5",
                OPENAI_COMPATIBLE,
                WireApi::OpenAiChat,
            ),
            ("", "", OPENAI_COMPATIBLE, WireApi::OpenAiChat),
        ] {
            let r = route_for(provider, model);
            assert_eq!(r.tool_update, None, "{provider}/{model}");
            assert!(
                !r.system_prompt_in_history && !r.beta_always,
                "{provider}/{model}"
            );
            assert_eq!(
                (&*r.provider, &*r.model, r.api),
                (expect_provider, ANY_MODEL, api)
            );
            assert_eq!(r.evidence, Evidence::None);
        }
    }

    /// The tables of `docs/capability-rule.md` and its Chinese twin list every entry with
    /// its current mode, evidence and section size (a staleness guard).
    #[test]
    fn capability_rule_docs_list_every_entry() {
        for (doc, none) in [
            (include_str!("../docs/capability-rule.md"), "none"),
            (include_str!("../docs/capability-rule.zh.md"), "无"),
        ] {
            let rows: Vec<Vec<&str>> = doc
                .lines()
                .filter(|l| l.starts_with("| `"))
                .map(|l| l.split('|').map(str::trim).collect())
                .collect();
            assert_eq!(rows.len(), catalog().len(), "one table row per entry");
            for (row, r) in rows.iter().zip(catalog()) {
                let cell = |i: usize| row[i + 1].trim_matches('`');
                assert_eq!((cell(0), cell(1)), (&*r.provider, &*r.model));
                let mode = r.tool_update.map_or(none, ToolUpdateMode::as_str);
                assert_eq!(cell(3), mode, "{}/{}", r.provider, r.model);
                assert!(cell(6).starts_with(&r.deferred_section_bytes.to_string()));
                assert_eq!(cell(8), evidence_kind(&r.evidence));
            }
        }
    }
}
